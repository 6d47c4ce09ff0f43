"""Notebook 05's experiments: one variant trained and scored the same way as every other, a sweep, and the
time and memory of a forward pass measured against the derived growth rates.

Every row of notebook 05's tables comes from :func:`run_variant`: the same data, tokenizer, seed, budget and
scoring for every setting, only the named fields changed. Settings are *chosen* on the validation split
(``bleu_valid``); the new-sentence score (``bleu_new``) is reported beside it and never used to choose.
"""

from __future__ import annotations

import difflib
import json
import math
import statistics
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from . import pipeline, runtime
from .evaluation.evaluate import score
from .evaluation.translation import translate
from .nn.model import ModelConfig
from .nn.variants import attention_memory, build_model, forward_flops, num_parameters
from .runtime import atomic_write_text
from .training.checkpoint import resume_point
from .training.config import TrainConfig
from .training.train import train

# sweepable TrainConfig fields (not the number of epochs: every setting gets the same budget)
SWEEP_FIELDS = (
    "lr",
    "warmup_steps",
    "dropout",
    "d_model",
    "d_ff",
    "n_layer",
    "n_head",
    "label_smoothing",
    "max_tokens",
    "weight_decay",
    "positional",
    "attention",
    "bottleneck_dim",
    "pretrain",
    "parallel_pairs",
    "init_embeddings",
)


def changed_fields(cfg: TrainConfig, base: TrainConfig) -> dict:
    """The fields where ``cfg`` differs from ``base`` (budget and bookkeeping aside): what a row is about."""
    skip = {"minutes", "steps", "eval_interval", "log_interval", "checkpoint_minutes", "checkpoint_every_steps"}
    a, b = asdict(cfg), asdict(base)
    return {k: v for k, v in a.items() if k not in skip and v != b[k]}


def run_variant(
    prepared,
    cfg: TrainConfig,
    *,
    label: str,
    base: TrainConfig | None = None,
    device=None,
    out_dir=None,
    eval_sentences: int = 300,
    progress: bool = False,
    callback=None,
    start=None,
    keep_new: bool = False,
) -> dict:
    """Train one configuration on ``prepared``'s data and tokenizer, then score it; returns one table row.

    ``start(model, tokenizer)``, when given, sets the freshly built model's embeddings and returns what it did
    (notebook 06's embedding starts); ``keep_new`` adds the new-sentence hypotheses and references to the row.

    The training pairs are ``prepared.splits.train`` (capped at ``cfg.parallel_pairs``), batched with
    ``cfg.max_tokens``; with ``cfg.pretrain`` the first share of the budget pretrains on unpaired sentences
    (:func:`helpers.training.pretrain.pretrain_phase`). Scores: BLEU greedy on the first ``eval_sentences`` pairs of the
    validation split (to choose with) and of the new-sentence test set (to report).
    """
    device = runtime.pick_device(device)
    tok = prepared.tokenizer
    batcher, valid_batches, _ = pipeline.train_batches(tok, prepared.splits, cfg, cfg.seed)
    t0 = time.perf_counter()
    resume = resume_point(out_dir)  # decided once, for the model stage and the training loop
    built = pipeline.start_model(cfg, prepared, out_dir, device, resume=resume, start=start, progress=progress)
    model, model_cfg = built.model, built.model.config
    transfer = built.transfer.describe() if hasattr(built.transfer, "describe") else built.transfer
    pre_steps = built.pretrained.steps if built.pretrained is not None else 0
    result = train(
        model,
        batcher,
        valid_batches,
        built.translate_cfg,
        out_dir,
        device=device,
        resume_from=resume.translation,
        progress=progress,
        callback=callback,
    )
    minutes = (time.perf_counter() - t0) / 60
    scores, kept = {}, {}
    for name, test in (("valid", prepared.splits.valid), ("new", prepared.splits.new)):
        test = test[:eval_sentences]
        hyps = translate(model, tok, [fr for fr, _ in test])
        scores[name] = score(hyps, [en for _, en in test])
        if keep_new and name == "new":
            kept = {"hypotheses_new": hyps, "references_new": [en for _, en in test]}
    return kept | {
        "label": label,
        "changed": changed_fields(cfg, base) if base is not None else {},
        "parameters": num_parameters(model_cfg),
        "pairs": len(batcher.examples),
        "pretrain_steps": pre_steps,
        "steps": result.steps,
        "minutes": round(minutes, 3),
        "tokens_per_s": round(result.tokens_per_s),
        "val_loss": None if result.val_loss is None else round(result.val_loss, 4),
        "val_ppl": None if result.val_ppl is None else round(result.val_ppl, 2),
        "bleu_valid": scores["valid"]["bleu"],
        "bleu_new": scores["new"]["bleu"],
        "chrf_new": scores["new"]["chrf"],
        "eval_sentences": scores["new"]["n"],
        "embeddings": transfer,
        "history": result.history,
        "model": model,
    }


def sweep(prepared, base: TrainConfig, settings: dict[str, dict], **kwargs) -> list[dict]:
    """One :func:`run_variant` row per named setting (a dict of :data:`SWEEP_FIELDS`), all with ``base``'s budget.

    Unknown or unsweepable fields are refused by name, before anything trains."""
    for name, setting in settings.items():
        bad = sorted(set(setting) - set(SWEEP_FIELDS))
        if bad:
            raise ValueError(
                f"setting {name!r} changes {bad}: a sweep compares settings at the same budget, so it can change "
                f"only {list(SWEEP_FIELDS)} (the budget itself, minutes or steps, is the same for every row)."
            )
    return [run_variant(prepared, replace(base, **s), label=name, base=base, **kwargs) for name, s in settings.items()]


def best_row(rows: list[dict], key: str = "bleu_valid") -> dict:
    """The row that wins on the validation split (ties: fewer parameters). Never chosen on a test set."""
    return max(rows, key=lambda r: (r[key], -r["parameters"]))


def table_rows(rows: list[dict]) -> list[dict]:
    """Rows without the model and the history, for printing and for the metrics file."""
    return [{k: v for k, v in r.items() if k not in ("model", "history")} for r in rows]


def format_rows(rows: list[dict]) -> str:
    """A plain-text table: setting, parameters, steps, validation loss and perplexity, BLEU (valid, new)."""
    head = (
        f"{'setting':<26} {'params':>9} {'steps':>6} {'val loss':>9} {'val ppl':>8} {'BLEU valid':>10} {'BLEU new':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        vl = "-" if r["val_loss"] is None else f"{r['val_loss']:.3f}"
        vp = "-" if r["val_ppl"] is None else f"{r['val_ppl']:.1f}"
        lines.append(
            f"{r['label'][:26]:<26} {r['parameters']:>9,} {r['steps']:>6} {vl:>9} {vp:>8} "
            f"{r['bleu_valid']:>10.2f} {r['bleu_new']:>9.2f}"
        )
    return "\n".join(lines)


# --- time and memory of one forward pass --------------------------------------------------------------------


def saved_bytes(fn, exclude=()) -> int:
    """Bytes of the tensors autograd keeps for the backward pass while ``fn()`` runs (each storage once),
    leaving out those of ``exclude`` (pass the model's parameters: they exist before the pass anyway).

    This is the activation memory a training forward pass adds; unlike the process's peak memory it is the
    same on every machine and does not depend on the allocator."""
    seen: dict[int, int] = {}
    skip = {p.untyped_storage().data_ptr() for p in exclude}

    def pack(t):
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            storage = t.untyped_storage()
            if storage.data_ptr() not in skip:
                seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def measure_forward(config: ModelConfig, lengths: list[int], *, batch: int = 1, repeats: int = 3) -> list[dict]:
    """Median seconds and saved bytes of one training-mode forward pass at each length, with the derived values.

    ``config.max_len`` must cover the longest length; the same weights serve every length (the bottleneck's
    latent horizons are spread over ``max_len``). The LM head is included in the timing: keep the vocabulary
    small so that it does not hide the attention.
    """
    if max(lengths) > config.max_len:
        raise ValueError(f"lengths go up to {max(lengths)} but max_len is {config.max_len}: raise max_len.")
    torch.manual_seed(0)
    model = build_model(config).train()
    rows = []
    for T in lengths:
        ids = torch.randint(5, config.vocab_size, (batch, T))
        plen = torch.full((batch,), max(1, T // 2))

        def forward(ids=ids, plen=plen):
            return model(ids, plen)

        memory = saved_bytes(forward, exclude=model.parameters())
        forward()  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            forward()
            times.append(time.perf_counter() - t0)
        rows.append(
            {
                "length": T,
                "seconds": statistics.median(times),
                "bytes": memory,
                "flops": forward_flops(config, T, batch),
                "attention_bytes": attention_memory(config, T, batch),
            }
        )
    return rows


def local_slopes(xs: list[float], ys: list[float]) -> list[float]:
    """d log y / d log x between neighbouring points: 1 = linear growth, 2 = quadratic."""
    return [math.log(y2 / y1) / math.log(x2 / x1) for x1, x2, y1, y2 in zip(xs, xs[1:], ys, ys[1:])]


class ResultsCache:
    """Finished rows kept in a JSON file (in Drive on Colab): after a disconnect, *Run all* skips what is done.

    A row is found again only under the same key *and* the same configuration and data (``fingerprint``), so
    changing a setting reruns it instead of serving a stale number. ``path=None`` keeps nothing (quick mode).
    """

    def __init__(self, path=None):
        self.path = None if path is None else Path(path)
        self.rows: dict = {}
        if self.path is not None and self.path.is_file():
            self.rows = json.loads(self.path.read_text(encoding="utf-8"))

    def run(self, key: str, fingerprint: dict, fn) -> dict:
        stamp = json.dumps(fingerprint, sort_keys=True, default=str)
        saved = self.rows.get(key)
        if saved is not None and saved.get("fingerprint") == stamp:
            print(f"{key}: finished earlier, read from {self.path}")
            return saved["row"]
        row = fn()
        if self.path is not None:
            self.rows[key] = {"fingerprint": stamp, "row": {k: v for k, v in row.items() if k != "model"}}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(json.dumps(self.rows, default=str) + "\n", self.path)
        return row


# --- the student's hyperparameter study: the settings chosen, checked before anything trains ----------------

STUDY_FIELDS = (*SWEEP_FIELDS, "seed")  # a second seed of a setting measures the spread between runs


def choose_settings(
    chosen, menu: dict[str, dict], budget: int, *, at_least: int = 2, reference: str = "vanilla"
) -> dict[str, dict]:
    """The settings a student chose for a study, checked against ``menu`` and the budget: {name: changes}.

    ``chosen`` is a list of names from ``menu`` (name -> the fields it changes); the reference row is not one of
    them (it is trained anyway and costs nothing). Everything wrong is refused at once, with what to do, before
    anything trains, and nothing is dropped or cut silently: a name not on the menu, a name chosen twice, fewer
    than ``at_least`` settings, more than ``budget`` (runs of the same length), or a menu entry that changes a
    field outside :data:`STUDY_FIELDS` (the budget itself, say).
    """
    if isinstance(chosen, (str, dict)) or not isinstance(chosen, (list, tuple)):
        raise ValueError(
            f"the settings to try must be a list of names from the menu, like {list(menu)[:2]}; got "
            f"{type(chosen).__name__} {chosen!r}."
        )
    problems = []
    not_text = [c for c in chosen if not isinstance(c, str)]
    if not_text:
        problems.append(f"{not_text} are not names: write each setting as its name in quotes, as the menu prints it")
    names = [c for c in chosen if isinstance(c, str)]
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:
        problems.append(f"{repeated} chosen more than once: each setting runs once, so remove the repeats")
    unknown = [c for c in dict.fromkeys(names) if c not in menu]
    for name in unknown:
        if name == reference:
            problems.append(f"{name!r} is the reference row: it is trained anyway and compared with every setting")
            continue
        close = difflib.get_close_matches(name, list(menu), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(f"{name!r} is not on the menu{hint}")
    if any(name != reference for name in unknown):
        problems.append(f"the menu's names are {list(menu)}; add a new setting to the menu first if you want one")
    for name in dict.fromkeys(names):
        if name in menu:
            bad = sorted(set(menu[name]) - set(STUDY_FIELDS))
            if bad:
                problems.append(
                    f"menu entry {name!r} changes {bad}: a study compares settings at the same budget, so a setting "
                    f"may change only {list(STUDY_FIELDS)}"
                )
    count = len(dict.fromkeys(names))
    if count < at_least:
        problems.append(
            f"{count} setting{'s' if count != 1 else ''} chosen: choose at least {at_least}, so that the study "
            "compares settings with each other and not one run with the reference alone"
        )
    if len(chosen) > budget:
        problems.append(
            f"{len(chosen)} settings chosen but the budget is {budget} runs: remove {len(chosen) - budget} "
            "(the reference row is already trained and does not count)"
        )
    if problems:
        raise ValueError("The study's settings cannot run:\n- " + "\n- ".join(problems) + ".")
    return {name: dict(menu[name]) for name in names}
