"""The research variants of notebook 05, built on notebook 02's model (:mod:`helpers.nn.model`).

Each is a switch on :class:`helpers.nn.model.ModelConfig`, and :func:`build_model` builds what a configuration
names: notebook 02's :class:`~helpers.nn.model.DecoderOnlyTransformer` when it names no variant, else
:class:`VariantTransformer` (its blocks' attention replaced) or :class:`BottleneckTransformer` (its blocks moved
between latents). The model imports nothing from here: the variants stand on it.

* rotary positions (``positional="rotary"``, :func:`helpers.nn.model.rotary`) are notebook 02's, in its model;
  a variant's attention turns q and k the same way (after QK-norm, when both are on).
* ``positional="alibi"`` (Press et al. 2022): no position vector either; each head subtracts
  ``slope * |i - j|`` from its scores, a penalty that grows with the distance.
* ``positional="none"``: nothing (what attention then makes of order is notebook 05's Question 5.7).
* ``attention="synthesizer"`` (Tay et al. 2021, the CS224N version): the scores of query i come from x_i
  alone, one score per *absolute* key position: ``softmax(ReLU(x A + b1) B + b2)``, then ``@ (x V)``.
* ``bottleneck_dim=m`` (a Perceiver-style model, Jaegle et al. 2021): cross-attention from the T inputs down
  to m learned latents, the middle layers on the latents, cross-attention back up to T positions.

The masks of every variant follow one rule (:func:`read_mask`): each vector carries the last input position
it may have read (its *horizon*); a query may read a key only if everything the key has read is visible to
the query. With inputs only (horizon = own position) this is exactly the prefix-LM mask of
:func:`helpers.nn.model.build_attention_mask`; the bottleneck applies it to latents as well.
Shapes: B batch, T time, C = d_model, nh heads, hs = C // nh, m latents, L = max_len.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .model import (
    ROPE_BASE,
    Block,
    DecoderOnlyTransformer,
    FeedForward,
    LayerCache,
    ModelConfig,
    SelfAttention,
    parameter_counts,
    scaled_scores,
    turn_qk,
)

# --- positions inside attention -----------------------------------------------------------------------


def alibi_slopes(n_head: int) -> torch.Tensor:
    """(nh,): one slope per head, as the ALiBi paper (Press et al. 2022) sets them: some heads look far, some near."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / n_head) for h in range(n_head)])


def alibi_bias(slopes: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """(B or 1, nh, Tq, Tk): ``-slope * |i - j|``."""
    q = q_pos if q_pos.dim() == 2 else q_pos[None]
    k = k_pos if k_pos.dim() == 2 else k_pos[None]
    dist = (q[:, :, None] - k[:, None, :]).abs().float()  # (B, Tq, Tk)
    return -slopes.to(dist.device)[None, :, None, None] * dist[:, None]


class QKNorm(nn.Module):
    """Unit-RMS queries and keys (:func:`rms`): every score bounded by sqrt(hs)."""

    def forward(self, q, k, positions):
        return rms(q), rms(k)


class Rotary(nn.Module):
    """Queries and keys turned by their positions (:func:`helpers.nn.model.rotary`, as notebook 02's attention
    turns them); positions None: 0..T-1."""

    def __init__(self, base: float = ROPE_BASE):
        super().__init__()
        self.base = base

    def forward(self, q, k, positions):
        return turn_qk(q, k, positions, None, self.base)


class QueryKeySteps(nn.ModuleList):
    """What acts on queries and keys before the scores, in order; none in notebook 02's model."""

    def forward(self, q, k, positions):
        for step in self:
            q, k = step(q, k, positions)
        return q, k


def query_key_steps(config) -> QueryKeySteps:
    """QK-norm first (it would undo nothing of a rotation, but keeps the order the runs were made with), then rotary."""
    return QueryKeySteps([QKNorm()] * config.qk_norm + [Rotary(config.rotary_base)] * (config.positional == "rotary"))


class MaskAsIs(nn.Module):
    """Notebook 02's scores: no bias, the mask unchanged."""

    def forward(self, mask, q_pos, k_pos, q):
        return mask


class ALiBi(nn.Module):
    """The mask as an additive float mask carrying ``-slope * |i - j|`` per head (-inf where the mask forbids)."""

    def __init__(self, n_head: int):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_head), persistent=False)

    def forward(self, mask, q_pos, k_pos, q):
        T = q.size(-2)
        q_pos = torch.arange(T, device=q.device) if q_pos is None else q_pos
        k_pos = q_pos if k_pos is None else k_pos
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()[None, None] if mask is None else mask
        bias = alibi_bias(self.slopes, q_pos, k_pos).to(q.dtype)  # (B or 1, nh, T, S)
        return bias.masked_fill(~mask, float("-inf"))


def score_bias(config) -> nn.Module:
    """ALiBi for ``positional="alibi"``, else the mask as it is."""
    return ALiBi(config.n_head) if config.positional == "alibi" else MaskAsIs()


class VariantAttention(SelfAttention):
    """Notebook 02's attention with notebook 05's steps: QK-norm (then notebook 02's rotation, if the configuration
    turns q and k) acts on q and k, ALiBi on the scores."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.rotate = query_key_steps(config)
        self.score_bias = score_bias(config)

    def forward(self, x, mask=None, cache: LayerCache | None = None, positions=None):
        """As notebook 02's; positions (T,) or (B, T) also place rotary and ALiBi (default 0..T-1)."""
        q, k, v = self.project_qkv(x)  # (B, nh, T, hs) each
        q, k = self.rotate(q, k, positions)  # rotary positions, if any, before the cache
        k_pos = positions
        if cache is not None:  # earlier positions' keys and values come from the cache
            k, v, k_pos = cache.extend(k, v, positions, mask)  # (B, nh, S, hs)
        mask = self.score_bias(mask, positions, k_pos, q)  # ALiBi: its distance penalty joins the mask
        return self.project_out(self.attend(q, k, v, mask))


# --- the synthesizer ----------------------------------------------------------------------------------


class SynthesizerAttention(nn.Module):
    """Y_i = softmax(ReLU(X A_i + b1) B_i + b2)(X V_i) per head i, then the output projection.

    There are no keys: the score of query t for key position j is column j of a vector computed from x_t
    alone, so B_i has one column per position up to ``max_len``. The mask is applied to these scores
    exactly as to dot-product scores. Generation recomputes the sequence each step (see
    ``DecoderOnlyTransformer.supports_cache``): the scores of earlier queries never change, but a cache of
    keys has nothing to hold here, and left-padded batches would shift the absolute key columns.
    """

    def __init__(self, config):
        super().__init__()
        C, nh, L = config.d_model, config.n_head, config.max_len
        self.n_head, self.dropout = nh, config.dropout
        self.w1 = nn.Linear(C, C)  # A_i and b1 of every head side by side: (C, nh * hs)
        self.w2 = nn.Parameter(torch.randn(nh, C // nh, L) * 0.02)  # B_i: (nh, hs, L)
        self.b2 = nn.Parameter(torch.zeros(nh, L))  # b2 per head
        self.value = nn.Linear(C, C)  # V_i of every head
        self.proj = nn.Linear(C, C)
        self.resid_drop = nn.Dropout(config.dropout)
        self.keep_weights, self.last_weights = False, None  # as notebook 02's attention: kept when asked

    def forward(self, x, mask=None, cache=None, positions=None):
        if cache is not None:
            raise ValueError("synthesizer attention keeps no key cache: generate with use_cache=False.")
        B, T, C = x.shape
        hs = C // self.n_head
        h = F.relu(self.w1(x)).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        att = (h @ self.w2[None, :, :, :T]) + self.b2[None, :, None, :T]  # (B, nh, T, T): one score per key position
        if mask is None:
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()[None, None]
        att = att.float().masked_fill(~mask, float("-inf"))
        weights = F.softmax(att, dim=-1).type_as(h)
        if self.keep_weights:
            self.last_weights = weights  # (B, nh, T, T)
        v = self.value(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        y = F.dropout(weights, self.dropout if self.training else 0.0) @ v
        return self.resid_drop(self.proj(y.transpose(1, 2).contiguous().view(B, T, C)))


# --- the Perceiver-style bottleneck ---------------------------------------------------------------------


def latent_horizons(m: int, max_len: int) -> torch.Tensor:
    """(m,): latent i reads inputs up to position floor(i * max_len / m), spread evenly over the block.

    The course's version reads up to position i (horizons 0, 1, ..., m-1): just as causal, but the inputs
    after position m - 1 reach no latent at all, so most of a long sequence never enters the middle layers.
    """
    return torch.arange(m) * max_len // m


def read_mask(q_horizon: torch.Tensor, k_horizon: torch.Tensor, prefix_len: torch.Tensor | None) -> torch.Tensor:
    """(B or 1, 1, Tq, Tk) bool: which keys each query may read, from their horizons and the source lengths.

    With horizons = positions this is the prefix-LM mask; with latents it is what keeps the bottleneck causal
    (the rule is notebook 05's Exercise 5.2 to derive).
    """
    ok = k_horizon[None, :] <= q_horizon[:, None]  # (Tq, Tk)
    if prefix_len is None:
        return ok[None, None]
    source_only = k_horizon[None, :] < prefix_len[:, None]  # (B, Tk)
    return (ok[None] | source_only[:, None, :])[:, None]


class CrossAttention(nn.Module):
    """Queries from one sequence (Tq), keys and values from another (Tk): (B, Tq, C)."""

    def __init__(self, config):
        super().__init__()
        C = config.d_model
        self.n_head, self.dropout, self.kernel = config.n_head, config.dropout, config.attention_kernel
        self.q = nn.Linear(C, C)
        self.kv = nn.Linear(C, 2 * C)
        self.proj = nn.Linear(C, C)
        self.resid_drop = nn.Dropout(config.dropout)

    def forward(self, xq, xkv, mask):
        B, Tq, C = xq.shape
        Tk, hs = xkv.shape[1], C // self.n_head
        q = self.q(xq).view(B, Tq, self.n_head, hs).transpose(1, 2)  # (B, nh, Tq, hs)
        k, v = (t.view(B, Tk, self.n_head, hs).transpose(1, 2) for t in self.kv(xkv).split(C, dim=2))  # (B, nh, Tk, hs)
        p = self.dropout if self.training else 0.0
        if self.kernel == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, nh, Tq, hs)
        else:  # written out, as in notebook 02 (and countable by torch's FLOP counter)
            att = scaled_scores(q, k).masked_fill(~mask, float("-inf"))  # (B, nh, Tq, Tk)
            y = F.dropout(F.softmax(att, dim=-1), p) @ v
        return self.resid_drop(self.proj(y.transpose(1, 2).contiguous().view(B, Tq, C)))


class CrossBlock(nn.Module):
    """Pre-LN like :class:`helpers.nn.model.Block`, but the attention reads another sequence."""

    def __init__(self, config):
        super().__init__()
        self.ln_q, self.ln_kv = nn.LayerNorm(config.d_model), nn.LayerNorm(config.d_model)
        self.attn = CrossAttention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)

    def forward(self, xq, xkv, mask):
        xq = xq + self.attn(self.ln_q(xq), self.ln_kv(xkv), mask)
        return xq + self.ffn(self.ln2(xq))


def latent_masks(horizons: torch.Tensor, T: int, prefix_len: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The bottleneck's three masks for T positions and latents at ``horizons`` (:func:`latent_horizons`), each
    (B or 1, 1, queries, keys): "down" (latents read positions), "middle" (latents read latents), "up" (positions
    read latents)."""
    pos = torch.arange(T, device=horizons.device)
    return {
        "down": read_mask(horizons, pos, prefix_len),
        "middle": read_mask(horizons, horizons, prefix_len),
        "up": read_mask(pos, horizons, prefix_len),
    }


class Bottleneck(nn.Module):
    """Down (T -> m latents), ``n_layer - 2`` self-attention blocks on the latents, up (m -> T positions).

    The up block's queries are the inputs themselves, so position t keeps its own token through the residual and
    reads the past only through latents whose horizon it may see (:func:`read_mask`). What that costs is notebook
    05's Question 5.2.
    """

    def __init__(self, config, attention: type[nn.Module]):
        super().__init__()
        m, C = config.bottleneck_dim, config.d_model
        self.latents = nn.Parameter(torch.randn(m, C) * 0.02)  # (m, C): learned starting vectors
        self.register_buffer("horizons", latent_horizons(m, config.max_len), persistent=False)
        self.down = CrossBlock(config)
        self.middle = nn.ModuleList(Block(config, attention) for _ in range(config.n_layer - 2))
        self.up = CrossBlock(config)

    def forward(self, x, prefix_len=None):
        B, T, C = x.shape
        masks = latent_masks(self.horizons, T, prefix_len)  # "middle": causal over latents, open over source-only ones
        z = self.down(self.latents.expand(B, -1, -1), x, masks["down"])  # (B, m, C)
        for block in self.middle:
            z = block(z, masks["middle"])
        return self.up(x, z, masks["up"])  # (B, T, C)


def num_variant_parameters(config) -> dict[str, int]:
    """Closed-form counts of what the variants change: attention per layer, and the bottleneck's extra."""
    C, nh, L = config.d_model, config.n_head, config.max_len
    if config.attention == "synthesizer":
        attention = (C * C + C) + C * L + nh * L + (C * C + C) + (C * C + C)  # w1, w2, b2, value, proj
    else:
        attention = (C * 3 * C + 3 * C) + (C * C + C)  # q/k/v and the output projection
    cross = (C * C + C) + (C * 2 * C + 2 * C) + (C * C + C)  # q, kv, proj
    return {"attention": attention, "cross": cross, "latents": (config.bottleneck_dim or 0) * C}


def forward_flops(config, T: int, batch: int = 1) -> float:
    """Multiply-adds x 2 of one forward pass over T tokens (matmuls only; the LM head excluded): the measured side
    of notebook 05's Question 5.3, which asks for the counts."""
    C, F_, Lyr = config.d_model, config.d_ff, config.n_layer
    m = config.bottleneck_dim
    # the synthesizer: w1, value and proj (3 T C^2) instead of q, k, v and proj; T^2 C scores, T^2 C mixing
    k = 3 if config.attention == "synthesizer" else 4
    if not m:
        per_layer = k * T * C * C + 2 * T * T * C + 2 * T * C * F_
        return 2.0 * batch * Lyr * per_layer
    down = m * C * C + 2 * T * C * C + 2 * m * T * C + m * C * C + 2 * m * C * F_  # q, kv, scores+mix, proj, ffn
    up = T * C * C + 2 * m * C * C + 2 * T * m * C + T * C * C + 2 * T * C * F_
    middle = (Lyr - 2) * (k * m * C * C + 2 * m * m * C + 2 * m * C * F_)
    return 2.0 * batch * (down + up + middle)


def attention_memory(config, T: int, batch: int = 1, bytes_per: int = 4) -> float:
    """Bytes of the attention weights a training forward keeps for backward: nh * (rows x columns) per layer (the
    measured side of Question 5.3)."""
    nh, Lyr, m = config.n_head, config.n_layer, config.bottleneck_dim
    cells = Lyr * T * T if not m else 2 * m * T + (Lyr - 2) * m * m
    return float(batch * nh * cells * bytes_per)


def rms(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x scaled to unit root-mean-square over its last dimension (QK-norm: no parameters, as in the GPT-2 speedrun).

    With unit-RMS queries and keys a score q.k / sqrt(hs) lies in [-sqrt(hs), sqrt(hs)]: no logit can grow
    without bound, so a high learning rate cannot blow the softmax up into one-hot weights.
    """
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype)


def describe_variant(model_cfg) -> str:
    """', synthesizer attention, learned positions' and the like: what differs from the recipe's model (notebook 02's,
    with rotary positions)."""
    parts = []
    if model_cfg.attention != "dot":
        parts.append(f"{model_cfg.attention} attention")
    if model_cfg.bottleneck_dim:
        parts.append(f"a bottleneck of {model_cfg.bottleneck_dim} latents")
    if model_cfg.positional != "rotary":
        parts.append(f"{model_cfg.positional} positions")
    elif model_cfg.rotary_base != ROPE_BASE:
        parts.append(f"rotary base {model_cfg.rotary_base:g}")
    parts += [name for name, on in (("QK-norm", model_cfg.qk_norm), ("zero-initialised projections", model_cfg.zero_init),
                                    ("an untied head", not model_cfg.tie_weights)) if on]  # fmt: skip
    if model_cfg.activation != "relu2":
        parts.append(f"{model_cfg.activation} activation")
    return "".join(f", {p}" for p in parts)


def num_parameters(config: ModelConfig) -> int:
    """Closed-form parameter count of what :func:`build_model` builds from ``config``, variant or not; equals
    ``sum(p.numel() for p in model.parameters())``."""
    extra = num_variant_parameters(config)
    counts = parameter_counts(config, attention=extra["attention"])
    if config.bottleneck_dim:  # down and up blocks: cross-attention and a third LayerNorm instead of a block
        C, block = config.d_model, counts["blocks"] // config.n_layer
        feed_forward = block - extra["attention"] - 2 * (2 * C)
        cross_block = extra["cross"] + feed_forward + 3 * (2 * C)
        counts["blocks"] = (config.n_layer - 2) * block + 2 * cross_block + extra["latents"]
    return sum(counts.values())


# --- the models -----------------------------------------------------------------------------------------


def check_variant(config: ModelConfig) -> None:
    """Refuse a configuration whose variant fields combine into nothing meaningful, saying why and what to use."""
    if config.attention == "synthesizer" and config.positional in ("rotary", "alibi"):
        raise ValueError(
            f"attention='synthesizer' has no query-key dot product for positional={config.positional!r} to act "
            "on (its scores already index absolute positions): use positional='learned', 'sinusoidal' or 'none' "
            "(train: --positions learned; rotary is the cpu preset's default)."
        )
    if config.attention == "synthesizer" and config.qk_norm:
        raise ValueError(
            "qk_norm normalises queries and keys, and attention='synthesizer' has neither: use qk_norm=False with it."
        )
    if config.bottleneck_dim is not None:
        m = config.bottleneck_dim
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= config.max_len:
            raise ValueError(
                f"bottleneck_dim must be a whole number of latents between 1 and max_len={config.max_len}, got "
                f"{m!r} (16 is typical; None for the plain model)."
            )
        if config.n_layer < 2:
            raise ValueError(
                f"a bottleneck model needs n_layer >= 2 (one block down to the latents, one back up), got "
                f"{config.n_layer}."
            )
        if config.positional in ("rotary", "alibi"):
            raise ValueError(
                f"positional={config.positional!r} acts on distances between positions, and latents have none: "
                "use positional='learned' or 'sinusoidal' with bottleneck_dim (train: --positions learned; rotary is "
                "the cpu preset's default)."
            )


def attention_class(config: ModelConfig) -> type[nn.Module]:
    """The attention layer of a variant's blocks: the synthesizer's, or notebook 02's with the variant's steps."""
    return SynthesizerAttention if config.attention == "synthesizer" else VariantAttention


class VariantTransformer(DecoderOnlyTransformer):
    """Notebook 02's model with notebook 05's switches: every block's attention is the variant's
    (:func:`attention_class`), and ``zero_init`` starts the output projections at 0 (each block the identity)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        if config.zero_init:  # drawn first as notebook 02's, then zeroed: the other weights stay as they were
            for name, p in self.named_parameters():
                if name.endswith(("attn.proj.weight", "ffn.proj.weight")):
                    nn.init.zeros_(p)

    def check_config(self, config: ModelConfig) -> None:
        """Any variant whose fields combine into something meaningful (:func:`check_variant`)."""
        check_variant(config)

    def make_blocks(self, config: ModelConfig) -> nn.ModuleList:
        return nn.ModuleList(Block(config, attention_class(config)) for _ in range(config.n_layer))

    @property
    def supports_cache(self) -> bool:
        """The synthesizer recomputes instead: its scores index absolute key positions (left padding would shift
        them), and a cache of keys has nothing to hold."""
        return self.config.attention == "dot"


class BottleneckTransformer(VariantTransformer):
    """The blocks moved inside a :class:`Bottleneck`: down to ``bottleneck_dim`` latents, ``n_layer - 2`` blocks
    on them, back up. Generation recomputes (a latent's content changes as new tokens arrive)."""

    def make_blocks(self, config: ModelConfig) -> nn.ModuleList:
        self.bottleneck = Bottleneck(config, attention_class(config))
        return nn.ModuleList()  # no token-to-token blocks: they live between down and up

    def run_blocks(self, x, mask, prefix_len):
        return self.bottleneck(x, prefix_len)  # builds its own masks over latents (read_mask)

    @property
    def supports_cache(self) -> bool:
        return False

    def attention_maps(self, input_ids, prefix_len=None):
        raise ValueError(
            "attention_maps shows token-to-token attention; a bottleneck model has none (tokens attend to latents). "
            "Use a model without bottleneck_dim, or read the cross-attention of model.bottleneck.down and .up."
        )


def build_model(config: ModelConfig) -> DecoderOnlyTransformer:
    """The model ``config`` describes: notebook 02's :class:`DecoderOnlyTransformer` when it names no variant,
    else the variant built on it (:class:`VariantTransformer`, :class:`BottleneckTransformer`)."""
    if not isinstance(config, ModelConfig):
        raise TypeError(
            f"build_model needs a ModelConfig, got {type(config).__name__}: use ModelConfig(...) or "
            "ModelConfig.from_dict(d)."
        )
    check_variant(config)
    if config.bottleneck_dim:
        return BottleneckTransformer(config)
    return VariantTransformer(config) if config.variant_fields() else DecoderOnlyTransformer(config)
