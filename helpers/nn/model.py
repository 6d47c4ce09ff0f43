"""The decoder-only Transformer that notebook 02 builds cell by cell; later notebooks import it from here.

Translation is one sequence, ``<bos> French <sep> English <eos>``. A prefix-LM mask lets every
position see the whole source (``<bos> French <sep>``, bidirectionally) while target positions
attend causally, so one stack of blocks does the work of an encoder and a decoder.

Read top to bottom: config, mask, attention, feed-forward, block, model. Generation (greedy, beam search)
is in :mod:`helpers.nn.generate`; ``DecoderOnlyTransformer.generate`` calls it.
Shapes in comments: B batch, T time (sequence length), C = d_model, nh heads, hs = C // nh.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import generate as decoding
from . import variants

POSITIONAL_KINDS = ("learned", "sinusoidal", "rotary", "alibi", "none")  # the last three: notebook 05
ATTENTION_KERNELS = ("sdpa", "explicit")  # the same attention, computed by a fused kernel or written out
ATTENTION_KINDS = ("dot", "synthesizer")  # scaled dot product (notebook 02); synthesizer (notebook 05)


@dataclass
class ModelConfig:
    vocab_size: int
    max_len: int
    n_layer: int
    n_head: int
    d_model: int
    d_ff: int | None = None  # None -> 4 * d_model, as in GPT-2 and "Attention Is All You Need"
    dropout: float = 0.0
    positional: str = "learned"  # "learned" | "sinusoidal" added to the tokens; "rotary" | "alibi" | "none" (05)
    # "sdpa": F.scaled_dot_product_attention (fused kernels, the fast choice on a GPU); "explicit": the
    # softmax written out as in notebook 02 (faster on a CPU for short sequences; returns the weights)
    attention_kernel: str = "sdpa"
    tie_weights: bool = True  # the LM head reuses the token embedding matrix
    # notebook 05's variants (helpers.nn.variants): how scores are made, and an optional latent bottleneck
    attention: str = "dot"  # "dot" | "synthesizer"
    bottleneck_dim: int | None = None  # m latents between a down and an up cross-attention; None = plain model
    activation: str = "relu2"  # the feed-forward's non-linearity: ReLU squared (notebook 02), or "gelu" (GPT-2's)
    # notebook 05: the GPT-2 speedrun's levers that lost here (helpers.nn.variants): unit-RMS q and k, zero-init
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
        if self.attention_kernel not in ATTENTION_KERNELS:
            raise ValueError(
                f"attention_kernel={self.attention_kernel!r} is not known: choose one of {ATTENTION_KERNELS}."
            )
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention={self.attention!r} is not known: choose one of {ATTENTION_KINDS}.")
        if self.positional == "rotary" and self.head_dim % 2:
            raise ValueError(
                f"rotary positions turn pairs of channels, so d_model / n_head must be even (got {self.head_dim}): "
                "change d_model or n_head."
            )
        variants.check_variant(self)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

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
    """Closed-form parameter count; equals ``sum(p.numel() for p in model.parameters())``."""
    V, C, F_, L = config.vocab_size, config.d_model, config.d_ff, config.n_layer
    embedding = V * C
    positions = config.max_len * C if config.positional == "learned" else 0  # the others are fixed or none
    attention = variants.num_variant_parameters(config)["attention"]  # q/k/v + output projection, with biases
    feed_forward = (C * F_ + F_) + (F_ * C + C)
    layer_norms = 2 * (2 * C)  # two LayerNorms per block, each a scale and a shift
    head = 0 if config.tie_weights else V * C  # a tied head shares the embedding matrix
    blocks = L * (attention + feed_forward + layer_norms)
    if config.bottleneck_dim:  # down and up blocks: cross-attention and a third LayerNorm instead of a block
        extra = variants.num_variant_parameters(config)
        cross_block = extra["cross"] + feed_forward + 3 * (2 * C)
        blocks = (L - 2) * (attention + feed_forward + layer_norms) + 2 * cross_block + extra["latents"]
    return embedding + positions + blocks + 2 * C + head


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


def explicit_attention(q, k, v, mask, dropout_p: float = 0.0):
    """softmax(q k^T / sqrt(hs)) v written out, as in notebook 02: (B, nh, T, hs), and the weights (B, nh, T, S).

    mask: bool (True = may read), or a float mask added to the scores (ALiBi's), or None for causal."""
    att = variants.scaled_scores(q, k)  # (B, nh, T, S)
    mask = build_attention_mask(q.size(-2), device=q.device) if mask is None else mask
    # before the softmax, so each row still sums to 1
    att = att + mask if mask.is_floating_point() else att.masked_fill(~mask, float("-inf"))
    weights = F.softmax(att, dim=-1)  # over keys
    return F.dropout(weights, dropout_p) @ v, weights


def fused_attention(q, k, v, mask, dropout_p: float = 0.0):
    """The same function by F.scaled_dot_product_attention's fused kernels (flash, memory-efficient); no weights.
    mask None: causal, which lets the kernel skip the masked half."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=mask is None), None


class SelfAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_head, self.d_model, self.dropout = config.n_head, config.d_model, config.dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)  # one matmul for q, k, v of every head
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.resid_drop = nn.Dropout(config.dropout)
        self.kernel = config.attention_kernel  # "sdpa" or "explicit": the same function, computed two ways
        self.attend = fused_attention if self.kernel == "sdpa" else explicit_attention
        # notebook 05's variants, chosen here once: QK-norm and rotary act on q and k, ALiBi on the scores
        self.rotate = variants.query_key_steps(config)  # no steps in notebook 02's model
        self.score_bias = variants.score_bias(config)  # the mask as it is, in notebook 02's model

    def forward(self, x, mask=None, cache: LayerCache | None = None, positions=None, return_weights: bool = False):
        """mask: bool, broadcastable to (B, nh, T, S); None means causal. positions: (T,) or (B, T), for
        rotary and ALiBi only (default 0..T-1). Returns (B, T, C) [, weights (B, nh, T, S)]."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        q, k = self.rotate(q, k, positions)  # rotary positions, if any, before the cache
        k_pos = positions
        if cache is not None:  # earlier positions' keys and values come from the cache
            k, v, k_pos = cache.extend(k, v, positions, mask)  # (B, nh, S, hs)
        mask = self.score_bias(mask, positions, k_pos, q)  # ALiBi: its distance penalty joins the mask
        attend = explicit_attention if return_weights else self.attend  # the weights need the written-out softmax
        y, weights = attend(q, k, v, mask, self.dropout * self.training)  # (B, nh, T, hs); no dropout in eval
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again, head 0 first
        y = self.resid_drop(self.proj(y))
        return (y, weights) if return_weights else y


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.d_ff)
        self.proj = nn.Linear(config.d_ff, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.act = variants.relu2 if config.activation == "relu2" else F.gelu  # max(z, 0)^2, or GPT-2's z Phi(z)

    def forward(self, x):
        return self.drop(self.proj(self.act(self.fc(x))))  # same MLP at every position


class Block(nn.Module):
    """Pre-LayerNorm residual block: normalise, transform, add back; the residual path stays clean."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model)
        self.attn = SelfAttention(config) if config.attention == "dot" else variants.SynthesizerAttention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)

    def forward(self, x, mask=None, cache: LayerCache | None = None, positions=None, return_weights: bool = False):
        """(B, T, C) [, the attention weights (B, nh, T, S), with return_weights]."""
        a = self.attn(self.ln1(x), mask, cache, positions, return_weights=return_weights)
        a, weights = a if return_weights else (a, None)
        x = x + a
        x = x + self.ffn(self.ln2(x))
        return (x, weights) if return_weights else x


class DecoderOnlyTransformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(
                f"DecoderOnlyTransformer needs a ModelConfig, got {type(config).__name__}: use ModelConfig(...) or ModelConfig.from_dict(d)."
            )
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
        if config.bottleneck_dim:  # notebook 05: the blocks live inside the bottleneck, between down and up
            self.blocks = nn.ModuleList()
            self.bottleneck = variants.Bottleneck(config, Block, FeedForward)
        else:
            self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
            self.bottleneck = None
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight  # one matrix reads tokens in and scores them out
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2: keep the residual stream's variance flat with depth
            if name.endswith(("attn.proj.weight", "ffn.proj.weight")):
                # zero_init (notebook 05): the projections start at 0, so every block starts as the identity
                nn.init.normal_(p, mean=0.0, std=0.0 if config.zero_init else 0.02 / math.sqrt(2 * config.n_layer))

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
        return self.drop(tok)  # (B, T, C); rotary and ALiBi act inside attention, "none" adds nothing

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
        if self.bottleneck is not None:
            x = self.bottleneck(x, prefix_len)
        for block in self.blocks:
            x = block(x, mask)
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
        """Whether generation can keep a key/value cache. The synthesizer and the bottleneck recompute instead:
        the synthesizer's scores index absolute key positions (left padding would shift them), and a latent's
        content changes as new tokens arrive, so nothing computed earlier stays valid."""
        return self.config.attention == "dot" and self.bottleneck is None

    @torch.no_grad()
    def attention_maps(self, input_ids: torch.Tensor, prefix_len: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Attention weights per layer, each (B, n_head, T, T), computed with an explicit softmax."""
        self._check_ids(input_ids)
        if self.bottleneck is not None:
            raise ValueError(
                "attention_maps shows token-to-token attention; a bottleneck model has none (tokens attend to latents). "
                "Use a model without bottleneck_dim, or read the cross-attention of model.bottleneck.down and .up."
            )
        B, T = input_ids.shape
        if prefix_len is not None:
            _check_prefix_len(prefix_len, T, batch=B)
        mask = build_attention_mask(T, prefix_len, device=input_ids.device)
        x = self.embed(input_ids, torch.arange(T, device=input_ids.device))
        maps = []
        for block in self.blocks:
            x, weights = block(x, mask, return_weights=True)  # (positions default to 0..T-1)
            maps.append(weights.detach())
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
