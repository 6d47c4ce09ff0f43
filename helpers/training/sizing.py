"""Sizing the model for this machine and time budget: what ``train --preset cpu`` does before it trains.

The cpu preset measures the real training step of a few sizes for a few seconds each and picks one (the rule, its
numbers and the runs behind them: the comment above ``CPU_SIZES``; why a size depends on the budget and the machine
is notebook 03's Question 3.2).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ..nn.model import DecoderOnlyTransformer, num_parameters
from ..runtime import atomic_write_text, resolve_precision
from ..text.batches import BucketBatcher
from . import checkpoint as ckpt_lib
from .config import SHAPE_FIELDS, TrainConfig
from .train import evaluate_loss, train

# `train --preset cpu` sizes the model for the machine it runs on (size_for_machine below): it measures the
# training step of each size below for a few seconds, then keeps the LARGEST that will see at least
# MIN_TOKENS_PER_PARAMETER target tokens per NON-EMBEDDING parameter in the time budget (the blocks' weights: the
# token and position tables are left out; what a larger vocabulary costs per token, a wider output layer, is
# already in the measured speed, and counting its table too would shrink the model twice). Runs of 15 minutes on
# Tatoeba (benchmarks/RESULTS.md), in tokens per non-embedding parameter, then the validation loss (dev BLEU where
# measured):
#   2-core fp32 CPU (machine B), AdamW: width 256 at 0.54 1.433, 192 at 1.57 1.253, 128 at 4.86 1.212
#   2-core bf16 CPU (machine C), AdamW: width 256 at 2.13 1.034, 192 at 4.87 0.990
#   machine C, Muon + WSD: width 256 at 1.53 (dev 26.61), 192 at 3.57 (dev 27.74)
#   machine C, Muon + WSD, 8,000 pieces, ReLU^2: width 256 at 1.13 (dev 27.55), 192 at 2.88 (dev 29.75; as the
#   preset, 29.90)
# The best size of each machine needs a threshold above 2.13 (reject width 256 on machine C) and at most 2.45
# (keep width 192 with 8,000 pieces even if the few-second probe reads 15 % slow; it read 13 % slow when it timed
# the run's setup too: 4.8k against a run's 5.55k tok/s); 2.25 sits in the middle. Counting every parameter (the
# first version of the rule, at 2) would send the 8,000-piece model to width 128 and leaves no threshold that fits
# all four rows. A larger budget or a faster machine moves the choice up the list. Taking the largest size that
# qualifies makes the choice monotone: a slower machine never gets a larger model.
CPU_SIZES = ((4, 128), (4, 192), (4, 256), (6, 320))  # (n_layer, d_model); 4 heads, d_ff = 4 * d_model
MIN_TOKENS_PER_PARAMETER = 2.25  # target tokens per non-embedding parameter


def non_embedding_parameters(config) -> int:
    """The parameters the sizing rule counts: all but the token table (and an untied head) and learned positions."""
    tables = config.vocab_size * config.d_model * (1 if config.tie_weights else 2)
    positions = config.max_len * config.d_model if config.positional == "learned" else 0
    return num_parameters(config) - tables - positions


def sized(cfg: TrainConfig, n_layer: int, d_model: int) -> TrainConfig:
    """``cfg`` with the model shape of one entry of :data:`CPU_SIZES`."""
    return replace(cfg, n_layer=n_layer, d_model=d_model, d_ff=4 * d_model)


def choose_size(
    parameters: list[int],
    tokens_per_s: list[float | None],
    seconds: float,
    min_tokens_per_parameter: float = MIN_TOKENS_PER_PARAMETER,
) -> int:
    """The index of the largest model that sees at least ``min_tokens_per_parameter`` target tokens per parameter.

    ``parameters`` (the non-embedding ones, as :func:`size_for_machine` passes them) are in increasing order;
    ``tokens_per_s[i]`` is model i's measured training speed (target tokens per second), or None where it was not
    measured (a model known not to qualify). When none qualifies, the smallest (index 0) is the best there is.
    """
    if list(parameters) != sorted(parameters) or len(parameters) != len(tokens_per_s) or not parameters:
        raise ValueError("choose_size needs sizes in increasing order of parameters, one speed per size.")
    for i in reversed(range(len(parameters))):
        speed = tokens_per_s[i]
        if speed is not None and speed * seconds >= min_tokens_per_parameter * parameters[i]:
            return i
    return 0


@dataclass
class SizeChoice:
    """Which model size :func:`size_for_machine` picked, from what it measured."""

    cfg: TrainConfig  # the configuration to train, with the chosen shape
    sizes: list[dict]  # per candidate: n_layer, d_model, parameters, non_embedding, tokens_per_s (None: not measured)
    chosen: int
    seconds: float  # the time budget the choice is for
    precision: str
    device: str
    probe_seconds: float  # wall time spent measuring
    min_tokens_per_parameter: float

    def tokens_per_parameter(self, i: int) -> float | None:
        s = self.sizes[i]
        return None if s["tokens_per_s"] is None else s["tokens_per_s"] * self.seconds / s["non_embedding"]

    def describe(self) -> str:
        """One line: what was measured, what was chosen, and why."""
        c = self.sizes[self.chosen]
        where = f"{self.precision} on {self.device}"
        speed = f"{c['tokens_per_s'] / 1000:.1f}k target tok/s measured at width {c['d_model']}"
        line = (
            f"Sized for this machine: {where}, {speed}, {self.seconds / 60:g} min -> "
            f"{c['tokens_per_s'] * self.seconds / 1e6:.1f} M target tokens: {c['parameters'] / 1e6:.2f} M parameters "
            f"({c['n_layer']} layers, width {c['d_model']}; {c['non_embedding'] / 1e6:.2f} M outside the embeddings), "
            f"{self.tokens_per_parameter(self.chosen):.1f} tokens per non-embedding parameter"
        )
        bigger = [i for i in range(self.chosen + 1, len(self.sizes)) if self.sizes[i]["tokens_per_s"] is not None]
        if bigger:
            b = bigger[0]
            line += f"; width {self.sizes[b]['d_model']} would get {self.tokens_per_parameter(b):.1f}"
        rule = f"the largest with >= {self.min_tokens_per_parameter:g}"
        if self.chosen == 0 and self.tokens_per_parameter(0) < self.min_tokens_per_parameter:
            rule = f"the smallest: none reaches {self.min_tokens_per_parameter:g}"
        return f"{line} ({rule}; measuring took {self.probe_seconds:.0f} s)."

    def to_dict(self) -> dict:
        return {
            "sizes": [{**s, "tokens_per_parameter": self.tokens_per_parameter(i)} for i, s in enumerate(self.sizes)],
            "chosen": self.chosen,
            "budget_seconds": self.seconds,
            "precision": self.precision,
            "device": self.device,
            "probe_seconds": round(self.probe_seconds, 1),
            "min_tokens_per_parameter": self.min_tokens_per_parameter,
        }


def measure_speed(cfg: TrainConfig, examples, vocab_size: int, device, seconds: float = 3.0) -> float:
    """Target tokens per second of ``cfg``'s own training step on this machine, as a run reports it.

    :func:`train` itself on a fresh model: two untimed steps first (allocation, kernel choice), then ``seconds``
    of steps. The batches come from a batcher of their own with ``cfg.seed``, so every size sees the same ones.
    The time is that of the training steps, the measure of the runs the threshold was chosen on: the wall time of
    the whole call also holds the run's setup (a new optimizer, a new epoch's batches), which in a few seconds
    read 13 % below a 15-minute run (issue 28: 4.8k against the run's 5.55k target tok/s; the steps alone 5.0k,
    the rest being each batch shape's first use, which a long run pays once).
    """
    result = _probe(cfg, examples, vocab_size, device, seconds)
    return result.tokens / max(result.train_seconds, 1e-9)


def _probe(cfg: TrainConfig, examples, vocab_size: int, device, seconds: float):
    model = DecoderOnlyTransformer(cfg.model_config(vocab_size, device))
    batcher = BucketBatcher(examples, cfg.max_tokens, seed=cfg.seed)
    quiet = {"device": device, "progress": False, "resume": False}
    train(model, batcher, None, replace(cfg, minutes=None, steps=2), None, **quiet)
    return train(model, batcher, None, replace(cfg, minutes=seconds / 60, steps=None), None, **quiet)


WARMUP_SHARE = 0.05  # of the expected steps, in loss_against_time (the 15-minute cpu runs: 150 of ~3,000)


def read_curves(path: Path, key: dict) -> list[dict] | None:
    """Curves that :func:`write_curves` saved for the same ``key`` (device, sizes, seconds...), else None.

    Notebook 03 keeps its curves in the run folder so that a reconnect does not measure them again; the folder
    can outlive the runtime (Drive), so curves measured on another accelerator or with other sizes are not
    reused: they would be shown under this machine's name.
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    if not isinstance(saved, dict) or saved.get("key") != json.loads(json.dumps(key)):
        return None
    return saved["curves"]


def write_curves(path: Path, key: dict, curves: list[dict]) -> None:
    atomic_write_text(json.dumps({"key": key, "curves": curves}, indent=1), Path(path))


def loss_against_time(
    cfg: TrainConfig,
    sizes,
    examples,
    valid_batches: list,
    vocab_size: int,
    device,
    *,
    seconds: float,
    points: int = 8,
    progress: bool = True,
) -> list[dict]:
    """Each ``(n_layer, d_model)`` of ``sizes`` trained from scratch for ``seconds``: its validation loss on the way.

    The experiment of notebook 03's "How big a model for your budget?": the same data, seed and schedule for
    every size, only the shape changed. A short probe of each size's step (at most 2 s) predicts how many
    steps it will take in ``seconds``; from that come the evaluation interval (about ``points`` validation
    losses per run, on ``valid_batches``: keep them few, their time counts in the budget as in every real
    run) and the warm-up, scaled to the same 5 % of the run for every size (the preset's fixed warm-up would
    leave a slow size warming up for its whole run and make it look worse than it is).
    Returns one dict per size: n_layer, d_model, parameters, tokens_per_s, warmup_steps, peak_lr (the highest
    rate the run used), and ``curve``, a list of ``{"minutes", "tokens", "val_loss"}`` starting at minute 0.
    """
    if not valid_batches:
        raise ValueError("loss_against_time needs validation batches: the curves are validation losses.")
    plain = replace(cfg, pretrain=None, init_embeddings=None, steps=None)
    rows = []
    for n_layer, d_model in sizes:
        c = sized(plain, n_layer, d_model)
        probe = _probe(c, examples, vocab_size, device, min(2.0, seconds / 10))
        expected_steps = probe.steps / max(probe.seconds, 1e-9) * seconds
        every = max(1, round(expected_steps / points))
        warmup = max(1, round(WARMUP_SHARE * expected_steps))
        c = replace(c, minutes=seconds / 60, eval_interval=every, log_interval=every, warmup_steps=warmup)
        torch.manual_seed(c.seed)  # every size starts from its own seed-0 weights, as a real run does
        model = DecoderOnlyTransformer(c.model_config(vocab_size, device)).to(device)  # train() would, but too late
        start, _ = evaluate_loss(model, valid_batches, device, c.precision)  # the loss at minute 0
        batcher = BucketBatcher(examples, c.max_tokens, seed=c.seed)
        result = train(model, batcher, valid_batches, c, None, device=device, progress=progress, resume=False)
        curve = [{"minutes": 0.0, "tokens": 0, "val_loss": start}]
        curve += [
            {"minutes": h["minutes"], "tokens": h["tokens"], "val_loss": h["val_loss"]}
            for h in result.history
            if "val_loss" in h
        ]
        rows.append(
            {
                "n_layer": n_layer,
                "d_model": d_model,
                "parameters": num_parameters(c.model_config(vocab_size)),
                "tokens_per_s": round(result.tokens_per_s, 1),
                "warmup_steps": warmup,
                "steps": result.steps,
                "peak_lr": max((h["lr"] for h in result.history), default=0.0),
                "curve": curve,
            }
        )
    return rows


def size_for_machine(
    cfg: TrainConfig,
    examples,
    vocab_size: int,
    device,
    *,
    probe_seconds: float = 3.0,
    sizes=None,
    min_tokens_per_parameter: float | None = None,
) -> SizeChoice:
    """Pick the model size for ``cfg.minutes`` on this machine (see ``helpers.training.config.CPU_SIZES`` for the rule).

    Sizes are measured largest first and the measuring stops at the first that qualifies: the rule takes the
    largest that does, so the smaller ones need no measuring. The speed measured is the vanilla model's, so a
    notebook-05 variant trained with ``--preset cpu`` gets the same size as the vanilla model on this machine.
    """
    if not cfg.minutes:
        raise ValueError("Sizing the model needs a time budget (minutes); with a step budget use --preset cpu-fixed.")
    sizes = list(sizes or CPU_SIZES)
    ratio = MIN_TOKENS_PER_PARAMETER if min_tokens_per_parameter is None else min_tokens_per_parameter
    seconds = cfg.minutes * 60
    plain = replace(cfg, attention="dot", bottleneck_dim=None, positional="learned", pretrain=None)
    candidates = [sized(plain, n_layer, d_model) for n_layer, d_model in sizes]
    shapes = [c.model_config(vocab_size) for c in candidates]
    params = [num_parameters(m) for m in shapes]
    counted = [non_embedding_parameters(m) for m in shapes]  # what the rule counts
    speeds: list[float | None] = [None] * len(sizes)
    measured: list[float | None] = [None] * len(sizes)
    t0 = time.perf_counter()
    for i in reversed(range(len(sizes))):
        measured[i] = measure_speed(candidates[i], examples, vocab_size, device, probe_seconds)
        # a smaller model is never slower than a larger one: a probe that says so measured noise (issue 28 saw width
        # 192 read 5.1k tok/s and width 256 5.4k in one run), so the larger one's speed is the floor
        speeds[i] = max(measured[i], speeds[i + 1] or 0.0) if i + 1 < len(sizes) else measured[i]
        if speeds[i] * seconds >= ratio * counted[i]:
            break
    chosen = choose_size(counted, speeds, seconds, ratio)
    return SizeChoice(
        cfg=sized(cfg, *sizes[chosen]),
        sizes=[
            {
                "n_layer": n,
                "d_model": d,
                "parameters": p,
                "non_embedding": q,
                "tokens_per_s": None if v is None else round(v, 1),
                "measured_tokens_per_s": None if m is None else round(m, 1),
            }
            for (n, d), p, q, v, m in zip(sizes, params, counted, speeds, measured)
        ],
        chosen=chosen,
        seconds=seconds,
        precision=resolve_precision(torch.device(device), cfg.precision),
        device=str(device),
        probe_seconds=time.perf_counter() - t0,
        min_tokens_per_parameter=ratio,
    )


def size_for_run(cfg, examples, vocab_size: int, out: Path, dev, probe_seconds: float = 3.0, err=None) -> tuple:
    """The ``cpu`` preset's size for this machine and budget, or the size a resumed run started with."""
    if not cfg.minutes:
        if err:
            print("Model size: the cpu preset's fixed size (a step budget has no minutes to size for).", file=err)
        return cfg, None
    found = ckpt_lib.find_checkpoint(out)
    if found is not None:
        saved = ckpt_lib.load_checkpoint(found)["config"]["train"]
        kept = {f: saved[f] for f in SHAPE_FIELDS}
        if err:
            print(
                f"Model size: {kept['n_layer']} layers, width {kept['d_model']}, as chosen when this run started.",
                file=err,
            )
        return replace(cfg, **kept), {"resumed": kept}
    choice = size_for_machine(cfg, examples, vocab_size, dev, probe_seconds=probe_seconds)
    if err:
        print(choice.describe(), file=err)
    return choice.cfg, choice.to_dict()
