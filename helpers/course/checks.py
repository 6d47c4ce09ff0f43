"""The notebooks' longer checks, one function each, so that a check cell is one call.

Each check compares a learner's function with the package's and fails with a message that names the likely
mistake. The package's pieces come in as arguments (the course machinery imports only the ground), so a check
runs exactly what the notebook runs.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from unittest import mock

import torch


class RecordingScaler:
    """A stand-in for an enabled ``torch.amp.GradScaler`` that records what the training step asks of it.

    Like the real one it multiplies the loss by its scale, divides the gradients by it in ``unscale_``, skips the
    update when a gradient is inf or NaN and then halves its scale. Unlike it, it records every call, the loss and
    the gradient norm that ``unscale_`` and the update see, and at step ``overflow_at`` it makes the scaled loss
    overflow, as fp16 does now and then (``None``: never).
    """

    def __init__(self, scale: float = 2.0**10, overflow_at: int | None = 3):
        self.factor, self.overflow_at, self.found_inf = scale, overflow_at, False
        self.calls, self.losses, self.norm_at_unscale, self.norm_at_step = [], [], [], []

    def is_enabled(self):
        return True

    def get_scale(self):
        return self.factor

    def state_dict(self):
        return {"scale": self.factor}

    def load_state_dict(self, state):
        self.factor = state["scale"]

    @staticmethod
    def _grads(optimizer):
        return [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]

    def _norm(self, optimizer):
        grads = self._grads(optimizer)
        return float(torch.linalg.vector_norm(torch.stack([g.float().norm() for g in grads]))) if grads else 0.0

    def scale(self, loss):
        self.calls.append("scale")
        self.losses.append(float(loss.detach()))
        overflow = sum(c == "scale" for c in self.calls) == self.overflow_at
        return loss * (float("inf") if overflow else self.factor)  # inf: what an fp16 overflow leaves behind

    def unscale_(self, optimizer):
        self.calls.append("unscale_")
        self.norm_at_unscale.append(self._norm(optimizer))
        for g in self._grads(optimizer):
            g.div_(self.factor)
        self.found_inf = not all(bool(torch.isfinite(g).all()) for g in self._grads(optimizer))

    def step(self, optimizer):
        self.calls.append("step")
        self.norm_at_step.append(self._norm(optimizer))
        if not self.found_inf:  # an overflowed step is skipped: the weights stay as they are
            optimizer.step()

    def update(self):
        self.calls.append("update")
        if self.found_inf:
            self.factor /= 2
        self.found_inf = False


MISSING_SCALER_CALL = {  # what each call of the scaler is for, when a step leaves it out
    "update": "scaler.update() was never called: after an overflow the scale must come down",
    "step": "scaler.step(optimizer) was never called: optimizer.step() alone cannot skip an overflow",
    "unscale_": "the gradients were never unscaled: clipping saw them 1,024 times too large",
    "scale": "the loss was never scaled: small fp16 gradients would underflow to 0",
}


def check_training_step(loop_fn, package, fresh, valid_batches, cfg, steps: int = 6) -> None:
    """Run ``steps`` steps of the learner's training loop and of the package's, with a gradient scaler switched on.

    loop_fn: the learner's ``train_loop(model, batcher, valid_batches, cfg, out_dir, **run_options)``.
    package: ``helpers.training.train`` (its ``train`` is the reference; its ``make_scaler`` is patched to hand
    each run a :class:`RecordingScaler`). fresh: a function returning ``(model, batcher)``, seeded, called once
    per run so both start from the same weights and batches. Both run on the CPU in fp32.

    Fails, with the likely cause, when the learner's step: calls the scaler's methods in another order or leaves one
    out (no ``update``: the scale never comes down; ``optimizer.step()`` instead of ``scaler.step``: an overflow
    is not skipped); clips before unscaling (the threshold then applies to gradients 1,024 times too large);
    forgets ``zero_grad`` (gradients pile up); drops label smoothing or the prefix lengths (another loss); does not
    count the overflowing step as skipped; or ends with weights that differ beyond float rounding.
    """
    small = dataclasses.replace(
        cfg, steps=steps, minutes=None, eval_interval=steps, log_interval=1, checkpoint_minutes=1e6, precision="fp32"
    )
    runs = {}
    with torch.random.fork_rng(devices=[]):  # leaves the random state of the notebook's real run untouched
        for name, fn in (("yours", loop_fn), ("package", package.train)):
            scaler = RecordingScaler()
            with mock.patch.object(package, "make_scaler", lambda *args, s=scaler, **kwargs: s):  # TrainingRun's
                model, batcher = fresh()
                with tempfile.TemporaryDirectory() as out:
                    result = fn(model, batcher, valid_batches, small, out, device="cpu", progress=False)
            runs[name] = (scaler, result, model.state_dict())
    (mine, my_result, my_weights), (ref, ref_result, ref_weights) = runs["yours"], runs["package"]
    same_scaler_calls(mine.calls, ref.calls, steps)
    same_losses_and_norms(mine, ref, steps, clip=small.grad_clip)
    assert my_result.skipped_steps == ref_result.skipped_steps == 1, (
        f"{my_result.skipped_steps} steps counted as skipped, expected 1 (the overflow at step 3): after an overflow "
        "scaler.update() lowers the scale, and that is how the run knows the step was skipped"
    )
    for name, ours in my_weights.items():
        torch.testing.assert_close(
            ours, ref_weights[name], rtol=1e-4, atol=1e-6, msg=lambda m, name=name: f"after {steps} steps {name}: {m}"
        )


def same_scaler_calls(mine: list[str], ref: list[str], steps: int) -> None:
    """The gradient scaler's calls of a student's loop against the package's, step by step (Exercise 3.3)."""
    per_step = len(ref) // steps  # the package's step calls each method once
    for k in range(steps):
        calls, want = mine[per_step * k : per_step * (k + 1)], ref[per_step * k : per_step * (k + 1)]
        absent = [MISSING_SCALER_CALL[c] for c in MISSING_SCALER_CALL if c in want and c not in calls]
        assert calls == want, f"step {k + 1}: the scaler saw {calls}" + (
            f": {absent[0]}" if absent else ": each call once per step, in the order that lets the scaler work"
        )
    assert len(mine) == len(ref), f"the scaler saw {len(mine)} calls in {steps} steps: {mine}"


def _same(a: float, b: float) -> bool:  # equal up to float rounding; NaN equals NaN (the overflowing step)
    return math.isclose(a, b, rel_tol=1e-5) or (math.isnan(a) and math.isnan(b))


def same_losses_and_norms(mine: RecordingScaler, ref: RecordingScaler, steps: int, clip: float) -> None:
    """The losses and gradient norms a student's loop gave the scaler against the package's (Exercise 3.3)."""
    for k in range(steps):
        assert _same(mine.losses[k], ref.losses[k]), (
            f"step {k + 1}: loss {mine.losses[k]:.6f}, helpers.training.train.train's {ref.losses[k]:.6f}: check the "
            "forward pass (the prefix lengths) and the loss (label smoothing)"
        )
        a, b = mine.norm_at_unscale[k], ref.norm_at_unscale[k]
        if not _same(a, b):
            if a <= clip * 1.001 < b:
                why = "they were clipped before they were unscaled, and the threshold is about the true gradients"
            elif k > 0 and a > b:
                why = "they are larger: are the previous step's gradients still there?"
            else:
                why = "compare the backward pass with the package's"
            raise AssertionError(
                f"step {k + 1}: unscale_ saw gradients of norm {a:.6g}; scaled by {RecordingScaler().factor:g} they should have "
                f"norm {b:.6g}: {why}"
            )
        a, b = mine.norm_at_step[k], ref.norm_at_step[k]
        assert _same(a, b), f"step {k + 1}: the update saw gradients of norm {a:.6g}, expected {b:.6g}" + (
            f": they were not clipped to grad_clip = {clip:g}" if a > clip * 1.001 else ""
        )
