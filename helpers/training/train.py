"""Training French->English: the step's building blocks and the loop's bookkeeping.

A training step is written out where it is read: notebook 03 and :func:`train` run the same ~20 lines (the
forward pass in mixed precision, :func:`loss_fn`, the gradient scaler, clipping and the update). Everything around the step
lives once, in :class:`TrainingRun`: resume from a checkpoint, the data stream, the learning-rate
schedule, the progress bar, validation at intervals, periodic checkpoints, clear stops on NaN. :func:`train`
adds a clear message on out-of-memory. The settings are a :class:`helpers.training.config.TrainConfig`;
``python -m helpers train`` (``helpers.cli``) builds data, tokenizer and model, then calls :func:`train`.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from ..progress import progress_bar
from ..runtime import resolve_precision
from . import checkpoint as ckpt_lib
from . import distributed
from .config import RESUMABLE_FIELDS, TrainConfig, with_added_fields, without_deleted_levers
from .optim import lr_at, make_optimizer


class _FromOutDir:
    def __repr__(self) -> str:
        return "FROM_OUT_DIR"


FROM_OUT_DIR = _FromOutDir()  # resume_from's default: the checkpoint out_dir holds, if it holds one

# ----------------------------------------------------------------------------------------------
# building blocks of one step


def autocast_context(device: torch.device | str, precision: str = "auto"):
    """The autocast context for a forward pass: fp16/bf16 on CUDA, fp32 (no autocast) on CPU unless asked."""
    device = torch.device(device)
    p = resolve_precision(device, precision)
    if p == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.float16 if p == "fp16" else torch.bfloat16)


def make_scaler(device: torch.device | str, precision: str = "auto"):
    """A GradScaler, enabled only for fp16 (bf16 and fp32 have fp32's range and need none)."""
    device = torch.device(device)
    enabled = resolve_precision(device, precision) == "fp16"
    return torch.amp.GradScaler(device.type if device.type == "cuda" else "cpu", enabled=enabled)


def loss_fn(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the target tokens (labels != -100), in fp32, optionally label-smoothed.

    labels (B, T); logits (B, T, V), or the target rows alone, (N, V), as ``model(ids, plen, logits_at=labels != -100)``
    gives them (training does: the output layer then skips the French half). Only the target rows go through the
    softmax either way. A batch without target tokens gives 0, not NaN (0 / 0).
    """
    V = logits.size(-1)
    flat_labels = labels.reshape(-1)
    keep = flat_labels != -100  # (B*T,)
    picked = logits.reshape(-1, V)[keep] if logits.dim() == 3 else logits  # (N, V): target positions only
    targets = flat_labels[keep]  # (N,)
    if picked.dim() != 2 or picked.shape[0] != targets.shape[0]:
        raise ValueError(
            f"loss_fn got logits of shape {tuple(logits.shape)} for {targets.shape[0]} target tokens in labels of shape "
            f"{tuple(labels.shape)}: give the full logits (B, T, V), or the target rows alone (N, V), computed with "
            "logits_at=labels != -100 from these very labels."
        )
    if picked.shape[0] == 0:
        return logits.sum() * 0.0
    return F.cross_entropy(picked.float(), targets, label_smoothing=label_smoothing)


@torch.no_grad()
def evaluate_loss(
    model: torch.nn.Module, batches: Iterable, device=None, precision: str = "auto"
) -> tuple[float, float]:
    """(mean cross-entropy per target token, perplexity) over ``batches``, without label smoothing."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for batch in batches:
            ids, labels, plen = (t.to(device) for t in (batch.input_ids, batch.labels, batch.prefix_len))
            with autocast_context(device, precision):
                logits = model(ids, plen, logits_at=labels != -100)  # (N, vocab): the target positions alone
            n = int((labels != -100).sum())
            total += float(loss_fn(logits, labels)) * n
            count += n
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("evaluate_loss got no target tokens: the validation batches are empty.")
    loss = total / count
    return loss, math.exp(min(loss, 50.0))


class Budget:
    """When to stop: after ``minutes`` of wall time, after ``steps`` updates, or whichever comes first.

    Time already spent in earlier sessions (``elapsed``) counts, so a resumed run stops at the same total.
    With a time budget the number of steps is unknown in advance; :meth:`total_steps` estimates it from
    the pace so far, which is what the schedule's cool-down ends at.
    """

    def __init__(self, minutes: float | None = None, steps: int | None = None, elapsed: float = 0.0):
        if minutes is None and steps is None:
            raise ValueError(
                "Give a budget: minutes=M (time; what the notebook uses) or steps=N (exactly reproducible)."
            )
        if minutes is not None and not (minutes > 0):
            raise ValueError(f"minutes must be positive, got {minutes!r}.")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
            raise ValueError(f"steps must be a whole number >= 1, got {steps!r}.")
        self.minutes, self.steps = minutes, steps
        self.prior = float(elapsed)
        self._t0 = time.monotonic()

    def restart_clock(self) -> None:
        self._t0 = time.monotonic()

    def elapsed(self) -> float:
        """Seconds spent on this run, earlier sessions included."""
        return self.prior + (time.monotonic() - self._t0)

    def done(self, step: int) -> bool:
        if self.steps is not None and step >= self.steps:
            return True
        return self.minutes is not None and self.elapsed() >= self.minutes * 60

    def total_steps(self, step: int) -> int:
        """The step budget, or the number of steps the time budget will allow at the pace so far."""
        estimate = None
        if self.minutes is not None:
            frac = self.elapsed() / (self.minutes * 60)
            # too early to judge the pace: assume a long run so the schedule barely decays yet
            estimate = max(step + 1, int(step / frac)) if frac > 0.02 and step > 0 else 10**9
        if self.steps is not None:
            return self.steps if estimate is None else min(self.steps, estimate)
        return estimate

    def seconds_left(self, step: int, seconds_per_step: float | None) -> float | None:
        left = []
        if self.minutes is not None:
            left.append(self.minutes * 60 - self.elapsed())
        if self.steps is not None and seconds_per_step:
            left.append((self.steps - step) * seconds_per_step)
        return max(0.0, min(left)) if left else None


def compiled(net: torch.nn.Module, backend: str = "inductor") -> torch.nn.Module:
    """``torch.compile`` for static shapes: one graph per batch shape (StaticBucketBatcher's few), none recompiled."""
    import torch._dynamo  # slow start-up (1.0 s)

    for name in ("recompile_limit", "cache_size_limit"):  # default 8: too few for a shape per bucket length
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(64, getattr(torch._dynamo.config, name)))
    # the output layer runs at the target positions alone (logits_at): their number varies from batch to batch;
    # captured as a size known at run time, it stays inside the one graph per shape instead of breaking it
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    return torch.compile(net, dynamic=False, backend=backend)


class NonFiniteLossError(RuntimeError):
    """The loss or the gradients became NaN or infinite; the weights were not updated with them."""


class OutOfMemoryError(RuntimeError):
    """The batch did not fit in memory; the message names the token budget to lower."""


def is_out_of_memory(err: BaseException) -> bool:
    oom_types = tuple(
        t for t in (getattr(torch, "OutOfMemoryError", None), getattr(torch.cuda, "OutOfMemoryError", None)) if t
    )
    if isinstance(err, oom_types):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


# ----------------------------------------------------------------------------------------------
# the full loop


@dataclass
class TrainResult:
    steps: int
    tokens: int  # target (English + eos) tokens trained on
    seconds: float  # wall time of the run, earlier sessions included
    train_seconds: float  # time inside training steps only
    tokens_per_s: float  # target tokens per second of training steps
    history: list[dict] = field(default_factory=list)
    val_loss: float | None = None
    val_ppl: float | None = None
    checkpoint: Path | None = None
    resumed_from: int | None = None  # the step a checkpoint was resumed at, if any
    skipped_steps: int = 0  # fp16 steps the GradScaler skipped for inf/NaN gradients


def training_summary(result: TrainResult, cfg: TrainConfig, *, preset: str | None, precision: str) -> dict:
    """How a model was trained, in the layout every metrics file uses (``train_summary.json``, notebook 03)."""
    return {
        "steps": result.steps,
        "minutes": round(result.seconds / 60, 2),
        "tokens": result.tokens,
        "tokens_per_s": round(result.tokens_per_s, 1),
        "val_loss": result.val_loss,
        "val_ppl": result.val_ppl,
        "skipped_steps": result.skipped_steps,
        "resumed_from": result.resumed_from,
        "precision": precision,
        "preset": preset,
        "config": cfg.to_dict(),
    }


def _epoch_stream(batcher, state: dict, skip: int = 0):
    """Batches forever, epoch after epoch; ``state`` tracks the epoch and the position in it.

    ``skip`` drops the first batches of the current epoch (a resume over a batcher without ``state_dict``).
    """
    while True:
        for batch in batcher:
            state["position"] += 1
            if skip > 0:
                skip -= 1
                continue
            yield batch
        state["epoch"] += 1
        state["position"] = 0
        if hasattr(batcher, "set_epoch"):
            batcher.set_epoch(state["epoch"])


def _data_state(batcher, state: dict) -> dict:
    out = {"epoch": state["epoch"], "position": state["position"]}
    if hasattr(batcher, "state_dict"):
        out["batcher"] = batcher.state_dict()
    return out


def _resume_stream(batcher, saved: dict, state: dict):
    """Put the batcher back where the checkpoint left it and return the batch stream from there."""
    state["epoch"] = int(saved["epoch"])
    if "batcher" in saved and hasattr(batcher, "load_state_dict"):
        batcher.load_state_dict(saved["batcher"])
        state["position"] = int(saved["position"])
        return _epoch_stream(batcher, state)
    # a plain iterable: replay the epoch and skip what was already seen (it must repeat its order per epoch)
    if hasattr(batcher, "set_epoch"):
        batcher.set_epoch(state["epoch"])
    state["position"] = 0
    return _epoch_stream(batcher, state, skip=int(saved["position"]))


def run_config(model: torch.nn.Module, cfg: TrainConfig, extra: dict | None = None) -> dict:
    """What a checkpoint must agree with to be resumed: model shape, training settings, data and tokenizer."""
    model_cfg = model.config.to_dict() if hasattr(model, "config") and hasattr(model.config, "to_dict") else {}
    config = {"model": model_cfg, "train": cfg.to_dict()}
    config.update(extra or {})
    return config


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return (
        f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


class TrainingRun:
    """Everything around a training step: resume, the data stream, the schedule, the bar, validation, checkpoints.

    The step itself (forward, loss, backward, clip, update) is written out by the caller, as notebook 03 and
    :func:`train` both do, nanoGPT-style::

        run = TrainingRun(model, train_batcher, valid_batches, cfg, out_dir)
        while not run.done():
            batch = run.next_batch()
            lr = run.set_lr()
            ...  # the step itself (notebook 03's Exercise 3.3 writes it; train() below holds the course's own)
            run.end_step(batch, loss, lr, seconds)
        result = run.finish()

    On construction it builds the optimizer and the scaler and, when ``out_dir`` holds a checkpoint, restores
    everything that influences the next step (weights, the optimiser state: AdamW's moments, Muon's momentum;
    scaler, RNG states, data position, counters), after refusing a checkpoint whose configuration differs (naming the field).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        train_batcher,
        valid_batches: list | None,
        cfg: TrainConfig,
        out_dir: str | Path | None = None,
        *,
        device: torch.device | str | None = None,
        extra_config: dict | None = None,
        resume_from: str | Path | None | _FromOutDir = FROM_OUT_DIR,
        progress: bool = True,
        callback: Callable[[dict, list[dict]], None] | None = None,
    ):
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.ranks = distributed.ranks()  # under torchrun: this process's rank; else rank 0 of 1
        if self.ranks.several:  # every rank walks the same batches and keeps its own rows of each
            train_batcher = distributed.ShardedBatcher(train_batcher, self.ranks)
        progress = progress and self.ranks.main
        self.model, self.batcher, self.valid_batches, self.cfg = (
            model.to(self.device),
            train_batcher,
            valid_batches,
            cfg,
        )
        self.out_dir, self.progress, self.callback = out_dir, progress, callback
        self.precision = resolve_precision(self.device, cfg.precision)
        self.optimizer = make_optimizer(model, cfg, self.device)
        self.scaler = make_scaler(self.device, self.precision)
        self.config = run_config(model, cfg, extra_config)

        self.step, self.tokens, self.train_seconds, self.skipped = 0, 0, 0.0, 0
        self.history: list[dict] = []
        self.data_state = {"epoch": 0, "position": 0}
        self.resumed_from = None
        # the checkpoint to continue from, decided by the caller (train_command decides once for the whole run);
        # by default the one out_dir holds, as a notebook cell run again after a disconnect wants
        found = ckpt_lib.find_checkpoint(out_dir) if resume_from is FROM_OUT_DIR else resume_from
        self.checkpoint = None if found is None else Path(found)
        if self.checkpoint is not None:
            saved = ckpt_lib.load_checkpoint(self.checkpoint, map_location="cpu")  # weights_only: never runs code
            where = self.checkpoint.parent  # a checkpoint from before the deleted levers resumes if they were off
            old = with_added_fields(without_deleted_levers(saved["config"], str(where)))
            ckpt_lib.check_config(old, self.config, where, ignore=RESUMABLE_FIELDS)
            self._restore_state(saved)
            self._restore_counters(saved)
            self.stream = self._restore_data(saved)
            if progress:
                print(
                    f"Resuming from {self.checkpoint} at step {self.step} "
                    f"({format_duration(saved['train_state']['elapsed'])} trained).",
                    file=sys.stderr,
                )
        else:
            if hasattr(train_batcher, "set_epoch"):
                train_batcher.set_epoch(0)
            self.stream = _epoch_stream(train_batcher, self.data_state)
            self.budget = Budget(cfg.minutes, cfg.steps)
        self.last_good = (self.checkpoint, self.step) if self.checkpoint is not None else (None, None)
        self.net, self._share, self._plan = model, None, None  # the module a step calls; rank 0's plan (several)
        if self.ranks.several:
            if self.checkpoint is None and not self.ranks.main:
                torch.manual_seed(torch.initial_seed() + self.ranks.rank)  # each rank its own dropout masks
            self.net, self._share = distributed.wrap(model, self.device)
        if cfg.compile:  # each of the static batch shapes compiles once, at its first batch
            self.net = compiled(self.net, cfg.compile_backend)
        vals = [h for h in self.history if "val_loss" in h]
        self.val_loss, self.val_ppl = (vals[-1]["val_loss"], vals[-1]["val_ppl"]) if vals else (None, None)
        self.bar = self._make_bar() if progress else None
        self.ran = False
        self._scale_before = None
        self._log = [0.0, 0, 0.0]  # loss x tokens, tokens, seconds since the last history record
        model.train()
        self._last_save = time.monotonic()
        self.budget.restart_clock()  # the set-up above is not training time

    # --- resuming: three pieces, so that tests can leave one out and watch the resume check fail
    def _restore_state(self, saved: dict) -> None:
        ckpt_lib.restore(saved, model=self.model, optimizer=self.optimizer, scaler=self.scaler)  # RNG states too
        per_rank = saved.get("rng_ranks") or []
        if self.ranks.several and len(per_rank) == self.ranks.world:  # each rank's own generators (dropout)
            ckpt_lib.set_rng_state(per_rank[self.ranks.rank])

    def _restore_counters(self, saved: dict) -> None:
        ts = saved["train_state"]
        self.step, self.tokens, self.train_seconds = saved["step"], ts["tokens"], ts["train_seconds"]
        self.skipped, self.history, self.resumed_from = ts.get("skipped", 0), saved["history"], saved["step"]
        self.budget = Budget(self.cfg.minutes, self.cfg.steps, elapsed=ts["elapsed"])  # earlier sessions count

    def _restore_data(self, saved: dict):
        return _resume_stream(self.batcher, saved["data_state"], self.data_state)

    def _make_bar(self):
        cfg = self.cfg
        by_time = cfg.minutes is not None
        self._bar_total = cfg.steps if not by_time else int(round(cfg.minutes * 60))
        return progress_bar(  # a live bar; written to a file, a line every half minute
            total=self._bar_total,
            initial=min(self._bar_total, int(self.budget.elapsed())) if by_time else self.step,
            unit="s" if by_time else "step",
            desc="train",
            dynamic_ncols=True,
            leave=True,
            file=sys.stderr,
            # a time budget fills the bar with seconds; its "rate" (1 s/s) would say nothing
            bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed} of " + format_duration(self._bar_total) + "{postfix}"
            if by_time
            else None,
        )

    # --- the loop's side of a step
    def done(self) -> bool:
        """True once the budget is spent; checked between steps, so a run always ends on a whole step."""
        if not self.ranks.several:
            return self.budget.done(self.step)
        if self._plan is None:
            self._agree(False)
        return self._plan[0]

    def _agree(self, save_due: bool) -> tuple[bool, bool]:
        """Several ranks: rank 0's (stop now?, steps in the run, save now?) for all, so all stop at the same step."""
        b = self.budget
        done, total, save = distributed.from_main([b.done(self.step), b.total_steps(self.step), save_due], self.device)
        self._plan = (bool(done), int(total))
        return bool(done), bool(save)

    def next_batch(self):
        """The next training batch; after a resume, the batch an uninterrupted run would have drawn."""
        self.ran = True
        batch = next(self.stream)
        if self._share is not None:  # this rank's share of the batch's target tokens weighs its gradients
            self._share["weight"] = batch.n_target_tokens / max(1, batch.global_target_tokens)
        return batch

    def set_lr(self) -> float:
        """The schedule's rate for the current step (warm-up, stable, decay), written into the optimizer; returns it."""
        total = self._plan[1] if self._plan is not None else self.budget.total_steps(self.step)
        lr = lr_at(self.step, self.cfg, total)
        for group in self.optimizer.param_groups:  # Muon's groups at their own multiple (cfg.muon_lr_scale)
            group["lr"] = lr * group.get("lr_scale", 1.0)
        return lr

    def check_finite(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        """Stop before the update if the loss or the gradients are inf/NaN (with fp16 the scaler skips such steps)."""
        if self.scaler.is_enabled():
            self._scale_before = self.scaler.get_scale()  # end_step compares: a lower scale means a skipped step
            return
        loss_value, cfg = float(loss.detach()), self.cfg
        if not math.isfinite(loss_value):
            self.optimizer.zero_grad(set_to_none=True)
            raise NonFiniteLossError(
                f"The loss became {loss_value} at step {self.step + 1}; training stopped before updating the weights with it. "
                f"{self.where_good()} The same settings would likely diverge again: start a new run (a new output folder) with "
                f"a lower learning rate (now lr={cfg.lr:g}) or precision='fp32', or look for a broken batch."
            )
        if not torch.isfinite(grad_norm):
            self.optimizer.zero_grad(set_to_none=True)
            raise NonFiniteLossError(
                f"The gradients became {float(grad_norm)} at step {self.step + 1} (loss {loss_value:.4g}); the weights were not "
                f"updated with them. {self.where_good()} Start a new run (a new output folder) with a lower learning rate "
                f"(now lr={cfg.lr:g}) or grad_clip (now {cfg.grad_clip:g})."
            )

    def end_step(self, batch, loss, lr: float, seconds: float) -> None:
        """Count the step, then the bar, the history (and validation) at intervals, and a checkpoint when due."""
        cfg = self.cfg
        loss_value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
        if self._scale_before is not None and self.scaler.get_scale() < self._scale_before:
            self.skipped += 1  # the scaler found inf/NaN gradients and skipped this update
            if self.skipped > 50 and self.skipped > self.step // 10:
                raise NonFiniteLossError(
                    f"The fp16 gradient scaler has skipped {self.skipped} of {self.step + 1} steps for inf/NaN gradients "
                    f"(latest at step {self.step + 1}). {self.where_good()} Lower the learning rate (lr={cfg.lr:g}) or use "
                    "precision='fp32'."
                )
        self._scale_before = None
        self.step += 1
        n_tok = int(getattr(batch, "global_target_tokens", batch.n_target_tokens))  # all ranks' tokens
        self.tokens += n_tok
        self.train_seconds += seconds
        if math.isfinite(loss_value):  # a skipped fp16 step must not poison the average
            self._log[0] += loss_value * n_tok
            self._log[1] += n_tok
        self._log[2] += seconds
        step, budget = self.step, self.budget

        if self.bar is not None:
            self.bar.n = step if cfg.minutes is None else min(self._bar_total, int(budget.elapsed()))
            if step % 5 == 0 or step == 1 or budget.done(step):  # the last step's figures close the bar
                sec_per_step = self.train_seconds / max(1, step - (self.resumed_from or 0))
                self.bar.set_postfix_str(
                    f"step {step} loss {loss_value:.3f} lr {lr:.2e} {self.tokens / max(self.train_seconds, 1e-9):,.0f} "
                    f"target tok/s left {format_duration(budget.seconds_left(step, sec_per_step))}",
                    refresh=False,
                )
                self.bar.refresh()

        finishing = budget.done(step)
        due_time = time.monotonic() - self._last_save >= cfg.checkpoint_minutes * 60
        if self.ranks.several:
            finishing, due_time = self._agree(due_time)
        logging, evaluating = step % cfg.log_interval == 0 or finishing, step % cfg.eval_interval == 0 or finishing
        record = {"step": step, "minutes": budget.elapsed() / 60, "tokens": self.tokens, "lr": lr}
        if logging:
            record.update(loss=self._log[0] / max(self._log[1], 1), tok_s=self._log[1] / max(self._log[2], 1e-9))
            self._log = [0.0, 0, 0.0]
        # validation loss and perplexity, without label smoothing; under torchrun rank 0 alone evaluates
        if evaluating and self.valid_batches and self.ranks.main:
            self.val_loss, self.val_ppl = evaluate_loss(self.model, self.valid_batches, self.device, self.precision)
            record.update(val_loss=self.val_loss, val_ppl=self.val_ppl)
        if logging or "val_loss" in record:
            self.history.append(record)
            if self.callback is not None:
                self.callback(record, self.history)

        due_steps = cfg.checkpoint_every_steps and step % cfg.checkpoint_every_steps == 0
        if self.out_dir is not None and not finishing and (due_steps or due_time):
            self.save()
            self._last_save = time.monotonic()

    # --- checkpoints and the end
    def save(self, final: bool = False) -> Path | None:
        if self.out_dir is None:
            return None
        rng_ranks = distributed.gather(ckpt_lib.rng_state()) if self.ranks.several else None
        if not self.ranks.main:
            return None
        path = ckpt_lib.save_checkpoint(
            self.out_dir,
            model=self.model,
            config=self.config,
            step=self.step,
            optimizer=self.optimizer,
            scaler=self.scaler,
            data_state=_data_state(self.batcher, self.data_state),
            train_state={
                "tokens": self.tokens,
                "train_seconds": self.train_seconds,
                "elapsed": self.budget.elapsed(),
                "skipped": self.skipped,
                "final": final,
                "precision": self.precision,
            },
            history=self.history,
            rng_ranks=rng_ranks,
        )
        self.last_good = (path, self.step)
        return path

    def where_good(self) -> str:
        """A sentence for error messages: which checkpoint a restart would resume from."""
        path, at = self.last_good
        if path is None:
            return "No checkpoint has been saved yet" + ("" if self.out_dir else " (no output folder was given)") + "."
        return f"The last good checkpoint is {path} (step {at})."

    def out_of_memory(self, shape: tuple) -> OutOfMemoryError:
        """The error to raise instead of an out-of-memory: it names the token budget to lower."""
        self.optimizer.zero_grad(set_to_none=True)
        m = self.cfg.max_tokens
        return OutOfMemoryError(
            f"Out of memory at step {self.step + 1} on {self.device} with batches of up to max_tokens={m} tokens "
            f"(this batch: {tuple(shape)}, sentences x tokens). Lower max_tokens, e.g. to {m // 2} "
            f"(preset_config(name, max_tokens={m // 2}) or TrainConfig(max_tokens=...)), and start "
            f"again in a new output folder: the batches change with it. Every batch holds at most max_tokens "
            f"tokens, padding included, so memory peaks at that size. {self.where_good()}"
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def finish(self) -> TrainResult:
        """Save the final checkpoint (unless the run had nothing left to do) and sum the run up."""
        self.close()
        final_path = self.save(final=True) if (self.ran or self.checkpoint is None) else self.checkpoint
        if not self.ran and self.progress:
            print(
                f"Nothing to do: the run in {self.out_dir} already reached its budget (step {self.step}).",
                file=sys.stderr,
            )
        return TrainResult(
            steps=self.step,
            tokens=self.tokens,
            seconds=self.budget.elapsed(),
            train_seconds=self.train_seconds,
            tokens_per_s=self.tokens / max(self.train_seconds, 1e-9),
            history=self.history,
            val_loss=self.val_loss,
            val_ppl=self.val_ppl,
            checkpoint=final_path,
            resumed_from=self.resumed_from,
            skipped_steps=self.skipped,
        )


def train(
    model: torch.nn.Module,
    train_batcher,
    valid_batches: list | None,
    cfg: TrainConfig,
    out_dir: str | Path | None = None,
    *,
    device: torch.device | str | None = None,
    extra_config: dict | None = None,
    resume_from: str | Path | None | _FromOutDir = FROM_OUT_DIR,
    progress: bool = True,
    callback: Callable[[dict, list[dict]], None] | None = None,
) -> TrainResult:
    """Train ``model`` on ``train_batcher`` until ``cfg``'s budget runs out, continuing from ``resume_from``: a
    checkpoint, None (a fresh start), or by default the checkpoint ``out_dir`` holds, if any.

    ``train_batcher`` yields :class:`helpers.text.data.Batch` objects, one epoch per iteration (``set_epoch`` and
    ``state_dict``/``load_state_dict`` are used when present, so a resume continues at the same batch).
    ``valid_batches`` are scored every ``cfg.eval_interval`` steps and at the end. ``callback(record, history)``
    is called for every new history record (the notebook redraws its loss plot there).
    Checkpoints go to ``out_dir`` every ``cfg.checkpoint_minutes`` (and ``cfg.checkpoint_every_steps``) and at the end.
    The step below is notebook 03's loop, line for line (tests/notebooks/test_notebook03.py checks both give the same
    weights); only the out-of-memory message is added, and the forward pass calls ``run.net``: the model itself, or
    under ``torchrun`` the model in DistributedDataParallel (``helpers.training.distributed``).
    """
    run = TrainingRun(
        model,
        train_batcher,
        valid_batches,
        cfg,
        out_dir,
        device=device,
        extra_config=extra_config,
        resume_from=resume_from,
        progress=progress,
        callback=callback,
    )
    try:
        while not run.done():
            t0 = time.perf_counter()
            batch = run.next_batch()
            lr = run.set_lr()
            ids, labels, plen = (
                t.to(run.device, non_blocking=True) for t in (batch.input_ids, batch.labels, batch.prefix_len)
            )
            try:
                with autocast_context(run.device, run.precision):
                    # (N, vocab): the output layer at target positions only; under torchrun the model in DDP
                    logits = run.net(ids, plen, logits_at=labels != -100)
                loss = loss_fn(logits, labels, cfg.label_smoothing)
                run.scaler.scale(loss).backward()
                run.scaler.unscale_(run.optimizer)
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                run.check_finite(loss, grad_norm)
                run.scaler.step(run.optimizer)
                run.scaler.update()
                run.optimizer.zero_grad(set_to_none=True)
            except Exception as err:
                if is_out_of_memory(err):
                    raise run.out_of_memory(ids.shape) from err
                raise
            run.end_step(batch, loss, lr, time.perf_counter() - t0)
    finally:
        run.close()
    return run.finish()
