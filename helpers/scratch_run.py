"""Notebook 03's run, as the notebooks after it find it: its record, the data it trained on, and its model.

Notebook 03 writes ``03_scratch.json`` (``evaluate.metrics_record``) to ``reports/metrics/`` and beside its
checkpoint (on Google Drive on Colab, where each notebook gets a fresh machine). Notebooks 04 and 07 read it back:
the same data file, sample size and seed give the same training pairs and test sets (loading, cleaning and
splitting are deterministic), and the checkpoint is the model. When notebook 03 has not run in this mode, they
say so and train a stand-in briefly, labelled as such.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import pipeline, runtime
from .commands import train_command
from .run_folder import RunFolder
from .text import sources

RECORD = "03_scratch.json"
PRESETS = ("t4", "cpu")  # the run folders notebook 03 writes in full mode: runs/03_scratch-<preset>


def record_places(drive: Path | None) -> list[Path]:
    """Where notebook 03 leaves its record: the metrics folder, then its run folders on Drive and in the checkout."""
    bases = [base for base in (drive, runtime.repo_root()) if base]
    return [runtime.metrics_dir()] + [base / "runs" / f"03_scratch-{preset}" for base in bases for preset in PRESETS]


@dataclass
class ScratchData:
    """What notebook 03 trained on (or its defaults): ``load_clean_split(data, columns, limit=limit, seed=seed)``."""

    data: str
    limit: int | None
    columns: list[str] | None
    seed: int
    record: dict | None  # notebook 03's record, None when none of this mode was found
    note: str  # one line that says which


def find_scratch_data(quick: bool, seed: int, drive: Path | None = None) -> ScratchData:
    """Notebook 03's data from its record when one of this mode (quick or full) is found, else notebook 03's
    defaults (the built-in corpus in quick mode, Tatoeba otherwise: a local copy, or downloaded)."""
    places = record_places(drive)
    records = [json.loads((p / RECORD).read_text(encoding="utf-8")) for p in places if (p / RECORD).is_file()]
    record = next((r for r in records if r.get("quick", False) == quick), None)  # the first of this mode
    if record is not None:
        info = record["data"]
        data = info["source"]
        if data != "builtin" and not Path(data).is_file():  # e.g. a Colab cache that did not survive
            data = str(sources.find_local_tatoeba() or sources.fetch_tatoeba())
        seed = record["training"]["config"]["seed"]
        return ScratchData(data, info["limit"], info["columns"], seed, record,
                           f"notebook 03's data: {data} (limit {info['limit']}, seed {seed})")  # fmt: skip
    data = "builtin" if quick else str(sources.find_local_tatoeba() or sources.fetch_tatoeba())
    limit = 6000 if quick else None
    why = "only of another mode" if records else "none"
    return ScratchData(data, limit, None, seed, None,
                       f"no notebook 03 record for this mode ({why}) in {[str(p) for p in places]}: "
                       f"using {data} (limit {limit}, seed {seed})")  # fmt: skip


@dataclass
class ScratchModel:
    """Notebook 03's model, or a stand-in trained here: ``run`` is what ``pipeline.load_run`` returns, ``training``
    how it was trained (``train.training_summary``'s layout: steps, minutes, tokens, tokens_per_s, preset, config)."""

    run: pipeline.Run
    stand_in: bool
    training: dict
    note: str

    @property
    def minutes(self) -> float:
        return self.training["minutes"]

    @property
    def tokens(self) -> int:
        return self.training["tokens"]


def find_scratch_model(scratch: ScratchData, device, quick: bool, *, progress: bool = True) -> ScratchModel:
    """The checkpoint notebook 03's record names; when it is missing, the ``cpu`` preset (``tiny`` in quick mode)
    trained briefly on the same pairs into a temporary folder, and said so."""
    record = scratch.record
    folder = Path(record["model"]["checkpoint"]) if record else None
    if folder is not None and RunFolder(folder).checkpoint.is_file():
        run = pipeline.load_run(folder, device=device)
        return ScratchModel(run, False, record["training"], f"notebook 03's model: {folder}, step {run.step}")
    stand_in = Path(tempfile.mkdtemp(prefix="scratch-stand-in-"))
    preset = "tiny" if quick else "cpu"
    train_command(scratch.data, columns=tuple(scratch.columns) if scratch.columns else None,
                  minutes=2.0 if quick else 5.0, steps=600 if quick else None, out=stand_in, preset=preset,
                  seed=scratch.seed, limit=scratch.limit, progress=progress)  # fmt: skip
    run = pipeline.load_run(stand_in, device=device)
    training = json.loads(RunFolder(stand_in).train_summary.read_text(encoding="utf-8"))
    return ScratchModel(run, True, training,
                        f"notebook 03's checkpoint is missing ({folder}): a stand-in, the {preset} preset trained "
                        f"here for {training['minutes']:.1f} min")  # fmt: skip
