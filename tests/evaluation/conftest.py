"""The evaluation tests' shared run folder: what `python -m helpers train` leaves after 3 steps of the tiny preset."""

from __future__ import annotations

import pytest

from helpers import pipeline
from helpers.cli import train_command


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder as `python -m helpers train` leaves it: 3 steps of the tiny preset on invented pairs.

    Learned positions: the checks of `translate` and `evaluate` need a model that says something different for each
    line. After 3 steps (and 30) the default rotary model ends every sentence at once; learned positions' does not."""
    from helpers.text.corpus import builtin_corpus

    folder = tmp_path_factory.mktemp("eval")
    data = folder / "pairs.tsv"
    data.write_text("".join(f"{fr}\t{en}\n" for fr, en in builtin_corpus(300, seed=5, difficulty=1)), encoding="utf-8")
    train_command(
        str(data), None, None, 3, folder / "run", "tiny", 0, progress=False, overrides={"positional": "learned"}
    )
    return folder / "run"


@pytest.fixture(scope="module")
def run(run_dir):
    return pipeline.load_run(run_dir, device="cpu")
