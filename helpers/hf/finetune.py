"""Fine-tuning a pretrained Hugging Face model on our training pairs: a short loop, a time budget, resumable.

``python -m helpers finetune`` and notebook 04 call :func:`finetune`. The loop is ours rather than
``transformers.Trainer`` because it is the loop of notebook 03 with a different model: the same
:class:`helpers.training.train.Budget` (minutes or steps, earlier sessions counted), the same precision rules
(``helpers.training.train.autocast_context`` and ``make_scaler``: fp16 with a gradient scaler on a T4, bf16 on
Ampere and later, fp32 on a CPU), the same loss on the English tokens only (the labels say which).

The run folder::

    out/finetune.json           base model, configuration, data, and the result when done (marks the folder)
    out/checkpoint/             the model and tokenizer (save_pretrained; with LoRA, the adapters only) and
                                trainer_state.pt (optimizer, scaler, step, clock, data position, history)
    out/test_new.tsv, test.tsv  the run's test sets, as ``train`` writes them
    out/train_words.tsv         the French words of the training split (unseen-word slice, word baseline)

A checkpoint is written to ``checkpoint.tmp/`` and swapped in, so a disconnect mid-save keeps the last one;
rerunning with the same ``out`` resumes (on another configuration it stops and names the field).
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

import torch

from .. import runtime
from ..training import checkpoint as ckpt_lib
from ..training.train import (
    Budget,
    NonFiniteLossError,
    OutOfMemoryError,
    _fmt_time,
    _is_oom,
    autocast_context,
    make_scaler,
)
from .pretrained import CAUSAL, CHECKPOINT_DIR, FINETUNE_FILE, SEQ2SEQ, HFTranslator, too_large_message

STATE_FILE = "trainer_state.pt"
FORMAT = "tbb-finetune/1"


@dataclass
class FinetuneConfig:
    lr: float | None = None  # None: 5e-5 for an encoder-decoder (already a translator), 1e-4 for a decoder-only LM
    batch_size: int = 16  # pairs per step
    warmup_steps: int = 20  # linear warm-up, then constant: a time budget does not know its step count
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    max_tokens: int = 160  # an example longer than this (prompt and English) is skipped, and counted
    precision: str = "auto"  # helpers.runtime.resolve_precision; a CPU runs fp32 (bf16 autocast was 20x slower)
    checkpoint_every_minutes: float = 10.0
    lora: bool = False  # train low-rank adapters only (peft), for a model whose full fine-tuning does not fit
    lora_rank: int = 8
    seed: int = 0

    def learning_rate(self, kind: str) -> float:
        return self.lr if self.lr is not None else (5e-5 if kind == SEQ2SEQ else 1e-4)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FinetuneResult:
    steps: int
    pairs: int  # training pairs seen (with repeats after the first epoch)
    tokens: int  # target tokens (English + <eos>) trained on
    seconds: float  # training time, earlier sessions included; monitoring evaluations not counted
    loss: float | None  # mean training loss over the last 50 steps
    precision: str
    trainable: int
    parameters: int
    skipped_long: int  # training pairs longer than max_tokens, never used
    history: list[dict] = field(default_factory=list)  # {step, minutes, loss}
    monitor: list[dict] = field(default_factory=list)  # {step, minutes, pairs, bleu, chrf} on the monitor pairs
    resumed_from: int | None = None
    skipped_steps: int = 0  # fp16 steps skipped by the gradient scaler

    def summary(self) -> dict:
        out = asdict(self)
        out["minutes"] = round(self.seconds / 60, 2)
        out["tokens_per_s"] = round(self.tokens / max(self.seconds, 1e-9), 1)
        return out


def finetune_precision(translator: HFTranslator, precision: str = "auto") -> str:
    """fp16 on a T4, bf16 on Ampere and later, fp32 on a CPU; fp32 for Gemma 3 where only fp16 is offered
    (its activations overflow fp16)."""
    device = translator.device
    chosen = runtime.resolve_precision(device, precision)
    if chosen == "fp16" and str(getattr(translator.model.config, "model_type", "")).startswith("gemma3"):
        chosen = "fp32"
    return chosen


def _with_lora(translator: HFTranslator, rank: int):
    try:
        import peft
    except ImportError as err:
        raise ValueError("LoRA needs the peft package: pip install peft (Colab has it).") from err
    task = peft.TaskType.SEQ_2_SEQ_LM if translator.kind == SEQ2SEQ else peft.TaskType.CAUSAL_LM
    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear", task_type=task)
    return peft.get_peft_model(translator.model, config)


def save_finetune_checkpoint(translator: HFTranslator, out_dir: Path, state: dict) -> Path:
    """Model, tokenizer and trainer state into ``out/checkpoint/``, written beside it and swapped in."""
    final, tmp, old = out_dir / CHECKPOINT_DIR, out_dir / f"{CHECKPOINT_DIR}.tmp", out_dir / f"{CHECKPOINT_DIR}.old"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # a LoRA model saves its adapters only (megabytes; no copy of the model to merge them into, which would
    # double the memory LoRA is there to save): load_pretrained merges them into the base model when loading
    translator.model.save_pretrained(tmp)
    translator.tokenizer.save_pretrained(tmp)
    torch.save(state, tmp / STATE_FILE)
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def _find_state(out_dir: Path) -> Path | None:
    for name in (CHECKPOINT_DIR, f"{CHECKPOINT_DIR}.old"):  # .old: a crash between the two renames
        if (out_dir / name / STATE_FILE).is_file():
            return out_dir / name
    return None


def _write_info(out_dir: Path, info: dict) -> None:
    ckpt_lib.atomic_write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", out_dir / FINETUNE_FILE)


def _batches_of(examples: list[dict], order: list[int], batch_size: int, seed: int) -> list[list[int]]:
    """Batches of similar length: pools of 20 batches sorted by length, then shuffled (less padding)."""
    pool = 20 * batch_size
    batches = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start : start + pool], key=lambda i: len(examples[i]["input_ids"]))
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
    random.Random(seed).shuffle(batches)
    return batches


def finetune(
    translator: HFTranslator,
    train_pairs: list[tuple[str, str]],
    out_dir: str | Path,
    *,
    minutes: float | None = None,
    steps: int | None = None,
    cfg: FinetuneConfig | None = None,
    base_model: str | None = None,
    data: dict | None = None,
    monitor: list[tuple[str, str]] | None = None,
    monitor_every_minutes: float | None = None,
    progress: bool = True,
    stderr: TextIO | None = None,
) -> FinetuneResult:
    """Fine-tune ``translator`` on ``train_pairs`` within a budget, checkpointing to ``out_dir``; resume if it holds one.

    ``monitor`` pairs are translated (greedy) every ``monitor_every_minutes`` of training and at the end, their BLEU
    recorded against the minutes spent: the BLEU-against-time curve of notebook 04 (the clock stops meanwhile).
    """
    from ..evaluation.evaluate import score

    cfg = cfg or FinetuneConfig()
    err = stderr if stderr is not None else sys.stderr
    budget = Budget(minutes, steps)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if ckpt_lib.find_checkpoint(out_dir) is not None:
        raise ValueError(f"{out_dir} holds a scratch-model run (from `train`): give finetune a folder of its own.")
    base_model = base_model or translator.name
    info = {"format": FORMAT, "base_model": base_model, "kind": translator.kind, "config": cfg.to_dict(), "data": data}
    if translator.kind == CAUSAL:
        info["prompt"] = asdict(translator.prompt)
    saved_dir = _find_state(out_dir)
    if (out_dir / FINETUNE_FILE).is_file():
        old = json.loads((out_dir / FINETUNE_FILE).read_text())
        if saved_dir is not None:
            ignore = ("config.checkpoint_every_minutes",)
            ckpt_lib.check_config(
                {k: old.get(k) for k in ("base_model", "kind", "config", "data")},
                {k: info[k] for k in ("base_model", "kind", "config", "data")},
                out_dir,
                ignore=ignore,
            )
    _write_info(out_dir, info)

    precision = finetune_precision(translator, cfg.precision)
    device = translator.device
    torch.manual_seed(cfg.seed)
    if cfg.lora:
        translator.model = _with_lora(translator, cfg.lora_rank)
    model = translator.model
    lr = cfg.learning_rate(translator.kind)

    examples, skipped_long = [], 0
    for fr, en in train_pairs:
        ex = translator.encode_pair(fr, en)
        if len(ex["input_ids"]) + len(ex["labels"]) * (translator.kind == SEQ2SEQ) > cfg.max_tokens:
            skipped_long += 1
            continue
        examples.append(ex)
    if not examples:
        raise ValueError(f"None of the {len(train_pairs):,} training pairs fits max_tokens={cfg.max_tokens}.")
    if skipped_long:
        print(
            f"note: {skipped_long:,} of {len(train_pairs):,} training pairs are longer than {cfg.max_tokens} tokens "
            "and are not used (raise max_tokens to keep them).",
            file=err,
        )

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=cfg.weight_decay)
    scaler = make_scaler(device, precision)
    state = {"step": 0, "epoch": 0, "batches": None, "pairs": 0, "tokens": 0, "history": [], "monitor": [],
             "skipped_steps": 0, "elapsed": 0.0}  # fmt: skip
    resumed_from = None
    if saved_dir is not None:
        saved = torch.load(saved_dir / STATE_FILE, map_location="cpu", weights_only=False)
        if cfg.lora:
            import peft

            peft.set_peft_model_state_dict(model, saved["adapter"])
        else:
            loaded = type(model).from_pretrained(saved_dir, dtype=torch.float32)
            model.load_state_dict(loaded.state_dict())
            del loaded
        optimizer.load_state_dict(saved["optimizer"])
        scaler.load_state_dict(saved["scaler"])
        ckpt_lib.set_rng_state(saved["rng"])
        state = saved["loop"]
        resumed_from = state["step"]
        budget = Budget(minutes, steps, elapsed=state["elapsed"])
        print(f"Resuming {out_dir} at step {resumed_from} ({state['elapsed'] / 60:.1f} min done).", file=err)

    def save() -> Path:
        state["elapsed"] = budget.elapsed()
        payload = {
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict(),
            "rng": ckpt_lib.rng_state(),
            "loop": state,
        }
        if cfg.lora:
            import peft

            payload["adapter"] = peft.get_peft_model_state_dict(model)
        return save_finetune_checkpoint(translator, out_dir, payload)

    def run_monitor() -> None:
        if not monitor:
            return
        t0, minutes_done = time.monotonic(), budget.elapsed() / 60
        hyps = translator.translate([fr for fr, _ in monitor])
        s = score(hyps, [en for _, en in monitor])
        state["monitor"].append({"step": state["step"], "minutes": round(minutes_done, 3),
                                 "pairs": state["pairs"], "bleu": s["bleu"], "chrf": s["chrf"]})  # fmt: skip
        model.train()
        budget.prior -= time.monotonic() - t0  # the clock stops while we measure

    budget.restart_clock()  # encoding the pairs and loading the state were not training
    bar = None
    if progress:
        from tqdm.auto import tqdm

        by_time = minutes is not None
        total = int(round(minutes * 60)) if by_time else steps
        # a time budget fills the bar with training seconds (the clock stops while the monitor scores)
        bar = tqdm(total=total, initial=int(budget.elapsed()) if by_time else state["step"], desc="fine-tune",
                   unit="s" if by_time else "step", file=err, dynamic_ncols=True, mininterval=1.0,
                   bar_format="{desc} {percentage:3.0f}%|{bar}|{postfix}" if by_time else None)  # fmt: skip
    last_draw = 0.0

    if not state["monitor"]:
        run_monitor()  # the score before any fine-tuning: the curve's first point
    last_save = time.monotonic()
    next_monitor = (budget.elapsed() / 60 + monitor_every_minutes) if monitor_every_minutes else math.inf
    bad_in_a_row, losses = 0, []
    model.train()
    try:
        while not budget.done(state["step"]):
            if not state["batches"]:
                order = list(range(len(examples)))
                random.Random(cfg.seed * 1000 + state["epoch"]).shuffle(order)
                state["batches"] = _batches_of(examples, order, cfg.batch_size, cfg.seed + state["epoch"])
                state["epoch"] += 1
            idx = state["batches"].pop()
            batch = {k: v.to(device) for k, v in translator.collate([examples[i] for i in idx]).items()}
            for group in optimizer.param_groups:
                group["lr"] = lr * min(1.0, (state["step"] + 1) / max(1, cfg.warmup_steps))
            try:
                with autocast_context(device, precision):
                    loss = model(**batch).loss
                scaler.scale(loss).backward()
            except RuntimeError as e:
                if _is_oom(e):
                    raise OutOfMemoryError(too_large_message(base_model, model)) from e
                raise
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            scale_before = scaler.get_scale() if scaler.is_enabled() else None
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            if scale_before is not None and scaler.get_scale() < scale_before:
                state["skipped_steps"] += 1  # inf/NaN gradients: the scaler skipped this update
            value = float(loss.detach())
            if not math.isfinite(value):
                bad_in_a_row += 1
                if bad_in_a_row >= 5 or not scaler.is_enabled():
                    raise NonFiniteLossError(
                        f"The loss is {value} at step {state['step']}: lower the learning rate (--lr, now {lr:g}) "
                        "or use fp32 (precision='fp32'); the last checkpoint is in " + str(out_dir / CHECKPOINT_DIR)
                    )
            else:
                bad_in_a_row = 0
                losses = (losses + [value])[-50:]
            state["step"] += 1
            state["pairs"] += len(idx)
            state["tokens"] += int((batch["labels"] != -100).sum())
            if state["step"] % 10 == 0 or state["step"] == 1:
                state["history"].append({"step": state["step"], "minutes": round(budget.elapsed() / 60, 3),
                                         "loss": round(sum(losses) / max(len(losses), 1), 4)})  # fmt: skip
            if bar is not None and (time.monotonic() - last_draw >= 1.0 or budget.done(state["step"])):
                last_draw = time.monotonic()  # at most one line a second: a log file stays readable
                bar.n = min(bar.total, int(budget.elapsed())) if minutes is not None else state["step"]
                if minutes is not None:
                    bar.set_description_str(f"fine-tune {_fmt_time(budget.elapsed())} of {_fmt_time(minutes * 60)}")
                bar.set_postfix_str(f"step {state['step']}, loss {value:.3f}", refresh=False)
                bar.refresh()
            if budget.elapsed() / 60 >= next_monitor:
                run_monitor()
                next_monitor += monitor_every_minutes
            if time.monotonic() - last_save >= cfg.checkpoint_every_minutes * 60:
                t0 = time.monotonic()
                save()
                last_save = time.monotonic()
                budget.prior -= last_save - t0  # writing 1.6 GB to Drive is not training: the clock stops
    finally:
        if bar is not None:
            bar.close()
    seconds = budget.elapsed()
    if not state["monitor"] or state["monitor"][-1]["step"] != state["step"]:
        run_monitor()
    save()
    model.eval()
    result = FinetuneResult(
        steps=state["step"], pairs=state["pairs"], tokens=state["tokens"], seconds=seconds,
        loss=round(sum(losses) / len(losses), 4) if losses else None, precision=precision,
        trainable=sum(p.numel() for p in params), parameters=translator.parameters(), skipped_long=skipped_long,
        history=state["history"], monitor=state["monitor"], resumed_from=resumed_from,
        skipped_steps=state["skipped_steps"],
    )  # fmt: skip
    _write_info(out_dir, {**info, "result": result.summary(), "hardware": runtime.hardware_name(device)})
    return result


def load_finetuned_info(out_dir: str | Path) -> dict:
    path = Path(out_dir) / FINETUNE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{out_dir} has no {FINETUNE_FILE}: it was not written by finetune.")
    return json.loads(path.read_text())
