"""helpers.course.checks: the notebooks' long checks, run here on a tiny model without executing a notebook.

Each check is given notebook 03's own solution (it must pass) and that solution with one plausible mistake planted
(it must fail, naming the mistake).
"""

from __future__ import annotations

import time

import pytest
import torch

from helpers import runtime
from helpers.course import checks
from helpers.course.notebooks import code_cells
from helpers.nn import build_model
from helpers.text import batches, data
from helpers.training import config, train
from tests.notebooks.test_notebook03 import SCALER_MISTAKES

STEPS = 4  # the check's overflow comes at step 3; one step after it shows the scale came down


@pytest.fixture(scope="module")
def tiny():
    cfg = config.preset_config("tiny", steps=STEPS, checkpoint_minutes=1e6, seed=0)
    prepared = data.prepare_data("builtin", cfg, None, seed=0, limit=600, progress=False)

    def fresh():
        runtime.set_seed(0)
        model = build_model(cfg.model_config(prepared.tokenizer.vocab_size, "cpu"))
        return model, batches.BucketBatcher(prepared.train_batcher.examples[:128], max_tokens=cfg.max_tokens, seed=0)

    return cfg, fresh, prepared.valid_batches[:1]


def notebook_train_loop(old: str | None = None, new: str | None = None):
    """Notebook 03's solution of Exercise 3.3, with ``old`` replaced by ``new`` (once) if asked."""
    (cell,) = [c for c in code_cells("03") if "def train_loop(" in c.source]
    source = cell.source
    if old is not None:
        assert source.count(old) == 1, f"notebook 03's train_loop no longer holds {old!r} once: update this test"
        source = source.replace(old, new)
    env = {"time": time, "torch": torch, "train": train}
    exec(compile(source, "<notebook 03 train_loop>", "exec"), env)
    return env["train_loop"]


def test_the_notebooks_own_training_step_passes(tiny):
    cfg, fresh, valid = tiny
    checks.check_training_step(notebook_train_loop(), train, fresh, valid, cfg, steps=STEPS)


# two of the scaler mistakes tests/notebooks/test_notebook03.py plants in the notebook's own run (the `notebook` group): the
# cheapest, a few seconds each
STEP_MISTAKES = {name: SCALER_MISTAKES[name] for name in ("update forgotten", "clipping before unscaling")}


@pytest.mark.parametrize("mistake", list(STEP_MISTAKES))
def test_the_training_step_check_names_each_planted_mistake(tiny, mistake):
    cfg, fresh, valid = tiny
    old, new, message = STEP_MISTAKES[mistake]
    with pytest.raises(AssertionError, match=message):
        checks.check_training_step(notebook_train_loop(old, new), train, fresh, valid, cfg, steps=STEPS)


def test_the_recording_scaler_scales_overflows_once_and_then_halves():
    scaler = checks.RecordingScaler(overflow_at=2)
    assert float(scaler.scale(torch.tensor(3.0))) == 3.0 * 2**10
    assert float(scaler.scale(torch.tensor(3.0))) == float("inf")  # the planted fp16 overflow
    scaler.found_inf = True
    scaler.update()
    assert scaler.get_scale() == 2**9 and scaler.calls == ["scale", "scale", "update"] and scaler.losses == [3.0, 3.0]
