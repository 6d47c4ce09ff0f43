"""The decoder-only Transformer that notebook 02 builds cell by cell; later notebooks import it from here.

Translation is one sequence, ``<bos> French <sep> English <eos>``. A prefix-LM mask lets every
position see the whole source (``<bos> French <sep>``, bidirectionally) while target positions
attend causally, so one stack of blocks does the work of an encoder and a decoder.

Read top to bottom: config, mask, attention, feed-forward, block, model. Generation (greedy, beam search)
is in :mod:`helpers.nn.generate`; ``DecoderOnlyTransformer.generate`` calls it. This is the model every preset trains;
notebook 05's research variants are built on top of it in :mod:`helpers.nn.variants`, and
``helpers.nn.build_model(config)`` builds either from one :class:`ModelConfig`.
Shapes in comments: B batch, T time (sequence length), C = d_model, nh heads, hs = C // nh.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import generate as decoding

POSITIONAL_KINDS = ("learned", "sinusoidal", "rotary", "alibi", "none")  # the last two: notebook 05
ATTENTION_KERNELS = ("sdpa", "explicit")  # the same attention, computed by a fused kernel or written out
ATTENTION_KINDS = ("dot", "synthesizer")  # scaled dot product (notebook 02); synthesizer (notebook 05)
ACTIVATIONS = ("relu2", "gelu")  # the feed-forward's non-linearity: ReLU squared (notebook 02); GELU (GPT-2's)
ROPE_BASE = 10000.0  # rotary positions: pair i of a head of hs turns ROPE_BASE^(-2i/hs) radians a position (Su et al.)


@dataclass
class ModelConfig:
    vocab_size: int
    max_len: int
    n_layer: int
    n_head: int
    d_model: int
    d_ff: int | None = None  # None -> 4 * d_model, as in GPT-2 and "Attention Is All You Need"
    dropout: float = 0.0
    # "learned" | "sinusoidal": added to the tokens; "rotary": q and k turned inside attention (notebook 02, the
    # recipe's default); notebook 05: "alibi" (a penalty on the scores) | "none"
    positional: str = "learned"
    rotary_base: float = ROPE_BASE  # rotary only: pair i turns base^(-2i/hs) radians per position
    # "sdpa": F.scaled_dot_product_attention (fused kernels, the fast choice on a GPU); "explicit": the
    # softmax written out as in notebook 02 (faster on a CPU for short sequences)
    attention_kernel: str = "sdpa"
    tie_weights: bool = True  # the LM head reuses the token embedding matrix
    # notebook 05's variants, built by helpers.nn.build_model (a configuration names them; it imports nothing):
    # how scores are made, and an optional latent bottleneck
    attention: str = "dot"  # "dot" | "synthesizer"
    bottleneck_dim: int | None = None  # m latents between a down and an up cross-attention; None = plain model
    activation: str = "relu2"  # the feed-forward's non-linearity: ReLU squared (notebook 02), or "gelu" (GPT-2's)
    # notebook 05: the GPT-2 speedrun's levers that lost here: unit-RMS q and k, zero-initialised projections
    qk_norm: bool = False
    zero_init: bool = False

    def __post_init__(self):
        for name in ("vocab_size", "max_len", "n_layer", "n_head", "d_model"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ModelConfig.{name} must be a positive whole number, got {value!r}.")
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        if isinstance(self.d_ff, bool) or not isinstance(self.d_ff, int) or self.d_ff < 1:
            raise ValueError(
                f"ModelConfig.d_ff must be a positive whole number or None (meaning 4 * d_model), got {self.d_ff!r}."
            )
        if self.d_model % self.n_head:
            valid = [h for h in range(1, self.d_model + 1) if self.d_model % h == 0]
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_head={self.n_head}: each head gets d_model / n_head "
                f"dimensions. Choose n_head from {valid}, or change d_model to a multiple of {self.n_head}."
            )
        if not (isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0):
            raise ValueError(
                f"ModelConfig.dropout must be in [0, 1), got {self.dropout!r}; use 0.0 to switch dropout off."
            )
        if self.positional not in POSITIONAL_KINDS:
            raise ValueError(f"positional={self.positional!r} is not known: choose one of {POSITIONAL_KINDS}.")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(
                f"sinusoidal positions pair a sine with a cosine, so d_model must be even (got {self.d_model}): "
                f"use d_model={self.d_model + 1} or positional='learned'."
            )
        if self.positional == "rotary" and self.head_dim % 2:
            raise ValueError(
                f"rotary positions turn pairs of channels, so d_model / n_head must be even (got {self.head_dim}): "
                "change d_model or n_head."
            )
        base = self.rotary_base
        if isinstance(base, bool) or not (isinstance(base, (int, float)) and 1 < base < math.inf):
            raise ValueError(
                f"rotary_base must be a finite number above 1, got {base!r}: pair i turns base^(-2i/hs) radians per "
                "position, so at 1 or below no pair turns slower than the first, and at infinity only the first "
                "turns. RoPE's is 10000."
            )
        if self.attention_kernel not in ATTENTION_KERNELS:
            raise ValueError(
                f"attention_kernel={self.attention_kernel!r} is not known: choose one of {ATTENTION_KERNELS}."
            )
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention={self.attention!r} is not known: choose one of {ATTENTION_KINDS}.")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r} is not known: choose one of {ACTIVATIONS}.")
        # how notebook 05's fields combine is checked where the variants are built: helpers.nn.variants.check_variant

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def variant_fields(self) -> dict:
        """The fields set to one of notebook 05's variants, ``{name: value}``; empty for the model of notebook 02."""
        plain = {"attention": "dot", "bottleneck_dim": None, "qk_norm": False, "zero_init": False}
        named = {k: getattr(self, k) for k, v in plain.items() if getattr(self, k) != v}
        if self.positional in ("alibi", "none"):  # a penalty on the scores, or no positions at all
            named["positional"] = self.positional
        return named

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        return config_from_dict(cls, data)


def config_from_dict(cls, data: dict):
    """``cls(**data)`` for a configuration dataclass, refusing keys it does not know, by name (none is dropped)."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(
            f"unknown {cls.__name__} fields {unknown}: the configuration was written by another version of helpers, "
            f"or has a typo; known fields are {sorted(known)}. Remove the extra keys or upgrade the package."
        )
    return cls(**data)


def num_parameters(config: ModelConfig) -> int:
    """Closed-form parameter count of notebook 02's model; equals ``sum(p.numel() for p in model.parameters())``.

    A variant's count (notebook 05) is :func:`helpers.nn.variants.num_parameters`, which takes any configuration.
    """
    if config.variant_fields():
        raise ValueError(
            f"{config.variant_fields()} is a variant of notebook 02's model, which this formula counts: use "
            "helpers.nn.variants.num_parameters(config), the count of what helpers.nn.build_model(config) builds."
        )
    return sum(parameter_counts(config).values())


def parameter_counts(config: ModelConfig, attention: int | None = None) -> dict[str, int]:
    """The parameters of each part of notebook 02's model: embedding, positions, blocks, final norm, head.

    ``attention``: the parameters of one attention layer, when a variant replaces notebook 02's (q, k, v and the
    output projection, with biases)."""
    V, C, F_, L = config.vocab_size, config.d_model, config.d_ff, config.n_layer
    if attention is None:
        attention = (C * 3 * C + 3 * C) + (C * C + C)  # q/k/v + output projection, with biases
    feed_forward = (C * F_ + F_) + (F_ * C + C)
    layer_norms = 2 * (2 * C)  # two LayerNorms per block, each a scale and a shift
    return {
        "embedding": V * C,
        "positions": config.max_len * C if config.positional == "learned" else 0,  # the others are fixed or none
        "blocks": L * (attention + feed_forward + layer_norms),
        "final_norm": 2 * C,
        "head": 0 if config.tie_weights else V * C,  # a tied head shares the embedding matrix
    }


def sinusoidal_table(max_len: int, d_model: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(max_len, d_model): even columns sin(pos / 10000^(2i/d)), odd columns the matching cos (Vaswani et al.).

    Each pair of columns is a clock turning at its own speed. The model uses float32; notebook 01 asks for
    float64 to check identities to 1e-12.
    """
    if max_len < 1 or d_model < 2 or d_model % 2:
        raise ValueError(
            f"need max_len >= 1 and an even d_model >= 2 (one sin and one cos per frequency), got {max_len}, {d_model}."
        )
    pos = torch.arange(max_len, dtype=dtype)[:, None]  # (T, 1)
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=dtype) * (-math.log(10000.0) / d_model))  # (d/2,)
    table = torch.zeros(max_len, d_model, dtype=dtype)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table


def rotary(x: torch.Tensor, positions: torch.Tensor, base: float = ROPE_BASE) -> torch.Tensor:
    """Rotary positions (RoPE, Su et al. 2021): turn each pair of channels (2i, 2i+1) of ``x`` (B, nh, T, hs)
    counter-clockwise by ``position * base^(-2i/hs)``, the speeds of :func:`sinusoidal_table` for a table hs wide.

    positions: (T,) or (B, T). Queries and keys both turned, each by its own position, make q . k depend on the
    distance alone (notebook 05's Question 5.4). Computed in float32 at least: in bf16 an angle near 90 radians
    would be up to a quarter radian off (float64 stays float64, for notebook 02's exact comparisons).
    """
    hs = x.size(-1)
    dtype = torch.promote_types(x.dtype, torch.float32)
    inv_freq = base ** (-torch.arange(0, hs, 2, device=x.device, dtype=dtype) / hs)  # (hs/2,)
    pos = positions if positions.dim() == 2 else positions[None]  # (B or 1, T)
    angle = pos.to(dtype)[..., None] * inv_freq  # (B, T, hs/2)
    cos, sin = angle.cos()[:, None], angle.sin()[:, None]  # (B, 1, T, hs/2): the same for every head
    x1, x2 = x.to(dtype)[..., 0::2], x.to(dtype)[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)  # pairs back in place
    return out.type_as(x)


def _check_prefix_len(prefix_len, T: int, batch: int | None = None) -> torch.Tensor:
    if not isinstance(prefix_len, torch.Tensor):
        raise TypeError(
            f"prefix_len must be a LongTensor of shape (B,), one source length per row; got {type(prefix_len).__name__}. "
            "Use torch.tensor(lengths) or torch.full((B,), n)."
        )
    if prefix_len.dtype.is_floating_point or prefix_len.dtype == torch.bool or prefix_len.is_complex():
        raise TypeError(f"prefix_len must hold whole numbers (torch.long), got {prefix_len.dtype}: prefix_len.long()")
    if prefix_len.dim() != 1 or (batch is not None and prefix_len.shape[0] != batch):
        want = f"({batch},)" if batch is not None else "(B,)"
        raise ValueError(
            f"prefix_len must have shape {want}, one prefix length per row of input_ids; got {tuple(prefix_len.shape)}. "
            "Flatten it with prefix_len.view(-1) or give one length per sentence."
        )
    checked = prefix_len.numel() and not torch.compiler.is_compiling()  # compiled: no syncs, no graph breaks
    if checked and (int(prefix_len.min()) < 1 or int(prefix_len.max()) > T):
        raise ValueError(
            f"prefix_len values must lie in [1, {T}] (the sequence length), got min {int(prefix_len.min())}, "
            f"max {int(prefix_len.max())}: the prefix is <bos> French <sep>, so count those tokens, and pass the "
            "full sequence, not just the target."
        )
    return prefix_len


def build_attention_mask(T: int, prefix_len: torch.Tensor | None = None, device=None) -> torch.Tensor:
    """Boolean mask, True = query i may attend to key j. (1, 1, T, T) causal, or (B, 1, T, T) prefix-LM.

    With ``prefix_len``, row b's first ``prefix_len[b]`` positions (``<bos> French <sep>``) see each other
    in both directions; later positions see the whole prefix and, causally, earlier target positions.
    Every query sees at least itself, so no softmax row is empty (an empty row would be NaN).
    """
    idx = torch.arange(T, device=device)
    causal = idx[None, :] <= idx[:, None]  # (T, T): key j no later than query i
    if prefix_len is None:
        return causal[None, None]  # (1, 1, T, T)
    prefix_len = _check_prefix_len(prefix_len, T).to(idx.device)
    key_in_prefix = idx[None, :] < prefix_len[:, None]  # (B, T): key j is a source position of row b
    return (causal[None] | key_in_prefix[:, None, :])[:, None]  # (B, 1, T, T)


class LayerCache:
    """Keys and values of earlier positions for one layer, so generation computes each token once."""

    def __init__(self):
        self.k: torch.Tensor | None = None  # (B, nh, S, hs)
        self.v: torch.Tensor | None = None
        self.pos: torch.Tensor | None = None  # (B, S) positions of the cached keys (ALiBi's distances need them)

    def extend(self, k, v, positions, mask):
        """Append this step's keys, values and positions; return all of them: (B, nh, S, hs) twice and (B, S)."""
        B, _, T, _ = k.shape
        pos = torch.arange(T, device=k.device) if positions is None else positions
        pos = pos.expand(B, T) if pos.dim() == 1 else pos  # (B, T)
        if self.k is not None:
            if mask is None:
                raise ValueError(
                    "a cached attention step needs an explicit mask (the causal default assumes no cache)."
                )
            k, v, pos = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2), torch.cat([self.pos, pos], dim=1)
        self.k, self.v, self.pos = k, v, pos
        return k, v, pos

    def reorder(self, index: torch.Tensor) -> None:
        # beams and finished sentences change which rows continue
        self.k, self.v, self.pos = (t.index_select(0, index) for t in (self.k, self.v, self.pos))


def scaled_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q k^T / sqrt(hs): (B, nh, Tq, Tk)."""
    return (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))


def explicit_attention(q, k, v, mask, dropout_p: float = 0.0):
    """softmax(q k^T / sqrt(hs)) v written out, as in notebook 02: (B, nh, T, hs), and the weights (B, nh, T, S).

    mask: bool (True = may read), or a float mask added to the scores (ALiBi's), or None for causal."""
    att = scaled_scores(q, k)  # (B, nh, T, S)
    mask = build_attention_mask(q.size(-2), device=q.device) if mask is None else mask
    # before the softmax, so each row still sums to 1
    att = att + mask if mask.is_floating_point() else att.masked_fill(~mask, float("-inf"))
    weights = F.softmax(att, dim=-1)  # over keys
    return F.dropout(weights, dropout_p) @ v, weights


def fused_attention(q, k, v, mask, dropout_p: float = 0.0):
    """The same function by F.scaled_dot_product_attention's fused kernels (flash, memory-efficient); no weights.
    mask None: causal, which lets the kernel skip the masked half."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=mask is None), None


def turn_qk(q, k, positions, cache: LayerCache | None, base: float = ROPE_BASE):
    """Rotary positions inside attention: q and k turned by their positions (:func:`rotary`); None means 0..T-1."""
    if positions is None:  # right for a first step only
        if cache is not None and cache.k is not None:
            raise ValueError(
                "a cached step after the first needs the new tokens' positions (positions=...): rotary positions "
                "turn q and k by them, and 0, 1, ... would be the first tokens' turns"
            )
        positions = torch.arange(q.size(-2), device=q.device)
    return rotary(q, positions, base), rotary(k, positions, base)


def keep_qk(q, k, positions, cache):
    """Learned or sinusoidal positions: already added to the tokens, so q and k pass as they are."""
    return q, k


class SelfAttention(nn.Module):
    """Multi-head self-attention: project to q, k, v, split into heads, attend, merge the heads, project.

    Notebook 02's layer always keeps its last weights, for plots; this one keeps them in ``last_weights``
    (B, nh, T, S) only when asked (``keep_weights = True``, as ``attention_maps`` does), since the fused kernel
    computes none."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_head, self.d_model, self.dropout = config.n_head, config.d_model, config.dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)  # one matmul for q, k, v of every head
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.resid_drop = nn.Dropout(config.dropout)
        self.kernel = config.attention_kernel  # "sdpa" or "explicit": the same function, computed two ways
        # rotary positions enter here, chosen once: learned and sinusoidal ones were added to the tokens
        self.turn = partial(turn_qk, base=config.rotary_base) if config.positional == "rotary" else keep_qk
        self.keep_weights, self.last_weights = False, None

    def project_qkv(self, x):
        """(B, T, C) -> q, k, v, each (B, nh, T, hs)."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        return tuple(t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))

    def attend(self, q, k, v, mask):
        """(B, nh, T, hs) by the layer's kernel; by the written-out softmax when the weights are kept."""
        written_out = self.keep_weights or self.kernel == "explicit"
        dropout = self.dropout * self.training  # no dropout in eval
        y, weights = (explicit_attention if written_out else fused_attention)(q, k, v, mask, dropout)
        if self.keep_weights:
            self.last_weights = weights  # (B, nh, T, S)
        return y

    def project_out(self, y):
        """(B, nh, T, hs) -> (B, T, C): the heads side by side again, head 0 first, then the output projection."""
        B, nh, T, hs = y.shape
        return self.resid_drop(self.proj(y.transpose(1, 2).contiguous().view(B, T, nh * hs)))

    def forward(self, x, mask=None, cache: LayerCache | None = None, positions=None):
        """mask: bool, broadcastable to (B, nh, T, S); None means causal. positions: (T,) or (B, T), what the
        cache records (default 0..T-1). Returns (B, T, C)."""
        q, k, v = self.project_qkv(x)  # (B, nh, T, hs) each
        q, k = self.turn(q, k, positions, cache)  # rotary: by their own positions, before the cache
        if cache is not None:  # earlier positions' keys and values come from the cache
            k, v, _ = cache.extend(k, v, positions, mask)  # (B, nh, S, hs)
        return self.project_out(self.attend(q, k, v, mask))


FP16_MAX = torch.finfo(torch.float16).max  # 65,504: the square of anything above 255.9 overflows in fp16


def relu2(x: torch.Tensor) -> torch.Tensor:
    """ReLU squared (So et al., Primer 2021; the GPT-2 speedrun's MLP): sparse like ReLU, without ReLU's kink at 0.

    In fp16 (a T4's autocast) the square is taken in fp32 and capped at fp16's largest value before rounding back:
    a pre-activation above 256 would otherwise square to inf, and one inf makes the loss NaN. Below the cap the
    result is the same as fp16's own square (both round the exact square once); fp32 and bf16 (fp32's range) are
    computed exactly as before.
    """
    if x.dtype == torch.float16:
        return F.relu(x).float().square().clamp_(max=FP16_MAX).half()
    return F.relu(x).square()


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.d_ff)
        self.proj = nn.Linear(config.d_ff, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.act = relu2 if config.activation == "relu2" else F.gelu  # max(z, 0)^2, or GPT-2's z Phi(z)

    def forward(self, x):
        return self.drop(self.proj(self.act(self.fc(x))))  # same MLP at every position


class Block(nn.Module):
    """Pre-LayerNorm residual block: normalise, transform, add back; the residual path stays clean.

    ``attention``: the attention layer's class (notebook 05's variants pass their own)."""

    def __init__(self, config: ModelConfig, attention: type[nn.Module] = SelfAttention):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model)
        self.attn = attention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)

    def forward(self, x, mask=None, cache: LayerCache | None = None, positions=None):
        x = x + self.attn(self.ln1(x), mask, cache, positions)  # (B, T, C)
        return x + self.ffn(self.ln2(x))


class DecoderOnlyTransformer(nn.Module):
    """Notebook 02's model. Notebook 05's variants are built on it (:mod:`helpers.nn.variants`), by
    ``helpers.nn.build_model(config)``, which builds this class for a configuration that names none."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(
                f"DecoderOnlyTransformer needs a ModelConfig, got {type(config).__name__}: use ModelConfig(...) or ModelConfig.from_dict(d)."
            )
        self.check_config(config)
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.emb_scale = 1.0
        if config.positional == "learned":
            self.pos_emb = nn.Embedding(config.max_len, config.d_model)
        elif config.positional == "sinusoidal":  # a fixed table, not a parameter; rebuilt from the config, not saved
            self.register_buffer("pos_table", sinusoidal_table(config.max_len, config.d_model), persistent=False)
            # as in Vaswani et al.: scale tokens up so the unit-size sin/cos do not drown them
            self.emb_scale = math.sqrt(config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = self.make_blocks(config)
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight  # one matrix reads tokens in and scores them out
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2: keep the residual stream's variance flat with depth
            if name.endswith(("attn.proj.weight", "ffn.proj.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def check_config(self, config: ModelConfig) -> None:
        """Notebook 02's model has none of notebook 05's variant fields: those models are built on this one."""
        if config.variant_fields():
            raise ValueError(
                f"{config.variant_fields()} names a research variant (notebook 05), which DecoderOnlyTransformer does "
                "not build: use helpers.nn.build_model(config), which builds the plain model or the variant a "
                "configuration names."
            )

    def make_blocks(self, config: ModelConfig) -> nn.ModuleList:
        """The stack of ``n_layer`` blocks."""
        return nn.ModuleList(Block(config) for _ in range(config.n_layer))

    def run_blocks(self, x, mask, prefix_len):
        """(B, T, C) through the stack. ``prefix_len`` is for a stack that builds its own masks (notebook 05's)."""
        for block in self.blocks:
            x = block(x, mask)
        return x

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    # -- input checks: clear messages instead of an index error deep inside an embedding --
    def _check_ids(self, input_ids) -> None:
        if not isinstance(input_ids, torch.Tensor):
            raise TypeError(
                f"input_ids must be a torch.LongTensor of shape (B, T), got {type(input_ids).__name__}: use torch.tensor(ids)."
            )
        if input_ids.dtype.is_floating_point or input_ids.dtype == torch.bool or input_ids.is_complex():
            raise TypeError(
                f"input_ids must be integer token ids (torch.long), got {input_ids.dtype}: convert with input_ids.long()."
            )
        if input_ids.dim() != 2:
            raise ValueError(
                f"input_ids must have shape (B, T), got {tuple(input_ids.shape)}: "
                "add a batch dimension with input_ids.unsqueeze(0) for a single sentence."
            )
        B, T = input_ids.shape
        if T == 0:
            raise ValueError("input_ids has no positions (T = 0): every sequence starts with at least <bos>.")
        if T > self.config.max_len:
            raise ValueError(
                f"sequence length {T} exceeds max_len={self.config.max_len}: truncate or filter long sentences, "
                "or build the model with a larger max_len."
            )
        if input_ids.numel() and not torch.compiler.is_compiling():  # value checks sync: eager mode only
            lo, hi = int(input_ids.min()), int(input_ids.max())
            if lo < 0 or hi >= self.config.vocab_size:
                raise ValueError(
                    f"token ids must lie in [0, {self.config.vocab_size - 1}] (vocab_size={self.config.vocab_size}), "
                    f"got min {lo}, max {hi}: the tokenizer and ModelConfig.vocab_size disagree; build the config "
                    "with the tokenizer's vocabulary size."
                )

    def embed(self, input_ids, positions) -> torch.Tensor:
        """Token embedding plus position, (B, T, C). positions: (T,) or (B, T) LongTensor."""
        tok = self.tok_emb(input_ids) * self.emb_scale
        if self.config.positional == "learned":
            tok = tok + self.pos_emb(positions)  # pos broadcasts over the batch when it is (T,)
        elif self.config.positional == "sinusoidal":
            tok = tok + self.pos_table[positions]
        return self.drop(tok)  # (B, T, C)

    def forward(
        self, input_ids: torch.Tensor, prefix_len: torch.Tensor | None = None, logits_at: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits (B, T, vocab). prefix_len (B,): the source length per row; None = plain causal LM.

        logits_at (B, T) bool: the positions to score, e.g. ``labels != -100`` in training. The final norm and the
        output layer then run there alone and the logits are (N, vocab), N = logits_at.sum(), row by row. The loss
        reads only the target positions, so the French half's C x vocab products would be wasted: at width 192
        and 8,000 pieces about a quarter of a training step's multiplies.
        """
        self._check_ids(input_ids)
        B, T = input_ids.shape
        mask = None  # None lets scaled_dot_product_attention use its fused causal kernel
        if prefix_len is not None:
            _check_prefix_len(prefix_len, T, batch=B)
            mask = build_attention_mask(T, prefix_len, device=input_ids.device)  # (B, 1, T, T)
        x = self.embed(input_ids, torch.arange(T, device=input_ids.device))
        x = self.run_blocks(x, mask, prefix_len)  # (B, T, C)
        if logits_at is not None:
            x = x[self._check_logits_at(logits_at, B, T)]  # (N, C): the positions the loss reads
        return self.lm_head(self.ln_f(x))  # (B, T, vocab), or (N, vocab)

    @staticmethod
    def _check_logits_at(logits_at, B: int, T: int) -> torch.Tensor:
        if not isinstance(logits_at, torch.Tensor) or logits_at.dtype != torch.bool or logits_at.shape != (B, T):
            got = (
                f"{tuple(logits_at.shape)} {logits_at.dtype}"
                if isinstance(logits_at, torch.Tensor)
                else type(logits_at).__name__
            )
            raise ValueError(
                f"logits_at must be a bool tensor of shape {(B, T)}, like input_ids, True where a logit is wanted; "
                f"got {got}. In training pass labels != -100."
            )
        return logits_at

    @property
    def supports_cache(self) -> bool:
        """Whether generation can keep a key/value cache (notebook 05's synthesizer and bottleneck cannot)."""
        return True

    @torch.no_grad()
    def attention_maps(self, input_ids: torch.Tensor, prefix_len: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Attention weights per layer, each (B, n_head, T, T), computed with an explicit softmax."""
        self._check_ids(input_ids)
        B, T = input_ids.shape
        if prefix_len is not None:
            _check_prefix_len(prefix_len, T, batch=B)
        mask = build_attention_mask(T, prefix_len, device=input_ids.device)
        x = self.embed(input_ids, torch.arange(T, device=input_ids.device))
        maps = []
        try:
            for block in self.blocks:  # each layer asked to keep its weights, as notebook 02's always does
                block.attn.keep_weights = True
                x = block(x, mask)  # (positions default to 0..T-1)
                maps.append(block.attn.last_weights.detach())
        finally:
            for block in self.blocks:  # asked once: nothing stays held on the layers
                block.attn.keep_weights, block.attn.last_weights = False, None
        return maps

    # -- generation: helpers.nn.generate --------------------------------------------------------------
    def new_cache(self) -> list[LayerCache]:
        """One empty :class:`LayerCache` per block: what cached generation fills, one position at a time."""
        return [LayerCache() for _ in self.blocks]

    def generate(
        self,
        prefixes: list[list[int]],
        max_new_tokens: int | list[int],
        eos_id: int,
        beams: int = 1,
        use_cache: bool = True,
        length_penalty: float = 1.0,
    ) -> list[list[int]]:
        """The new tokens after each prefix (``<bos> French <sep>`` ids), up to ``eos_id``, without it: greedy with
        ``beams=1``, else beam search's best. See :func:`helpers.nn.generate.generate` (and its ``beam_search``)."""
        return decoding.generate(self, prefixes, max_new_tokens, eos_id, beams, use_cache, length_penalty)
