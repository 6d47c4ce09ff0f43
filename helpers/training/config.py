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

from ..nn.model import ROPE_BASE, ModelConfig, config_from_dict
from ..nn.variants import check_variant
from ..runtime import ConfigMismatchError

ATTENTION_KERNELS = ("auto", "sdpa", "explicit")
OPTIMIZERS = ("adamw", "muon")
SCHEDULES = ("cosine", "wsd")


@dataclass
class TrainConfig:
    # The defaults are the recipe notebooks 02 and 03 teach, at the `cpu` preset's size: the presets below change
    # sizes, budgets, the rates that go with them (peak learning rate, warm-up, weight decay, dropout) and the
    # machine's number formats. Each choice was measured on the newer-sentence
    # development set (benchmarks/RESULTS.md; notebook 05, section 9 shows the switches that lost).
    # model shape (helpers.nn.model.ModelConfig)
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 192  # 15 minutes on 2 CPU cores are too short for width 256 to learn what it could
    d_ff: int | None = None  # None -> 4 * d_model
    dropout: float = 0.0  # 15 minutes is two to three passes over Tatoeba, too few to overfit
    # notebook 02: q and k turned by their positions inside attention (+1.1 BLEU over learned positions over 15 minutes,
    # three seeds; +1.9 forced to fp32; the t4 preset trains learned ones, below); also "learned", "sinusoidal";
    # notebook 05: "alibi", "none"
    positional: str = "rotary"
    rotary_base: float = ROPE_BASE  # rotary only: RoPE's 10,000; 1,000 tied on the development set (RESULTS.md)
    attention: str = "dot"  # notebook 05: "synthesizer"
    bottleneck_dim: int | None = None  # notebook 05: m latents (a Perceiver-style model)
    activation: str = "relu2"  # ReLU squared (notebook 02; +0.6 BLEU over GELU at 3,000 steps), or "gelu" (GPT-2's)
    # notebook 05's levers from the GPT-2 speedrun that lost or tied here (helpers.nn.variants; RESULTS.md, issue 28)
    qk_norm: bool = False  # unit-RMS queries and keys
    zero_init: bool = False  # output projections start at zero
    tie_weights: bool = True  # False: an output head of its own instead of the token embedding matrix
    # tokens per sequence: <bos> French <sep> English <eos>; 96 lets translate read sources of up to 46 tokens whole
    # (longer ones are translated in pieces, split at sentence ends or commas)
    max_len: int = 96
    # "sdpa": F.scaled_dot_product_attention (fused kernels); "explicit": the softmax written out (notebook 02's
    # version); "auto": sdpa on a GPU, explicit on a CPU, where for sequences this short (<= 64 tokens) with a
    # prefix mask it is faster (1.3-1.4x in bf16, equal in fp32: benchmarks/bench_train.py). Same function.
    attention_kernel: str = "auto"
    # tokenizer
    vocab_size: int = 8000
    tokenizer_type: str = "unigram"
    # batches
    # tokens per batch, padding included: the knob to lower on out-of-memory. 2,048 on CPU gives twice the updates of
    # 4,096 in 15 minutes, and more tokens/s (RESULTS.md)
    max_tokens: int = 2048
    # a compiled step (issue 29): static batch shapes (StaticBucketBatcher: lengths padded up to multiples of
    # static_step, a fixed number of rows per length), each compiled once by torch.compile with compile_backend
    compile: bool = False
    compile_backend: str = "inductor"  # tests use "aot_eager": the same tracing, no C++ or GPU kernels to build
    static_step: int = 16
    # optimiser and schedule (notebook 03, section 3). Muon for the blocks' matrices, AdamW for embeddings, norms
    # and biases: +6.1 BLEU over AdamW alone at 3,000 steps, at 18 % fewer tokens/s on 2 cores; or "adamw" alone
    optimizer: str = "muon"
    lr: float = 2e-3  # Muon's updates are scaled to AdamW's size ("match_rms_adamw"), so one schedule serves both
    # Muon's rate as a multiple of lr (AdamW's: embeddings, head, norms, biases). 0.7 won on the development set:
    # +0.40 BLEU at 2,000 fixed steps (2 seeds), +0.71 over 15 minutes (3 seeds, each above its seed at 1.0)
    muon_lr_scale: float = 0.7
    warmup_steps: int = 150
    min_lr_ratio: float = 0.05  # the schedule ends at lr * min_lr_ratio
    # "wsd": warm-up, stable, then a straight line down over the last `cooldown` of the run (+0.6 BLEU over the
    # cosine at 3,000 steps); or "cosine": warm-up, then half a cosine down
    schedule: str = "wsd"
    cooldown: float = 0.45  # wsd only: the share of the run spent cooling down (the speedrun record's 0.45)
    weight_decay: float = 0.05
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
        if not self.muon_lr_scale > 0:
            raise ValueError(f"muon_lr_scale must be above 0, got {self.muon_lr_scale!r} (1.0: Muon at lr).")
        if not 0.0 < self.cooldown <= 1.0:
            raise ValueError(f"cooldown must be a share of the run in (0, 1], got {self.cooldown!r} (0.45 is typical).")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(
                f"label_smoothing must be in [0, 1), got {self.label_smoothing!r} (0.1 is typical, 0 turns it off)."
            )
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
        check_variant(self.model_config(self.vocab_size))  # a shape or variant that cannot work: refused now, not later
        if self.parallel_pairs is not None and (isinstance(self.parallel_pairs, bool) or self.parallel_pairs < 1):
            raise ValueError(
                f"parallel_pairs must be a positive number of pairs or None (all), got {self.parallel_pairs!r}."
            )

    def model_config(self, vocab_size: int, device: torch.device | str | None = None):
        """The model's configuration for a tokenizer of ``vocab_size`` pieces, its kernel chosen for ``device``."""
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
            rotary_base=self.rotary_base,
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
        return config_from_dict(cls, data)


# Fields that may change between a run and its resume: how long to train, how often to look, the attention kernel
# (the same function, computed another way), and train.d_ff, whose None means 4 * d_model: the model's own d_ff,
# always a number, is compared instead (the presets spelled 768 and 2048 before their defaults became None).
RESUMABLE_FIELDS = (
    "train.d_ff",
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

# Levers deleted after they lost or tied on the development set: subword regularisation, a moving average of the
# weights, joined pairs, the 1 - sqrt(progress) cool-down, made-up names. Each with the value a run had when it did not
# use it (so that a checkpoint written before still resumes then: :func:`without_deleted_levers`) and a commit that
# still has its code.
DELETED_LEVERS = {
    "subword_alpha": (None, "a224218"),
    "ema_decay": (None, "a224218"),
    "concat_pairs": (0.0, "a224218"),
    "cooldown_shape": ("linear", "6ee5a87"),  # "sqrt" tied the straight line (RESULTS.md, issue 51, item 3)
    "name_swap": (0.0, "4eb61fb"),  # made-up names in place of shared ones lost (RESULTS.md, issue 51, ninth session)
}


def without_deleted_levers(saved: dict, where: str = "the checkpoint") -> dict:
    """A saved run configuration (``{"train": {...}, ...}``) without the deleted levers' fields, when they were off.

    A run that used one cannot be continued by this version: :class:`ConfigMismatchError` names it and the commit
    that still has its code.
    """
    train = dict(saved.get("train") or {})
    used = {k: train[k] for k, (off, _) in DELETED_LEVERS.items() if k in train and train[k] != off}
    if used:
        commits = sorted({DELETED_LEVERS[k][1] for k in used})
        raise ConfigMismatchError(
            f"The run in {where} was trained with {', '.join(f'{k}={v!r}' for k, v in used.items())}, which this "
            "version no longer has (deleted after losing or tying on the development set; the code is in commit "
            f"{' and '.join(commits)}). Resume it with that commit's helpers, or start a fresh run in a new output "
            "folder."
        )
    for key in DELETED_LEVERS:
        train.pop(key, None)
    return {**saved, "train": train} if "train" in saved else saved


# Fields added after checkpoints were written, each with the value that does what runs did before it existed, so
# that such a checkpoint still resumes when its run is continued with that value (:func:`with_added_fields`).
ADDED_FIELDS = {
    "train": {"muon_lr_scale": 1.0, "rotary_base": ROPE_BASE},
    "model": {"rotary_base": ROPE_BASE},  # RoPE's base, fixed in the code before the field
}


def with_added_fields(saved: dict) -> dict:
    """A saved run configuration with each field of :data:`ADDED_FIELDS` it lacks set to the value its run used."""
    return {**saved, **{part: {**added, **saved[part]} for part, added in ADDED_FIELDS.items() if part in saved}}


PRESETS: dict[str, TrainConfig] = {
    # 2 CPU cores, 15 minutes: the defaults. The gain over a plain run comes from speed: bf16 matmuls where the CPU
    # has bf16 instructions (about 2x fp32), the written-out attention (faster than the fused kernel for <= 64 tokens
    # on CPU), the softmax only at target positions, length-bucketed batches (<1 % padding); then the recipe of the
    # defaults (Muon, warm-up-stable-decay, ReLU², no dropout). Width 192 is the starting size; `train --preset
    # cpu` sizes it for the machine (training/sizing.py). Measured in benchmarks/RESULTS.md.
    "cpu": TrainConfig(checkpoint_minutes=3.0, precision="bf16_if_native"),
    # a T4 for about an hour including data and evaluation: wider and deeper, eight times the tokens per batch, a
    # lower peak learning rate, a longer warm-up, more weight decay and dropout (several passes over the data); T4
    # figures to be measured. Learned positions: on an H100 in fp16 this preset scored 2.9 BLEU lower with rotary
    # ones at 1,500 fixed steps (benchmarks/RESULTS.md, twelfth session), where the cpu preset gains with them
    "t4": TrainConfig(
        positional="learned",
        n_layer=6,
        n_head=8,
        d_model=512,
        dropout=0.1,
        max_tokens=16384,
        lr=1e-3,
        warmup_steps=1000,
        weight_decay=0.1,
        eval_interval=1000,
    ),
    # tests and quick mode: seconds on a laptop; the same recipe, every code path of a full run
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
        weight_decay=0.01,
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
