"""Fine-tuning a pretrained Hugging Face model on our training pairs with ``transformers.Trainer``, within a budget.

``python -m helpers finetune`` and notebook 04 call :func:`finetune`, which is :func:`build_trainer`, then
``trainer.train(...)``, then :func:`finish`; notebook 04 shows the three. The Trainer is built as chapter 7 of the
Hugging Face course builds it for translation:

* an encoder-decoder (opus-mt): ``Seq2SeqTrainingArguments``, ``Seq2SeqTrainer``, ``DataCollatorForSeq2Seq``;
* a decoder-only LM (SmolLM2): ``TrainingArguments`` and ``Trainer`` with our example format and collate
  (:meth:`HFTranslator.encode_pair`, :meth:`HFTranslator.collate`): the loss on the English and ``<eos>`` only.

AdamW, a linear warm-up then a constant rate (a time budget does not know its step count), gradient clipping,
batches of similar length, fp16 with a gradient scaler on a T4, bf16 on Ampere and later, fp32 on a CPU
(:func:`finetune_precision`), LoRA through ``peft``, checkpoints and resuming: all Trainer's. What it lacks or
gets wrong for us, ours adds:

* :class:`TimeBudget`, a callback: stop after ``minutes`` of training, earlier sessions included (Trainer counts
  steps: ``steps`` is its ``max_steps``), a checkpoint every ``checkpoint_every_minutes``, the progress bar;
* :class:`MonitorBLEU`, a callback: BLEU of the monitor pairs every ``monitor_every_minutes``, through the same
  ``translate`` and ``score`` as every evaluation (Trainer's own evaluation would score with its loss or its
  generate, not with ours); the clock stops while it scores, and while a checkpoint is written;
* :class:`_Steps`, in our two Trainer subclasses: a stop on a non-finite loss after the backward pass and before
  the update. Trainer applies such an update (fp16 excepted: the scaler skips it), and by default
  (``logging_nan_inf_filter``) even logs the mean of the other losses in its place. Also: each epoch's batches
  drawn from ``(data_seed, epoch)`` (:class:`_EpochSeeded`: with Trainer's own, a run resumed after its first
  epoch sees other batches), and no step past a budget already spent (Trainer would take one).

The run folder (:class:`helpers.run_folder.RunFolder`)::

    out/finetune.json           base model, configuration, data, and the result when done (marks the folder)
    out/checkpoint/             the fine-tuned model and tokenizer (save_pretrained; with LoRA, the adapters only:
                                load_pretrained merges them into the base model), written at the end
    out/trainer/checkpoint-N/   Trainer's last checkpoint (save_total_limit=1): model, optimizer, scheduler, scaler,
                                random states, trainer_state.json (with our callbacks' state), written last
    out/test_new.tsv, test.tsv  the run's test sets, as ``train`` writes them
    out/train_words.tsv         the French words of the training split (unseen-word slice, word baseline)

Rerunning with the same ``out`` resumes from the last checkpoint, with the same batches (Trainer skips the
batches already seen; ``ignore_data_skip=False``) and random states; a checkpoint that a disconnect cut short
(no ``trainer_state.json``) is removed first. On another configuration it stops and names the field.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

import torch
from transformers import (
    DataCollatorForSeq2Seq,
    PrinterCallback,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)
from transformers.trainer_callback import ExportableState
from transformers.trainer_pt_utils import LengthGroupedSampler

from .. import runtime
from ..evaluation.evaluate import score
from ..progress import progress_bar
from ..run_folder import FINETUNE_INFO, TRAINER_STATE, RunFolder
from ..training import checkpoint as ckpt_lib
from ..training import distributed
from ..training.train import Budget, NonFiniteLossError, OutOfMemoryError, format_duration, is_out_of_memory
from .loading import too_large_message
from .translator import CAUSAL, SEQ2SEQ, HFTranslator

FORMAT = "tbb-finetune/2"  # 1: the hand-written loop before Trainer (its checkpoints cannot be resumed here)
NEVER = 10**9  # Trainer's max_steps under a time budget: the clock stops the run
LOG_EVERY = 10  # steps between two logged losses (each log reads the loss from the GPU)


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
    seconds: float  # training time, earlier sessions included; monitoring evaluations and saving not counted
    loss: float | None  # mean training loss over the last 50 steps
    precision: str
    trainable: int
    parameters: int
    skipped_long: int  # training pairs longer than max_tokens, never used
    history: list[dict] = field(default_factory=list)  # {step, minutes, loss}, every LOG_EVERY steps
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
    chosen = runtime.resolve_precision(translator.device, precision)
    if chosen == "fp16" and str(getattr(translator.model.config, "model_type", "")).startswith("gemma3"):
        chosen = "fp32"
    return chosen


def _with_lora(translator: HFTranslator, rank: int):
    try:
        import peft  # optional ([dev] extra); LoRA only
    except ImportError as err:
        raise ValueError("LoRA needs the peft package: pip install peft (Colab has it).") from err
    task = peft.TaskType.SEQ_2_SEQ_LM if translator.kind == SEQ2SEQ else peft.TaskType.CAUSAL_LM
    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear", task_type=task)
    return peft.get_peft_model(translator.model, config)


# ---------------------------------------------------------------------------------------------- the callbacks


class TimeBudget(TrainerCallback, ExportableState):
    """Stop after ``minutes`` of training or ``steps`` steps, a checkpoint every ``every_minutes``, the progress bar.

    The clock is notebook 03's :class:`helpers.training.train.Budget`: earlier sessions count (``elapsed`` is kept in
    the checkpoint), and it stops while a checkpoint is written and while the monitor scores. It also counts what
    was trained on (the Trainer subclass adds each batch) and keeps the logged loss with its minute.
    """

    KEPT = ("elapsed", "pairs", "tokens", "skipped_steps", "history")  # saved in each checkpoint, restored on resume

    def __init__(self, minutes=None, steps=None, every_minutes=10.0, bar_file=None):
        self.budget = Budget(minutes, steps)
        self.every = every_minutes * 60
        self.elapsed, self.pairs, self.tokens, self.skipped_steps, self.history = 0.0, 0, 0, 0, []
        self.bar_file, self.bar, self.drawn, self.loss = bar_file, None, 0.0, None

    def state(self) -> dict:
        return {"args": {}, "attributes": {k: getattr(self, k) for k in self.KEPT}}

    def restore(self, saved: dict) -> None:
        self.__dict__.update({k: saved[k] for k in self.KEPT})
        self.budget.prior = self.elapsed

    def minutes(self) -> float:
        return self.budget.elapsed() / 60

    @contextlib.contextmanager
    def paused(self):
        """The clock stops meanwhile: scoring the monitor pairs, or writing 1.6 GB to Drive, is not training."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.budget.prior -= time.monotonic() - t0

    def on_train_begin(self, args, state, control, **kwargs):
        self.budget.restart_clock()  # loading and encoding were not training
        self.last_save = self.budget.elapsed()
        if self.bar_file is not None:
            by_time = self.budget.minutes is not None
            total = int(round(self.budget.minutes * 60)) if by_time else self.budget.steps
            self.bar = progress_bar(total=total, initial=min(total, int(self.elapsed) if by_time else state.global_step),
                            desc="fine-tune", unit="s" if by_time else "step", file=self.bar_file, dynamic_ncols=True,
                            bar_format="{desc} {percentage:3.0f}%|{bar}|{postfix}" if by_time else None)  # fmt: skip

    def on_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        self.skipped_steps += bool(getattr(optimizer, "step_was_skipped", False))  # fp16: inf/NaN gradients

    def on_step_end(self, args, state, control, **kwargs):
        self.elapsed = self.budget.elapsed()
        stop, save = self.budget.done(state.global_step), self.elapsed - self.last_save >= self.every
        if distributed.ranks().several:  # under torchrun rank 0's clock decides for all: they stop at one step
            stop, save = map(bool, distributed.from_main([stop, save], args.device))
        if stop:
            control.should_training_stop = control.should_save = True
        elif save:
            control.should_save = True
        self._draw(state.global_step, force=control.should_training_stop)

    def on_save(self, args, state, control, **kwargs):
        self.last_save = self.budget.elapsed()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.loss = logs["loss"]
            self.history.append({"step": state.global_step, "minutes": round(self.elapsed / 60, 3),
                                 "loss": round(self.loss, 4)})  # fmt: skip

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()

    def _draw(self, step: int, force: bool = False) -> None:
        if self.bar is None or (time.monotonic() - self.drawn < 1.0 and not force):
            return  # at most a redraw a second (a log file gets a line per half minute: helpers.progress)
        self.drawn = time.monotonic()
        if self.budget.minutes is not None:
            self.bar.n = min(self.bar.total, int(self.elapsed))
            self.bar.set_description_str(
                f"fine-tune {format_duration(self.elapsed)} of {format_duration(self.budget.minutes * 60)}"
            )
        else:
            self.bar.n = step
        loss = "" if self.loss is None else f", loss {self.loss:.3f}"
        self.bar.set_postfix_str(f"step {step}{loss}", refresh=False)
        self.bar.refresh()


class MonitorBLEU(TrainerCallback, ExportableState):
    """BLEU (and chrF) of greedy translations of ``pairs`` before training, every ``every_minutes`` of training,
    and at the end (:func:`finish`): the BLEU-against-minutes curve of notebook 04. The clock stops meanwhile."""

    def __init__(self, translator: HFTranslator, pairs, every_minutes: float | None, clock: TimeBudget):
        self.translator, self.pairs, self.every, self.clock = translator, list(pairs or ()), every_minutes, clock
        self.points: list[dict] = []

    def state(self) -> dict:
        return {"args": {}, "attributes": {"points": self.points}}

    def score(self, step: int) -> None:
        minutes = self.clock.minutes()
        with self.clock.paused():
            s = score(self.translator.translate([fr for fr, _ in self.pairs]), [en for _, en in self.pairs])
        self.points.append({"step": step, "minutes": round(minutes, 3), "pairs": self.clock.pairs,
                            "bleu": s["bleu"], "chrf": s["chrf"]})  # fmt: skip

    def on_train_begin(self, args, state, control, **kwargs):
        if self.pairs and not self.points and state.is_world_process_zero:  # rank 0 scores, the others train on
            self.score(state.global_step)  # before any fine-tuning: the curve's first point

    def on_step_end(self, args, state, control, **kwargs):
        if not (self.pairs and self.every and self.points and state.is_world_process_zero):
            return
        if self.clock.minutes() >= self.points[-1]["minutes"] + self.every:
            self.score(state.global_step)


# ---------------------------------------------------------------------------------------------- the Trainers


class _EpochSeeded(LengthGroupedSampler):
    """Trainer's batches of similar length (``train_sampling_strategy="group_by_length"``), shuffled from
    ``(data_seed, epoch)`` alone. Trainer's own draws from the global random state, which after a resume is not
    the one an uninterrupted run had at that epoch's start: from the second epoch on, a resumed run would see
    other batches."""

    def __init__(self, batch_size: int, lengths: list[int], seed: int):
        super().__init__(batch_size, lengths=lengths)
        self.seed = seed
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:  # Trainer calls it before each epoch, a resumed one included
        self.generator = torch.Generator().manual_seed(self.seed * 100_003 + epoch)


class _Steps:
    """What our Trainers add to Trainer's step (for both ``Trainer`` and ``Seq2SeqTrainer``)."""

    clock: TimeBudget
    run: FinetuneRun
    bad_in_a_row = 0

    def _get_train_sampler(self, train_dataset=None):
        lengths = [len(ex["input_ids"]) for ex in train_dataset or self.train_dataset]
        return _EpochSeeded(self.args.train_batch_size, lengths, self.args.data_seed)

    def training_step(self, model, inputs, num_items_in_batch=None):
        labels = inputs["labels"]
        loss = super().training_step(model, inputs, num_items_in_batch)  # forward and backward; the update follows
        counts = torch.tensor([len(labels), int((labels != -100).sum())], device=labels.device)
        if distributed.ranks().several:  # every rank's pairs and tokens: the run's, as one process would count
            torch.distributed.all_reduce(counts)
        self.clock.pairs += int(counts[0])
        self.clock.tokens += int(counts[1])
        value = float(loss)  # waits for the GPU, once a step: the price of stopping before a bad update
        if math.isfinite(value):
            self.bad_in_a_row = 0
            return loss
        self.bad_in_a_row += 1  # fp16: the scaler skips this update; five in a row is not a passing overflow
        if self.bad_in_a_row >= 5 or self.accelerator.scaler is None:
            raise NonFiniteLossError(
                f"The loss is {value} at step {self.state.global_step + 1}; this update was not applied. Lower the "
                f"learning rate (--lr, now {self.args.learning_rate:g}) or use fp32 (precision='fp32'); the last "
                f"checkpoint is in {self.args.output_dir}."
            )
        return loss

    def _save_checkpoint(self, model, trial):
        with self.clock.paused():
            super()._save_checkpoint(model, trial)

    def _issue_warnings_after_load(self, load_result):
        """Trainer (5.23) warns of "missing keys" on every resume: the weights a model ties to another (saved once,
        under the name they share) and Marian's position tables (built, never saved). Both are right after loading
        (the resume tests compare every tensor); only other missing keys are worth a warning."""
        model = self.accelerator.unwrap_model(self.model)
        every = {name for name, _ in model.named_parameters(remove_duplicate=False)}
        tied = every - {name for name, _ in model.named_parameters()}
        expected = tied | set(getattr(model, "_keys_to_ignore_on_save", None) or ())
        missing = [k for k in load_result.missing_keys if k not in expected]
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))

    def train(self, resume_from_checkpoint=None, **kwargs):
        """Trainer's ``train``, with a message that names the options after an out-of-memory error; a run whose budget
        is spent only loads its checkpoint (Trainer checks ``max_steps`` after a step: it would take one more)."""
        self.clock.budget.restart_clock()  # loading and encoding were not training
        if resume_from_checkpoint is not None and self.clock.budget.done(self.run.resumed_from):
            self._load_from_checkpoint(resume_from_checkpoint)
            return None
        try:
            return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        except RuntimeError as e:
            if is_out_of_memory(e):
                raise OutOfMemoryError(too_large_message(self.run.info["base_model"], self.model)) from e
            raise


class FinetuneTrainer(_Steps, Trainer):
    """``Trainer`` for a decoder-only LM, with our budget, monitor and non-finite loss stop."""


class FinetuneSeq2SeqTrainer(_Steps, Seq2SeqTrainer):
    """``Seq2SeqTrainer`` for an encoder-decoder, with our budget, monitor and non-finite loss stop."""


@dataclass
class FinetuneRun:
    """What :func:`finish` needs besides the Trainer (``trainer.run``)."""

    translator: HFTranslator
    out_dir: Path
    info: dict
    precision: str
    skipped_long: int
    monitor: MonitorBLEU
    checkpoint: str | None = None  # the Trainer checkpoint to resume from
    resumed_from: int | None = None


# ---------------------------------------------------------------------------------------------- build, train, finish


def _write_info(out_dir: Path, info: dict) -> None:
    runtime.atomic_write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", RunFolder(out_dir).finetune_info)


def last_checkpoint(trainer_dir: Path) -> Path | None:
    """The last whole Trainer checkpoint in ``trainer_dir``; one cut short by a disconnect is removed."""
    found = sorted(
        (p for p in trainer_dir.glob("checkpoint-*") if p.name[11:].isdigit()), key=lambda p: int(p.name[11:])
    )
    while found:
        last = found.pop()
        try:
            json.loads((last / TRAINER_STATE).read_text(encoding="utf-8"))
            return last
        except (OSError, ValueError):
            shutil.rmtree(last, ignore_errors=True)
    return None


def _encode(translator: HFTranslator, pairs, max_tokens: int, err: TextIO) -> tuple[list[dict], int]:
    examples, skipped = [], 0
    for fr, en in pairs:
        ex = translator.encode_pair(fr, en)
        if len(ex["input_ids"]) + len(ex["labels"]) * (translator.kind == SEQ2SEQ) > max_tokens:
            skipped += 1
        else:
            examples.append(ex)
    if not examples:
        raise ValueError(f"None of the {len(pairs):,} training pairs fits max_tokens={max_tokens}.")
    if skipped:
        print(f"note: {skipped:,} of {len(pairs):,} training pairs are longer than {max_tokens} tokens and are not "
              "used (raise max_tokens to keep them).", file=err)  # fmt: skip
    return examples, skipped


def build_trainer(
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
) -> Trainer:
    """The Trainer that fine-tunes ``translator`` on ``train_pairs`` into ``out_dir``; nothing is trained yet.

    ``trainer.train(resume_from_checkpoint=trainer.run.checkpoint)`` trains (from the last checkpoint in ``out_dir``
    when there is one, None otherwise), then :func:`finish` saves the model and returns the :class:`FinetuneResult`.
    """
    cfg = cfg or FinetuneConfig()
    err = stderr if stderr is not None else sys.stderr
    clock = TimeBudget(minutes, steps, cfg.checkpoint_every_minutes, bar_file=err if progress else None)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if ckpt_lib.find_checkpoint(out_dir) is not None:
        raise ValueError(f"{out_dir} holds a scratch-model run (from `train`): give finetune a folder of its own.")
    base_model = base_model or translator.name
    info = {"format": FORMAT, "base_model": base_model, "kind": translator.kind, "config": cfg.to_dict(), "data": data}
    if translator.kind == CAUSAL:
        info["prompt"] = asdict(translator.prompt)
    folder = RunFolder(out_dir)
    checkpoint = last_checkpoint(folder.trainer)
    if folder.finetune_info.is_file():
        old = json.loads(folder.finetune_info.read_text(encoding="utf-8"))
        if checkpoint is not None:
            keys = ("base_model", "kind", "config", "data")
            ckpt_lib.check_config({k: old.get(k) for k in keys}, {k: info[k] for k in keys}, out_dir,
                                  ignore=("config.checkpoint_every_minutes",))  # fmt: skip
        elif old.get("format") != FORMAT and folder.hf_checkpoint.is_dir():
            print(f"note: {out_dir} holds a run of an earlier finetune ({old.get('format')}), which Trainer cannot "
                  "resume: starting afresh (its model is replaced at the end).", file=err)  # fmt: skip
    ranks = distributed.ranks()
    if cfg.batch_size % ranks.world:  # refused before anything is written
        raise ValueError(f"batch_size={cfg.batch_size} cannot be shared by {ranks.world} processes: use a multiple of "
                         f"{ranks.world} (each process trains on batch_size / {ranks.world} pairs a step).")  # fmt: skip
    if ranks.main:
        _write_info(out_dir, info)

    precision = finetune_precision(translator, cfg.precision)
    on_cpu = translator.device.type == "cpu"
    set_seed(cfg.seed)  # LoRA's initial adapters
    if cfg.lora:
        translator.model = _with_lora(translator, cfg.lora_rank)
    examples, skipped_long = _encode(translator, train_pairs, cfg.max_tokens, err)
    seq2seq = translator.kind == SEQ2SEQ
    Arguments, TrainerClass = (
        (Seq2SeqTrainingArguments, FinetuneSeq2SeqTrainer) if seq2seq else (TrainingArguments, FinetuneTrainer)
    )
    args = Arguments(
        output_dir=str(folder.trainer),
        per_device_train_batch_size=cfg.batch_size // ranks.world,  # the same batch per step on any number of ranks
        ddp_find_unused_parameters=False,  # under torchrun: every parameter gets a gradient (no extra graph walk)
        learning_rate=cfg.learning_rate(translator.kind),
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.grad_clip,
        max_steps=steps or NEVER,  # a time budget: TimeBudget stops the run
        fp16=precision == "fp16",  # on a CPU accelerate ignores it (no autocast, no scaler): see below
        bf16=precision == "bf16",
        use_cpu=on_cpu,
        save_strategy="steps",
        save_steps=NEVER,  # not by steps: TimeBudget asks for a save every checkpoint_every_minutes, and at the end
        save_total_limit=1,  # the last checkpoint only: 1.6 GB for SmolLM2 (weights and AdamW's two moments)
        logging_steps=LOG_EVERY,
        logging_first_step=True,
        seed=cfg.seed,
        data_seed=cfg.seed,
        ignore_data_skip=False,  # a resumed run skips the batches already trained on: it sees the same batches
        train_sampling_strategy="group_by_length",  # less padding; shuffled by epoch (_EpochSeeded)
        dataloader_num_workers=0,
        remove_unused_columns=False,
        report_to="none",
        disable_tqdm=True,  # TimeBudget draws the bar: Trainer's counts to max_steps, which a time budget lacks
    )
    collator = DataCollatorForSeq2Seq(translator.tokenizer, model=translator.model) if seq2seq else translator.collate
    monitor_cb = MonitorBLEU(translator, monitor, monitor_every_minutes, clock)
    trainer = TrainerClass(model=translator.model, args=args, train_dataset=examples, data_collator=collator,
                           processing_class=translator.tokenizer, callbacks=[clock, monitor_cb])  # fmt: skip
    trainer.remove_callback(PrinterCallback)  # it prints every log as a dict; the bar shows the loss
    if precision == "fp16" and on_cpu:
        # accelerate keeps fp16 for GPUs (on a CPU it trains in fp32, silently); switched on here, the T4's path
        # (autocast to fp16, a gradient scaler) runs in the tests on a CPU, slowly
        trainer.accelerator.native_amp = True
        trainer.accelerator.scaler = torch.amp.GradScaler("cpu")
    trainer.clock = clock
    trainer.run = FinetuneRun(translator, out_dir, info, precision, skipped_long, monitor_cb)
    if checkpoint is not None:
        saved = json.loads((checkpoint / TRAINER_STATE).read_text(encoding="utf-8"))
        clock.restore(saved["stateful_callbacks"]["TimeBudget"]["attributes"])
        monitor_cb.points = saved["stateful_callbacks"]["MonitorBLEU"]["attributes"]["points"]
        trainer.run.checkpoint, trainer.run.resumed_from = str(checkpoint), saved["global_step"]
        print(f"Resuming {out_dir} from {checkpoint.name} ({clock.elapsed / 60:.1f} min done).", file=err)
    return trainer


def _save_model(translator: HFTranslator, out_dir: Path) -> Path:
    """Model and tokenizer into ``out/checkpoint/``, written beside it and swapped in (a disconnect keeps the old)."""
    final = RunFolder(out_dir).hf_checkpoint
    tmp, old = final.with_name(f"{final.name}.tmp"), final.with_name(f"{final.name}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    # a LoRA model saves its adapters only (megabytes; no copy of the model to merge them into, which would
    # double the memory LoRA is there to save): load_pretrained merges them into the base model when loading
    translator.model.save_pretrained(tmp)
    translator.tokenizer.save_pretrained(tmp)
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def finish(trainer: Trainer) -> FinetuneResult:
    """After ``trainer.train``: the last monitor point, the model saved to ``out/checkpoint/``, the result recorded
    in ``out/finetune.json`` and returned."""
    run = trainer.run
    translator = run.translator
    step = max(trainer.state.global_step, run.resumed_from or 0)
    # the model without the autocast wrapper accelerate put on its forward: it translates as the saved one does
    translator.model = trainer.accelerator.unwrap_model(trainer.model, keep_fp32_wrapper=False)
    if not trainer.is_world_process_zero():  # under torchrun rank 0 scores and saves
        return _result(trainer, step)
    if run.monitor.pairs and (not run.monitor.points or run.monitor.points[-1]["step"] != step):
        run.monitor.score(step)
    _save_model(translator, run.out_dir)
    result = _result(trainer, step)
    hardware = runtime.hardware_name(translator.device)
    _write_info(run.out_dir, {**run.info, "result": result.summary(), "hardware": hardware})
    return result


def _result(trainer: Trainer, step: int) -> FinetuneResult:
    run, clock, translator = trainer.run, trainer.clock, trainer.run.translator
    translator.model.eval()
    recent = [h["loss"] for h in clock.history if h["step"] > step - 50]
    return FinetuneResult(
        steps=step, pairs=clock.pairs, tokens=clock.tokens, seconds=clock.elapsed,
        loss=round(sum(recent) / len(recent), 4) if recent else None, precision=run.precision,
        trainable=translator.trainable_parameters(), parameters=translator.parameters(),
        skipped_long=run.skipped_long, history=clock.history, monitor=run.monitor.points,
        resumed_from=run.resumed_from, skipped_steps=clock.skipped_steps,
    )  # fmt: skip


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
    trainer = build_trainer(translator, train_pairs, out_dir, minutes=minutes, steps=steps, cfg=cfg,
                            base_model=base_model, data=data, monitor=monitor,
                            monitor_every_minutes=monitor_every_minutes, progress=progress, stderr=stderr)  # fmt: skip
    trainer.train(resume_from_checkpoint=trainer.run.checkpoint)
    return finish(trainer)


def load_finetuned_info(out_dir: str | Path) -> dict:
    path = RunFolder(out_dir).finetune_info
    if not path.is_file():
        raise FileNotFoundError(f"{out_dir} has no {FINETUNE_INFO}: it was not written by finetune.")
    return json.loads(path.read_text(encoding="utf-8"))
