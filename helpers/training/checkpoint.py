"""Checkpoints that survive a Colab disconnect or a SIGKILL, and refuse a different configuration.

One run folder (:class:`helpers.run_folder.RunFolder`) holds everything a resume needs::

    out/
      checkpoint.pt     model, optimizer, scaler, step, RNG states, data position, configuration
      checkpoint.json   the same step and configuration, readable by people
      tokenizer/        the tokenizer files (written once, before the first step)

Every file is written to a temporary name and then renamed over the old one (``os.replace`` is
atomic), so a kill in the middle of a save leaves the previous checkpoint intact. Everything is
stored as tensors, numbers, strings, lists and dicts, so ``torch.load(..., weights_only=True)``
can read it: loading a checkpoint never runs code from the file.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..run_folder import CHECKPOINT, RunFolder

# the run folder's atomic writes and the refusal error live in the ground layer (the text layer writes them too)
from ..runtime import (
    ConfigMismatchError,
    atomic_torch_save,
    atomic_write_text,
)

FORMAT_VERSION = 1


# ----------------------------------------------------------------------------------------------
# random number generators, stored so that weights_only=True can load them


def rng_state() -> dict:
    """Python, NumPy, torch CPU and CUDA generator states as tensors and plain lists."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": {"version": int(version), "state": [int(x) for x in internal], "gauss": gauss},
        "numpy": {
            "name": str(name),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def set_rng_state(state: dict) -> None:
    """Inverse of :func:`rng_state`. CUDA states are restored only when the same number of GPUs is present."""
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"]), py["gauss"]))
    npst = state["numpy"]
    np.random.set_state(
        (npst["name"], npst["keys"].numpy().astype(np.uint32), npst["pos"], npst["has_gauss"], npst["cached"])
    )
    torch.set_rng_state(state["torch"].cpu())
    cuda = state.get("cuda") or []
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([s.cpu() for s in cuda])


# ----------------------------------------------------------------------------------------------
# configuration checks


def flatten(config: dict, prefix: str = "") -> dict:
    """``{"model": {"d_model": 256}}`` -> ``{"model.d_model": 256}`` (lists and tuples compare as lists)."""
    flat = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = list(value) if isinstance(value, tuple) else value
    return flat


def config_differences(old: dict, new: dict, ignore: tuple[str, ...] = ()) -> list[tuple[str, Any, Any]]:
    """``(field, old value, new value)`` for every field that differs, fields in ``ignore`` excepted.

    A field present on one side only counts as a difference (its missing value is shown as ``<absent>``).
    """
    a, b = flatten(old), flatten(new)
    missing = "<absent>"
    diffs = []
    for key in sorted(set(a) | set(b)):
        if key in ignore or any(key.startswith(i + ".") for i in ignore):
            continue
        va, vb = a.get(key, missing), b.get(key, missing)
        if va != vb:
            diffs.append((key, va, vb))
    return diffs


def check_config(saved: dict, current: dict, where: str | Path, ignore: tuple[str, ...] = ()) -> None:
    """Raise :class:`ConfigMismatchError` naming every field where ``current`` differs from ``saved``."""
    diffs = config_differences(saved, current, ignore)
    if diffs:
        lines = "\n".join(f"  {k}: {old!r} in the checkpoint, {new!r} now" for k, old, new in diffs)
        raise ConfigMismatchError(
            f"The checkpoint in {where} was made with a different configuration, so it cannot be resumed:\n{lines}\n"
            "Rerun with the checkpoint's settings to resume it, or choose a new output folder to start a fresh run."
        )


# ----------------------------------------------------------------------------------------------
# save and load


def find_checkpoint(out_dir: str | Path | None) -> Path | None:
    """The checkpoint file in ``out_dir``, or None when there is none yet."""
    if out_dir is None:
        return None
    path = RunFolder(out_dir).checkpoint
    return path if path.is_file() else None


@dataclass(frozen=True)
class ResumePoint:
    """Where a run into a folder continues: the translation phase's checkpoint and the pretraining phase's
    (``out/pretrain``), each None while that phase has none. ``train`` decides it once (:func:`resume_point`) and
    hands it to every stage, so that none looks in the folder on its own."""

    translation: Path | None = None
    pretraining: Path | None = None

    @property
    def resumes(self) -> bool:
        """Whether the folder holds a checkpoint of either phase: then its tokenizer and size are the run's."""
        return self.translation is not None or self.pretraining is not None

    @property
    def sized_by(self) -> Path | None:
        """The checkpoint whose configuration holds the size the run started with."""
        return self.translation or self.pretraining


FRESH = ResumePoint()  # a run that starts from nothing


def resume_point(out_dir: str | Path | None) -> ResumePoint:
    """What ``out_dir`` holds to continue from (:class:`ResumePoint`); :data:`FRESH` for None."""
    if out_dir is None:
        return FRESH
    return ResumePoint(find_checkpoint(out_dir), find_checkpoint(RunFolder(out_dir).pretrain))


def save_checkpoint(
    out_dir: str | Path,
    *,
    model: torch.nn.Module,
    config: dict,
    step: int,
    optimizer: torch.optim.Optimizer | None = None,
    scaler=None,
    data_state: dict | None = None,
    train_state: dict | None = None,
    history: list[dict] | None = None,
    rng_ranks: list | None = None,
) -> Path:
    """Write ``out_dir/checkpoint.pt`` atomically, then ``checkpoint.json`` for people.

    ``config`` is ``{"model": ..., "train": ..., "data": ...}`` (plain values); ``data_state`` is the batcher's
    ``state_dict()``; ``train_state`` holds counters such as tokens seen and seconds trained.
    """
    payload = {
        "format_version": FORMAT_VERSION,
        "step": int(step),
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scaler": scaler.state_dict() if scaler is not None and scaler.is_enabled() else None,
        "rng": rng_state(),
        "rng_ranks": rng_ranks,  # under torchrun: every rank's generators, in rank order
        # JSON keeps the batcher's state loadable under weights_only whatever types it uses
        "data_state": json.dumps(_plain(data_state)) if data_state is not None else None,
        "train_state": json.dumps(_plain(train_state or {})),
        "history": json.dumps(_plain(history or [])),
        "config": json.dumps(_plain(config)),
        "saved_at": time.time(),
    }
    folder = RunFolder(out_dir)
    path = atomic_torch_save(payload, folder.checkpoint)
    info = {
        "step": int(step),
        "saved_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "train_state": _plain(train_state or {}),
        "config": _plain(config),
    }
    atomic_write_text(json.dumps(info, indent=2) + "\n", folder.checkpoint_info)
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint with ``weights_only=True``; JSON fields come back as Python objects.

    ``path`` may be the run folder or the ``checkpoint.pt`` inside it.
    """
    path = Path(path)
    if path.is_dir():
        path = RunFolder(path).checkpoint
    if not path.is_file():
        raise FileNotFoundError(
            f"No checkpoint at {path}. Pass the --out folder of a training run (it holds {CHECKPOINT}), "
            "or train one first with: python -m helpers train --data PATH --minutes M --out DIR"
        )
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # a truncated or foreign file: say so instead of a pickle trace
        raise ValueError(
            f"{path} could not be read as a checkpoint ({type(err).__name__}: {err}). "
            "It may come from another program or an older version; start a fresh run in a new folder."
        ) from err
    if not isinstance(ckpt, dict) or ckpt.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path} is not a checkpoint of format {FORMAT_VERSION}; start a fresh run in a new folder.")
    for key in ("data_state", "train_state", "history", "config"):
        if isinstance(ckpt.get(key), str):
            ckpt[key] = json.loads(ckpt[key])
    return ckpt


def restore(ckpt: dict, *, model=None, optimizer=None, scaler=None, rng: bool = True) -> None:
    """Load the saved states into the given objects (those left None are skipped)."""
    if model is not None:
        model.load_state_dict(ckpt["model"])
    if optimizer is not None and ckpt.get("optimizer") is not None:
        optimizer.load_state_dict(ckpt["optimizer"])
    if scaler is not None and ckpt.get("scaler") is not None and scaler.is_enabled():
        scaler.load_state_dict(ckpt["scaler"])
    if rng:
        set_rng_state(ckpt["rng"])


def inference_weights(ckpt: dict) -> dict:
    """The weights to translate with: the trained weights.

    A checkpoint written while the moving average of the weights existed (deleted since; its code last existed in
    commit a224218) may hold one under ``"ema"``: those are the weights its run validated, so they are the ones a
    translator loads. Nothing writes that entry any more.
    """
    return ckpt["ema"]["weights"] if ckpt.get("ema") is not None else ckpt["model"]


def _plain(obj):
    """Numbers, strings, lists and dicts only (NumPy scalars and arrays, tuples and tensors converted)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj
