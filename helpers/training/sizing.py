"""Sizing the model for this machine and time budget: what ``train --preset cpu`` does before it trains.

The cpu preset measures the real training step of a few sizes for a few seconds each and picks one (the rule, its
numbers and the runs behind them: the comment above ``CPU_SIZES``; why a size depends on the budget and the machine
is notebook 07's Question 7.1, the size race).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path

import torch

from ..nn.variants import build_model, num_parameters
from ..runtime import atomic_write_text, resolve_precision
from ..text.batches import BucketBatcher
from . import checkpoint as ckpt_lib
from .config import SHAPE_FIELDS, TrainConfig
from .train import evaluate_loss, train

# `train --preset cpu` sizes the model for the machine it runs on (size_for_machine below): it measures the
# training step of a few sizes for a few seconds, then keeps the LARGEST size of the grid that will see at least
# MIN_TOKENS_PER_PARAMETER target tokens per NON-EMBEDDING parameter in the time budget (the blocks' weights: the
# token and position tables are left out; what a larger vocabulary costs per token, a wider output layer, is
# already in the measured speed, and counting its table too would shrink the model twice).
#
# The grid (issue 51): widths 128 to 320 in steps of 32, with 144 between 128 and 160, so that neighbours differ by
# at most 1.45x in non-embedding parameters (the first grid's widths were 1.5-2x apart, 2.2x in parameters: a probe
# a few per cent slow sent a machine from width 192 to 128). The rule's threshold then moves the choice smoothly:
# the neighbours' tokens per parameter differ by more than 1.25x, so a speed read 20 % off moves it by at most one
# step (tests/training/test_sizing.py replays recorded speeds; the probe guards against pauses, not against a
# machine whose speed drifts over minutes). Head size stays a multiple of 8, as the fused
# attention kernels want: four heads, three of 48 at width 144 (four of 36 would not do). Only the ANCHOR widths are
# measured; the speed of a width between two anchors is interpolated (log speed linear in log width).
#
# The threshold, from 15-minute runs with the recipe (Muon + warm-up-stable-decay; learned positions then, as the
# probe still times them), in the rule's own units (a run's speed x the budget / non-embedding parameters), then BLEU
# on newer sentences:
#   machine C (2-core Xeon, bf16), 4,000 pieces: width 256 at 1.53 (dev 26.61) lost to 192 at 3.57 (27.74)
#   machine C, 8,000 pieces, ReLU^2: width 256 at 1.13 (dev 27.55) lost to 192 at 2.88 (29.75)
#   an Intel Xeon with bf16 (issue 51's text, 2026-11-26; runs not in this repository), 8,000 pieces: width 128 at
#   6.9 (6.1k target tok/s; 27.99 on the held-out newer sentences) lost to 192 at 2.1 (about 4,150 tok/s; 30.01)
# So the threshold lies above 1.53 and at most 2.1: 1.8, their geometric middle. (The AdamW runs of the first
# version of the rule, which put it at 2.25, are left out: AdamW lost to Muon, which learns more from each token.)
# The largest size is 4 x 320, where the first grid had 6 x 320: width alone moves along the grid. A larger budget or
# a faster machine moves the choice up the grid; taking the largest size that qualifies makes it monotone: a slower
# machine never gets a larger model.
CPU_SIZES = (  # (n_layer, d_model, n_head); d_ff = 4 * d_model
    (4, 128, 4),
    (4, 144, 3),
    (4, 160, 4),
    (4, 192, 4),
    (4, 224, 4),
    (4, 256, 4),
    (4, 288, 4),
    (4, 320, 4),
)
ANCHOR_WIDTHS = (128, 192, 256, 320)  # the widths measured; the others are interpolated
MIN_TOKENS_PER_PARAMETER = 1.8  # target tokens per non-embedding parameter
PROBE_BATCHES = 16  # the batches a probe times, each of its shapes run once untimed first
PROBE_SECONDS = 8.0  # timed per anchor at least: five probes in a row read within 3 % in bf16 (3 s of steps: 11 %)


def non_embedding_parameters(config) -> int:
    """The parameters the sizing rule counts: all but the token table (and an untied head) and learned positions."""
    tables = config.vocab_size * config.d_model * (1 if config.tie_weights else 2)
    positions = config.max_len * config.d_model if config.positional == "learned" else 0
    return num_parameters(config) - tables - positions


def sized(cfg: TrainConfig, n_layer: int, d_model: int, n_head: int | None = None) -> TrainConfig:
    """``cfg`` with the model shape of one entry of :data:`CPU_SIZES`. ``n_head`` None: the grid's heads for a width
    of the grid (three at 144), else ``cfg``'s; never those of a width ``cfg`` was sized to before (3 at 144 would
    not divide 128)."""
    grid_heads = {d: h for _, d, h in CPU_SIZES}
    heads = n_head or grid_heads.get(d_model, cfg.n_head)
    return replace(cfg, n_layer=n_layer, d_model=d_model, d_ff=4 * d_model, n_head=heads)


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
    # per candidate: n_layer, d_model, n_head, parameters, non_embedding, tokens_per_s (measured or interpolated; None:
    # neither), measured_tokens_per_s (None: not measured)
    sizes: list[dict]
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
        how = "measured" if c.get("measured_tokens_per_s") is not None else "interpolated from the widths measured"
        speed = f"{c['tokens_per_s'] / 1000:.1f}k target tok/s {how} at width {c['d_model']}"
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


def measure_speed(cfg: TrainConfig, examples, vocab_size: int, device, seconds: float = PROBE_SECONDS) -> float:
    """Target tokens per second of ``cfg``'s own training step on this machine, as a run reports it.

    :func:`train` itself on a fresh model, over :data:`PROBE_BATCHES` batches drawn with ``cfg.seed`` (every size
    and every probe sees the same ones): one untimed pass first, so that each batch shape has met the step once
    (allocation, the CPU library's kernel choice: a 15-minute run pays that once, while a reading of a few seconds
    would pay it for every shape it meets), then timed passes over the same batches until there are at least three
    and at least ``seconds`` of them. Each pass's pace is a run's (its tokens over its steps' time); the reading is
    the median pass, so a pause of the machine (another process, the VM's neighbours) that slows one pass does not
    move it. (Issue 51, bf16 on an idle 2-core machine: five such probes of 8 s in a row read within 3 %; the
    total over 3 s of steps read 11 % apart.)
    """
    return _probe(cfg, examples, vocab_size, device, seconds).tokens_per_s


@dataclass
class Probe:
    """What :func:`_probe` read: the median pass's target tokens and steps per second, and the passes timed."""

    tokens_per_s: float
    steps_per_s: float
    passes: int


def _probe(cfg: TrainConfig, examples, vocab_size: int, device, seconds: float) -> Probe:
    model = build_model(cfg.model_config(vocab_size, device))
    batches = list(islice(BucketBatcher(examples, cfg.max_tokens, seed=cfg.seed), PROBE_BATCHES))
    one_pass = replace(cfg, minutes=None, steps=len(batches))
    quiet = {"device": device, "progress": False, "resume_from": None}
    train(model, batches, None, one_pass, None, **quiet)  # every shape once, untimed
    paces, timed = [], 0.0  # (tokens/s, steps/s) per pass
    while len(paces) < 3 or timed < seconds:
        result = train(model, batches, None, one_pass, None, **quiet)
        step_time = max(result.train_seconds, 1e-9)  # the steps' time, as a run counts it
        paces.append((result.tokens / step_time, result.steps / step_time))
        timed += result.train_seconds
    tokens_per_s, steps_per_s = sorted(paces)[(len(paces) - 1) // 2]  # the median pass (the lower of two middles)
    return Probe(tokens_per_s, steps_per_s, len(paces))


def interpolate_speeds(widths: list[int], speeds: list[float | None]) -> list[float | None]:
    """``speeds`` with each gap between two known ones filled in: log speed linear in log width. Outside the known
    ones nothing is guessed (None stays None)."""
    known = [i for i, v in enumerate(speeds) if v is not None]
    filled = list(speeds)
    for a, b in zip(known, known[1:]):
        for j in range(a + 1, b):
            t = math.log(widths[j] / widths[a]) / math.log(widths[b] / widths[a])
            filled[j] = math.exp((1 - t) * math.log(speeds[a]) + t * math.log(speeds[b]))
    return filled


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
    every size, only the shape changed. A short probe of each size's step (:func:`measure_speed`'s, three passes
    over its batches at least) predicts how many
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
        expected_steps = probe.steps_per_s * seconds
        every = max(1, round(expected_steps / points))
        warmup = max(1, round(WARMUP_SHARE * expected_steps))
        c = replace(c, minutes=seconds / 60, eval_interval=every, log_interval=every, warmup_steps=warmup)
        torch.manual_seed(c.seed)  # every size starts from its own seed-0 weights, as a real run does
        model = build_model(c.model_config(vocab_size, device)).to(device)  # train() would, but too late
        start, _ = evaluate_loss(model, valid_batches, device, c.precision)  # the loss at minute 0
        batcher = BucketBatcher(examples, c.max_tokens, seed=c.seed)
        result = train(model, batcher, valid_batches, c, None, device=device, progress=progress, resume_from=None)
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
    probe_seconds: float = PROBE_SECONDS,
    sizes=None,
    min_tokens_per_parameter: float | None = None,
) -> SizeChoice:
    """Pick the model size for ``cfg.minutes`` on this machine (the rule: the comment above :data:`CPU_SIZES`).

    ``sizes``: ``(n_layer, d_model)`` or ``(n_layer, d_model, n_head)`` in increasing order, default
    :data:`CPU_SIZES`, of which the :data:`ANCHOR_WIDTHS` are measured (given sizes are all measured). Anchors are
    measured largest first and the measuring stops at the first that qualifies: the rule takes the largest size
    that does, so smaller ones need no measuring; the sizes between that anchor and the next larger one get
    interpolated speeds. The speed measured is always that of one reference, notebook 02's model with learned
    positions (the model the threshold was fitted on): every position scheme and notebook-05 variant trained with
    ``--preset cpu`` gets the same size on this machine. The recipe's rotary positions train about 5 % slower than
    the reading (RESULTS.md, "Why the runs train below the probe's reading"); their 15-minute scores were measured
    sized this way.
    """
    if not cfg.minutes:
        raise ValueError("Sizing the model needs a time budget (minutes); with a step budget use --preset cpu-fixed.")
    anchors = ANCHOR_WIDTHS if sizes is None else None
    sizes = [tuple(size) + (None,) * (3 - len(size)) for size in (CPU_SIZES if sizes is None else sizes)]
    ratio = MIN_TOKENS_PER_PARAMETER if min_tokens_per_parameter is None else min_tokens_per_parameter
    seconds = cfg.minutes * 60
    plain = replace(cfg, attention="dot", bottleneck_dim=None, positional="learned", pretrain=None)
    candidates = [sized(plain, *size) for size in sizes]
    shapes = [c.model_config(vocab_size) for c in candidates]
    params = [num_parameters(sized(cfg, *size).model_config(vocab_size)) for size in sizes]  # what will train
    counted = [non_embedding_parameters(m) for m in shapes]  # what the rule counts: the same for every position scheme
    measured: list[float | None] = [None] * len(sizes)
    speeds: list[float | None] = [None] * len(sizes)
    t0 = time.perf_counter()
    larger = None
    for i in reversed(range(len(sizes))):
        if anchors is not None and sizes[i][1] not in anchors:
            continue
        measured[i] = measure_speed(candidates[i], examples, vocab_size, device, probe_seconds)
        # a smaller model is never slower than a larger one: a probe that says so measured noise (issue 28 saw width
        # 192 read 5.1k tok/s and width 256 5.4k in one run), so the larger one's speed is the floor
        speeds[i] = max(measured[i], speeds[larger]) if larger is not None else measured[i]
        larger = i
        if speeds[i] * seconds >= ratio * counted[i]:
            break
    speeds = interpolate_speeds([m.d_model for m in shapes], speeds)
    chosen = choose_size(counted, speeds, seconds, ratio)
    return SizeChoice(
        cfg=sized(cfg, *sizes[chosen]),
        sizes=[
            {
                "n_layer": m.n_layer,
                "d_model": m.d_model,
                "n_head": m.n_head,
                "parameters": p,
                "non_embedding": q,
                "tokens_per_s": None if v is None else round(v, 1),
                "measured_tokens_per_s": None if w is None else round(w, 1),
            }
            for m, p, q, v, w in zip(shapes, params, counted, speeds, measured)
        ],
        chosen=chosen,
        seconds=seconds,
        precision=resolve_precision(torch.device(device), cfg.precision),
        device=str(device),
        probe_seconds=time.perf_counter() - t0,
        min_tokens_per_parameter=ratio,
    )


def size_for_run(
    cfg, examples, vocab_size: int, resume_from: Path | None, dev, probe_seconds: float | None = None, err=None
) -> tuple:
    """The ``cpu`` preset's size for this machine and budget, or, when the run continues the checkpoint
    ``resume_from``, the size it started with."""
    if not cfg.minutes:
        if err:
            print("Model size: the cpu preset's fixed size (a step budget has no minutes to size for).", file=err)
        return cfg, None
    if resume_from is not None:
        saved = ckpt_lib.load_checkpoint(resume_from)["config"]["train"]
        kept = {f: saved[f] for f in SHAPE_FIELDS}
        if err:
            print(
                f"Model size: {kept['n_layer']} layers, width {kept['d_model']}, as chosen when this run started.",
                file=err,
            )
        return replace(cfg, **kept), {"resumed": kept}
    seconds = PROBE_SECONDS if probe_seconds is None else probe_seconds
    choice = size_for_machine(cfg, examples, vocab_size, dev, probe_seconds=seconds)
    if err:
        print(choice.describe(), file=err)
    return choice.cfg, choice.to_dict()
