"""The research variants of notebook 05, each a switch on :class:`helpers.nn.model.ModelConfig`.

* ``positional="rotary"`` (RoPE, Su et al. 2021): no position vector is added to the tokens; queries and keys
  are rotated by an angle proportional to their position, so their dot product depends only on the distance.
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

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# --- positions inside attention -----------------------------------------------------------------------


def rotary(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate each pair of channels (2i, 2i+1) of ``x`` (B, nh, T, hs) by ``position * base^(-2i/hs)``.

    positions: (T,) or (B, T). (What the rotation does to q . k, and so to a cache of keys, is Question 5.4.)
    """
    hs = x.size(-1)
    inv_freq = base ** (-torch.arange(0, hs, 2, device=x.device, dtype=torch.float32) / hs)  # (hs/2,)
    pos = positions if positions.dim() == 2 else positions[None]  # (B or 1, T)
    angle = pos.float()[..., None] * inv_freq  # (B, T, hs/2)
    cos, sin = angle.cos()[:, None], angle.sin()[:, None]  # (B, 1, T, hs/2): the same for every head
    x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)  # pairs back in place
    return out.type_as(x)


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
    """Queries and keys turned by their positions (:func:`rotary`); positions None: 0..T-1."""

    def forward(self, q, k, positions):
        positions = torch.arange(q.size(-2), device=q.device) if positions is None else positions
        return rotary(q, positions), rotary(k, positions)


class QueryKeySteps(nn.ModuleList):
    """What acts on queries and keys before the scores, in order; none in notebook 02's model."""

    def forward(self, q, k, positions):
        for step in self:
            q, k = step(q, k, positions)
        return q, k


def query_key_steps(config) -> QueryKeySteps:
    """QK-norm first (it would undo nothing of a rotation, but keeps the order the runs were made with), then rotary."""
    return QueryKeySteps([QKNorm()] * config.qk_norm + [Rotary()] * (config.positional == "rotary"))


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

    def forward(self, x, mask=None, cache=None, positions=None, return_weights: bool = False):
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
        v = self.value(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        y = F.dropout(weights, self.dropout if self.training else 0.0) @ v
        y = self.resid_drop(self.proj(y.transpose(1, 2).contiguous().view(B, T, C)))
        return (y, weights) if return_weights else y


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

    def __init__(self, config, feed_forward):
        super().__init__()
        self.ln_q, self.ln_kv = nn.LayerNorm(config.d_model), nn.LayerNorm(config.d_model)
        self.attn = CrossAttention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.ffn = feed_forward(config)

    def forward(self, xq, xkv, mask):
        xq = xq + self.attn(self.ln_q(xq), self.ln_kv(xkv), mask)
        return xq + self.ffn(self.ln2(xq))


class Bottleneck(nn.Module):
    """Down (T -> m latents), ``n_layer - 2`` self-attention blocks on the latents, up (m -> T positions).

    The up block's queries are the inputs themselves, so position t keeps its own token through the residual and
    reads the past only through latents whose horizon it may see (:func:`read_mask`). What that costs is notebook
    05's Question 5.2.
    """

    def __init__(self, config, block, feed_forward):
        super().__init__()
        m, C = config.bottleneck_dim, config.d_model
        self.latents = nn.Parameter(torch.randn(m, C) * 0.02)  # (m, C): learned starting vectors
        self.register_buffer("horizons", latent_horizons(m, config.max_len), persistent=False)
        self.down = CrossBlock(config, feed_forward)
        self.middle = nn.ModuleList(block(config) for _ in range(config.n_layer - 2))
        self.up = CrossBlock(config, feed_forward)

    def forward(self, x, prefix_len=None):
        B, T, C = x.shape
        pos, lat = torch.arange(T, device=x.device), self.horizons
        z = self.down(self.latents.expand(B, -1, -1), x, read_mask(lat, pos, prefix_len))  # (B, m, C)
        mid = read_mask(lat, lat, prefix_len)  # (B, 1, m, m): causal over latents, open over source-only ones
        for block in self.middle:
            z = block(z, mid)
        return self.up(x, z, read_mask(pos, lat, prefix_len))  # (B, T, C)


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


ACTIVATIONS = ("relu2", "gelu")  # the feed-forward's non-linearity: ReLU squared (notebook 02); GELU (GPT-2's)


def check_variant(config) -> None:
    """Refuse combinations that have no meaning, saying why and what to use instead."""
    if config.attention == "synthesizer" and config.positional in ("rotary", "alibi"):
        raise ValueError(
            f"attention='synthesizer' has no query-key dot product for positional={config.positional!r} to act "
            "on (its scores already index absolute positions): use positional='learned', 'sinusoidal' or 'none'."
        )
    if config.activation not in ACTIVATIONS:
        raise ValueError(f"activation={config.activation!r} is not known: choose one of {ACTIVATIONS}.")
    if config.attention == "synthesizer" and getattr(config, "qk_norm", False):
        raise ValueError(
            "qk_norm normalises queries and keys, and attention='synthesizer' has neither: use qk_norm=False with it."
        )
    if config.bottleneck_dim is not None:
        m = config.bottleneck_dim
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= config.max_len:
            raise ValueError(
                f"bottleneck_dim must be a whole number of latents between 1 and max_len={config.max_len}, got {m!r} "
                "(16 is typical; None for the plain model)."
            )
        if config.n_layer < 2:
            raise ValueError(
                f"a bottleneck model needs n_layer >= 2 (one block down to the latents, one back up), got {config.n_layer}."
            )
        if config.positional in ("rotary", "alibi"):
            raise ValueError(
                f"positional={config.positional!r} acts on distances between positions, and latents have none: use "
                "positional='learned' or 'sinusoidal' with bottleneck_dim."
            )


def rms(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x scaled to unit root-mean-square over its last dimension (QK-norm: no parameters, as in the GPT-2 speedrun).

    With unit-RMS queries and keys a score q.k / sqrt(hs) lies in [-sqrt(hs), sqrt(hs)]: no logit can grow
    without bound, so a high learning rate cannot blow the softmax up into one-hot weights.
    """
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype)


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


def scaled_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q k^T / sqrt(hs): (B, nh, Tq, Tk)."""
    return (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))


def describe_variant(model_cfg) -> str:
    """', synthesizer attention, rotary positions' and the like: what differs from notebook 02's model."""
    parts = []
    if model_cfg.attention != "dot":
        parts.append(f"{model_cfg.attention} attention")
    if model_cfg.bottleneck_dim:
        parts.append(f"a bottleneck of {model_cfg.bottleneck_dim} latents")
    if model_cfg.positional != "learned":
        parts.append(f"{model_cfg.positional} positions")
    parts += [name for name, on in (("QK-norm", model_cfg.qk_norm), ("zero-initialised projections", model_cfg.zero_init),
                                    ("an untied head", not model_cfg.tie_weights)) if on]  # fmt: skip
    if model_cfg.activation != "relu2":
        parts.append(f"{model_cfg.activation} activation")
    return "".join(f", {p}" for p in parts)
