"""Training configurations and the presets: the one place where a run's settings are named.

A :class:`TrainConfig` holds everything a run depends on, the model's shape included. The model's own
:class:`helpers.nn.model.ModelConfig` is derived from it by :meth:`TrainConfig.model_config` once the
tokenizer exists, because the vocabulary size is only known then (sentencepiece may return fewer pieces
than asked for on a small corpus). Keeping the shape fields flat here means one dictionary describes a
run in ``checkpoint.json``, ``train_summary.json`` and the metrics of notebook 03.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

import torch

from ..runtime import ConfigMismatchError

ATTENTION_KERNELS = ("auto", "sdpa", "explicit")
OPTIMIZERS = ("adamw", "muon")
SCHEDULES = ("cosine", "wsd")


@dataclass
class TrainConfig:
    # model shape (helpers.nn.model.ModelConfig)
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    d_ff: int | None = None  # None -> 4 * d_model
    dropout: float = 0.1
    positional: str = "learned"  # also "sinusoidal"; notebook 05: "rotary", "alibi", "none"
    attention: str = "dot"  # notebook 05: "synthesizer"
    bottleneck_dim: int | None = None  # notebook 05: m latents (a Perceiver-style model)
    # notebook 05's training-speed levers from the GPT-2 speedrun (helpers.nn.variants; issue 28 measured them)
    qk_norm: bool = False  # unit-RMS queries and keys
    activation: str = "gelu"  # or "relu2": ReLU squared
    zero_init: bool = False  # output projections start at zero
    tie_weights: bool = True  # False: an output head of its own instead of the token embedding matrix
    max_len: int = 64  # tokens per sequence: <bos> French <sep> English <eos>
    # "sdpa": F.scaled_dot_product_attention (fused kernels); "explicit": the softmax written out (notebook 02's
    # version); "auto": sdpa on a GPU, explicit on a CPU, where for sequences this short (<= 64 tokens) with a
    # prefix mask it is faster (1.3-1.4x in bf16, equal in fp32: benchmarks/bench_train.py). Same function.
    attention_kernel: str = "sdpa"
    # tokenizer
    vocab_size: int = 8000
    tokenizer_type: str = "unigram"
    # batches
    max_tokens: int = 4096  # tokens per batch, padding included: the knob to lower on out-of-memory
    # a compiled step (issue 29): static batch shapes (StaticBucketBatcher: lengths padded up to multiples of
    # static_step, a fixed number of rows per length), each compiled once by torch.compile with compile_backend
    compile: bool = False
    compile_backend: str = "inductor"  # tests use "aot_eager": the same tracing, no C++ or GPU kernels to build
    static_step: int = 16
    # optimiser and schedule
    optimizer: str = "adamw"  # or "muon": Muon for the blocks' matrices, AdamW for embeddings, head, norms, biases
    lr: float = 1e-3
    warmup_steps: int = 200
    min_lr_ratio: float = 0.1  # the schedule ends at lr * min_lr_ratio
    schedule: str = "cosine"  # or "wsd": warm-up, stable, then a linear cool-down over the last `cooldown` of the run
    cooldown: float = 0.45  # wsd only: the share of the run spent cooling down (the speedrun record's 0.45)
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.98
    grad_clip: float = 1.0
    label_smoothing: float = 0.1
    # auto: fp16 + GradScaler on a T4, bf16 on Ampere and later, fp32 on CPU; "bf16_if_native" also uses
    # bf16 on a CPU with bf16 instructions (AVX512-BF16/AMX: about twice fp32's speed); or fp32|bf16|fp16
    precision: str = "auto"
    # notebook 05: span-corruption pretraining on the unpaired sides of the training pairs for a share of the
    # budget, then translation for the rest (helpers.training.pretrain); and a cap on the parallel pairs trained on
    pretrain: str | None = None  # None | "span"
    pretrain_fraction: float = 0.3
    parallel_pairs: int | None = None  # None = every training pair; the tokenizer still sees them all
    # token embeddings started from a pretrained model's (hub name, folder or .gguf; helpers.hf.embedding_transfer)
    init_embeddings: str | None = None
    # budget: minutes (what the notebook uses) or steps (exactly reproducible); both = whichever ends first
    minutes: float | None = None
    steps: int | None = None
    # bookkeeping
    eval_interval: int = 500  # steps between validation passes
    valid_sentences: int = 2000  # cap on the validation set, so a pass takes seconds
    log_interval: int = 50  # steps per point in the history
    checkpoint_minutes: float = 5.0
    checkpoint_every_steps: int | None = None  # also save every N steps (tests use this)
    seed: int = 0

    def __post_init__(self):
        if self.attention_kernel not in ATTENTION_KERNELS:
            raise ValueError(
                f"attention_kernel={self.attention_kernel!r} is not known: use one of {ATTENTION_KERNELS}."
            )
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer={self.optimizer!r} is not known: use one of {OPTIMIZERS}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r} is not known: use one of {SCHEDULES}.")
        if not 0.0 < self.cooldown <= 1.0:
            raise ValueError(f"cooldown must be a share of the run in (0, 1], got {self.cooldown!r} (0.45 is typical).")
        if self.compile and self.pretrain:
            raise ValueError(
                "compile=True needs the static batches of translation training: it cannot be combined with "
                "pretrain (its batches bring new shapes). Turn one of them off."
            )
        if self.pretrain not in (None, "span"):
            raise ValueError(f"pretrain={self.pretrain!r} is not known: use None or 'span'.")
        if not 0.0 < self.pretrain_fraction < 1.0:
            raise ValueError(
                f"pretrain_fraction must lie strictly between 0 and 1, got {self.pretrain_fraction!r} (0.3 is typical)."
            )
        if self.pretrain and self.steps is not None and self.steps < 2:
            raise ValueError(
                f"steps={self.steps} cannot be shared between pretraining and translation: use at least 2."
            )
        self.model_config(self.vocab_size)  # a shape or variant that cannot work is refused now, before the data
        if self.parallel_pairs is not None and (isinstance(self.parallel_pairs, bool) or self.parallel_pairs < 1):
            raise ValueError(
                f"parallel_pairs must be a positive number of pairs or None (all), got {self.parallel_pairs!r}."
            )

    def model_config(self, vocab_size: int, device: torch.device | str | None = None):
        """The model's configuration for a tokenizer of ``vocab_size`` pieces, its kernel chosen for ``device``."""
        from ..nn.model import ModelConfig

        kernel = self.attention_kernel
        if kernel == "auto":
            kernel = "sdpa" if device is not None and torch.device(device).type == "cuda" else "explicit"
        return ModelConfig(
            vocab_size=vocab_size,
            max_len=self.max_len,
            n_layer=self.n_layer,
            n_head=self.n_head,
            d_model=self.d_model,
            d_ff=self.d_ff,
            dropout=self.dropout,
            positional=self.positional,
            attention_kernel=kernel,
            attention=self.attention,
            bottleneck_dim=self.bottleneck_dim,
            qk_norm=self.qk_norm,
            activation=self.activation,
            zero_init=self.zero_init,
            tie_weights=self.tie_weights,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        """The inverse of :meth:`to_dict`; a key this version does not know is refused, by name."""
        from ..nn.model import config_from_dict

        return config_from_dict(cls, data)


# Fields that may change between a run and its resume: how long to train, how often to look, and the
# attention kernel (the same function, computed another way).
RESUMABLE_FIELDS = (
    "train.minutes",
    "train.steps",
    "train.eval_interval",
    "train.log_interval",
    "train.checkpoint_minutes",
    "train.checkpoint_every_steps",
    "train.valid_sentences",
    "train.attention_kernel",
    "model.attention_kernel",
    "data.source",
)

# Levers deleted after they lost or tied on the development set (their code last existed in commit a224218): subword
# regularisation, a moving average of the weights, joined pairs. Each with the value that meant "off", so that a
# checkpoint written before still resumes when they were off in it (:func:`without_deleted_levers`).
DELETED_LEVERS = {"subword_alpha": None, "ema_decay": None, "concat_pairs": 0.0}


def without_deleted_levers(saved: dict, where: str = "the checkpoint") -> dict:
    """A saved run configuration (``{"train": {...}, ...}``) without the deleted levers' fields, when they were off.

    A run that had one switched on cannot be continued by this version: :class:`ConfigMismatchError` names it and
    the commit that still has its code.
    """
    train = dict(saved.get("train") or {})
    used = {k: train[k] for k in DELETED_LEVERS if k in train and train[k] != DELETED_LEVERS[k]}
    if used:
        raise ConfigMismatchError(
            f"The run in {where} was trained with {', '.join(f'{k}={v!r}' for k, v in used.items())}: a lever this "
            "version no longer has (deleted after it lost on the development set; its code last existed in commit "
            "a224218). Resume it with that commit's helpers, or start a fresh run in a new output folder."
        )
    for key in DELETED_LEVERS:
        train.pop(key, None)
    return {**saved, "train": train} if "train" in saved else saved


PRESETS: dict[str, TrainConfig] = {
    # 2 CPU cores, 15 minutes. The gain over a plain run comes from speed: bf16 matmuls where the CPU has bf16
    # instructions (about 2x fp32), the written-out attention (faster than the fused kernel for <= 64 tokens on
    # CPU), the softmax only at target positions, length-bucketed batches (<1 % padding). Then Muon with a high
    # peak learning rate, a short warm-up, a stable phase and a linear cool-down to 5 % (WSD), and no dropout:
    # 15 minutes is two to three passes over Tatoeba, too few to overfit. max_len 96 lets translate read sources
    # of up to 46 tokens whole (longer ones are translated in pieces, split at sentence ends or commas). Width 192
    # is the starting size; `train --preset cpu` sizes it for the machine (training/sizing.py): 15 minutes are too
    # short for width 256 to learn what it could. Measured in benchmarks/RESULTS.md.
    "cpu": TrainConfig(
        n_layer=4,
        n_head=4,
        d_model=192,
        d_ff=768,
        dropout=0.0,
        max_len=96,
        max_tokens=2048,  # 4096 -> 2048: twice the updates in 15 minutes, more tokens/s on CPU (RESULTS.md)
        # issue 28, chosen on the newer-sentence development set (two seeds each, RESULTS.md): Muon for the blocks'
        # matrices (+6.1 BLEU at 3,000 steps, 18 % fewer tokens/s on 2 bf16 cores), warm-up-stable-decay (+0.6),
        # ReLU^2 (+0.6) and 8,000 pieces instead of 4,000 (+1.95: fewer pieces per sentence, whole words for the
        # rarer ones), both at 3,000 steps; the last two together +2.0 at 15 minutes (29.75 against 27.74, beam 4)
        vocab_size=8000,
        activation="relu2",
        optimizer="muon",
        schedule="wsd",
        lr=2e-3,
        warmup_steps=150,
        min_lr_ratio=0.05,
        weight_decay=0.05,
        label_smoothing=0.1,
        eval_interval=500,
        checkpoint_minutes=3.0,
        precision="bf16_if_native",
        attention_kernel="auto",
    ),
    # a T4 for about an hour including data and evaluation
    "t4": TrainConfig(
        n_layer=6,
        n_head=8,
        d_model=512,
        d_ff=2048,
        dropout=0.1,
        max_len=96,
        vocab_size=8000,
        max_tokens=16384,
        activation="relu2",  # issue 28's CPU winners (ReLU^2, Muon, WSD), kept here too; T4 figures to be measured
        optimizer="muon",
        schedule="wsd",
        lr=1e-3,
        warmup_steps=1000,
        min_lr_ratio=0.05,
        weight_decay=0.1,
        label_smoothing=0.1,
        eval_interval=1000,
        checkpoint_minutes=5.0,
    ),
    # tests and quick mode: seconds on a laptop
    "tiny": TrainConfig(
        n_layer=2,
        n_head=2,
        d_model=32,
        d_ff=64,
        dropout=0.1,
        max_len=48,
        vocab_size=400,
        max_tokens=512,
        lr=3e-3,
        warmup_steps=10,
        min_lr_ratio=0.1,
        weight_decay=0.01,
        label_smoothing=0.1,
        eval_interval=50,
        valid_sentences=200,
        log_interval=10,
        checkpoint_minutes=1.0,
    ),
}


PRESETS["cpu-fixed"] = PRESETS["cpu"]  # the cpu preset's starting size, never re-sized (reproducible runs)

SIZED_PRESETS = ("cpu",)  # `train --preset cpu` sizes the model for the machine and budget: helpers.training.sizing
SHAPE_FIELDS = ("n_layer", "n_head", "d_model", "d_ff")  # an override of one of these means: fixed size


def preset_config(name: str, **overrides) -> TrainConfig:
    """A copy of ``PRESETS[name]`` with ``overrides`` applied; unknown names and fields are refused."""
    if name not in PRESETS:
        raise ValueError(
            f"Unknown preset {name!r}. Choose one of {sorted(PRESETS)} "
            "(cpu: 2 CPU cores, sized to the machine by train; cpu-fixed: the same without sizing; "
            "t4: about an hour on a T4; tiny: tests and quick mode)."
        )
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"Unknown TrainConfig fields {unknown}; known fields: {sorted(known)}.")
    return replace(PRESETS[name], **overrides)
