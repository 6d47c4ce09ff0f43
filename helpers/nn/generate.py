"""Decoding notebook 02's model: greedy and beam search, with the key/value cache or by recomputing every step.

:func:`generate` is what ``DecoderOnlyTransformer.generate`` does: the new tokens of each sentence.
:func:`beam_search` returns every finished hypothesis of each sentence, best first, with its score, its
log-probability and its length (``helpers.evaluation.explain`` shows them as the beam's other candidates).

Both run on a *decoder*, which turns the chosen tokens into the next logits: :class:`CachedDecoder` keeps each
layer's keys and values (``helpers.nn.model.LayerCache``) and computes only the new position;
:class:`FullRecompute` reruns ``model(...)`` over the whole sequence, the slow reference that must agree.
:func:`greedy_decode` and :func:`beam_decode` are the searches over any decoder.

This module imports nothing from ``helpers.nn.model``: the model calls into it, and it reads the model only
through ``config``, ``embed``, ``blocks``, ``ln_f``, ``lm_head``, ``new_cache`` and ``supports_cache``.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Hypothesis:
    """One finished hypothesis of beam search."""

    ids: list[int]  # the new tokens: no prefix, no <eos>
    score: float  # logprob / length ** length_penalty: what beam search ranks by
    logprob: float  # the sum of the log-probabilities of ids (and of the <eos>, when it ended with one)
    length: int  # how many tokens were scored: len(ids), plus one for the <eos>

    @property
    def ended_with_eos(self) -> bool:
        """False when the hypothesis ran out of room (its budget or ``max_len``) before writing ``<eos>``."""
        return self.length == len(self.ids) + 1


# ----------------------------------------------------------------------------------------------
# decoders: the chosen tokens in, the next logits out


class CachedDecoder:
    """Left-pads the prefixes so every row's next token sits in the same column; each row keeps its own positions."""

    def __init__(self, model, prefixes: list[list[int]]):
        self.model = model
        device = model.tok_emb.weight.device
        lengths = torch.tensor([len(p) for p in prefixes], device=device)
        S = int(lengths.max())
        ids = torch.zeros(len(prefixes), S, dtype=torch.long, device=device)
        for i, p in enumerate(prefixes):
            ids[i, S - len(p) :] = torch.tensor(p, device=device)
        self.ids = ids
        self.pad = S - lengths  # (N,) left padding per row
        self.next_pos = lengths.clone()  # (N,) position of the next token in each row
        cols = torch.arange(S, device=device)
        self.key_ok = cols[None, :] >= self.pad[:, None]  # (N, S): False on padding
        self.caches = model.new_cache()  # one LayerCache per block

    def start(self) -> torch.Tensor:
        m, S = self.model, self.ids.shape[1]
        positions = (torch.arange(S, device=self.ids.device)[None, :] - self.pad[:, None]).clamp(min=0)  # (N, S)
        # the prefix is bidirectional: real queries see every real key; a padding query sees only itself
        eye = torch.eye(S, dtype=torch.bool, device=self.ids.device)
        mask = (self.key_ok[:, None, :] | eye[None])[:, None]  # (N, 1, S, S)
        x = m.embed(self.ids, positions)
        for block, cache in zip(m.blocks, self.caches):
            x = block(x, mask, cache, positions)
        return m.lm_head(m.ln_f(x[:, -1]))  # (N, V): the last column is every row's last prefix token

    def step(self, index: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Continue rows ``index`` of the previous step with ``tokens`` (N,); returns their next logits (N, V)."""
        m = self.model
        for cache in self.caches:
            cache.reorder(index)
        self.key_ok, self.next_pos = self.key_ok[index], self.next_pos[index]
        self.key_ok = torch.cat([self.key_ok, self.key_ok.new_ones(len(index), 1)], dim=1)  # (N, S+1)
        mask = self.key_ok[:, None, None, :]  # (N, 1, 1, S+1): the new token sees every real token
        x = m.embed(tokens[:, None], self.next_pos[:, None])  # (N, 1, C)
        for block, cache in zip(m.blocks, self.caches):
            x = block(x, mask, cache, self.next_pos[:, None])
        self.next_pos = self.next_pos + 1
        return m.lm_head(m.ln_f(x[:, -1]))  # (N, V)


class FullRecompute:
    """The reference: rerun the whole (right-padded) sequence through forward() every step."""

    def __init__(self, model, prefixes: list[list[int]]):
        self.model, self.seqs, self.plen = model, [list(p) for p in prefixes], [len(p) for p in prefixes]

    def _last_logits(self) -> torch.Tensor:
        device = self.model.tok_emb.weight.device
        T = max(len(s) for s in self.seqs)
        ids = torch.zeros(len(self.seqs), T, dtype=torch.long, device=device)
        for i, s in enumerate(self.seqs):
            ids[i, : len(s)] = torch.tensor(s, device=device)
        logits = self.model(ids, prefix_len=torch.tensor(self.plen, device=device))  # (N, T, V)
        last = torch.tensor([len(s) - 1 for s in self.seqs], device=device)
        return logits[torch.arange(len(self.seqs), device=device), last]  # (N, V)

    def start(self) -> torch.Tensor:
        return self._last_logits()

    def step(self, index: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        idx, toks = index.tolist(), tokens.tolist()
        self.seqs = [self.seqs[i] + [t] for i, t in zip(idx, toks)]
        self.plen = [self.plen[i] for i in idx]
        return self._last_logits()


def decoder_for(model, prefixes: list[list[int]], use_cache: bool = True) -> CachedDecoder | FullRecompute:
    """The cached decoder where the model can keep a cache (``supports_cache``), else the recomputing one."""
    return CachedDecoder(model, prefixes) if use_cache and model.supports_cache else FullRecompute(model, prefixes)


# ----------------------------------------------------------------------------------------------
# the searches, over any decoder


def greedy_decode(decoder, budgets: list[int], eos_id: int) -> list[list[int]]:
    """The most likely token at each step, until ``eos_id`` or the sentence's budget; the new tokens per sentence."""
    out: list[list[int]] = [[] for _ in budgets]
    logits = decoder.start()
    rows = [s for s, n in enumerate(budgets) if n > 0]  # the sentence each row of logits belongs to
    keep = rows[:]  # row indices into logits (at the start, row i is sentence i)
    while rows:
        picked = logits[keep].argmax(dim=-1)  # (N,)
        next_rows, next_keep = [], []
        for r, (s, tok) in enumerate(zip(rows, picked.tolist())):
            if tok == eos_id:
                continue
            out[s].append(tok)
            if len(out[s]) < budgets[s]:
                next_rows.append(s)
                next_keep.append(r)
        if not next_rows:
            break
        index = torch.tensor(next_keep, device=logits.device)
        src = torch.tensor(keep, device=logits.device)[index]  # rows of the decoder state to continue
        logits = decoder.step(src, picked[index])
        rows, keep = next_rows, list(range(len(next_rows)))
    return out


def beam_decode(decoder, budgets: list[int], eos_id: int, beams: int, length_penalty: float) -> list[list[Hypothesis]]:
    """Beam search per sentence, all sentences batched; every finished hypothesis per sentence, best first.

    A sentence stops once it has ``beams`` finished hypotheses. A hypothesis finishes with ``<eos>`` (only
    when it is among the step's top ``beams``) or when it reaches its budget; hypotheses are ranked by
    ``logprob / length ** length_penalty``."""
    finished: list[list[Hypothesis]] = [[] for _ in budgets]
    logits = decoder.start()
    # live hypotheses: (sentence, decoder row, score, tokens); rows of one sentence are contiguous
    live = [(s, s, 0.0, []) for s, n in enumerate(budgets) if n > 0]
    while live:
        logp = F.log_softmax(logits.float(), dim=-1)  # (N, V)
        V = logp.shape[-1]
        new_live, src, toks = [], [], []
        i = 0
        while i < len(live):
            s = live[i][0]
            j = i
            while j < len(live) and live[j][0] == s:
                j += 1
            group = live[i:j]
            rows = torch.tensor([h[1] for h in group], device=logp.device)
            scores = torch.tensor([h[2] for h in group], device=logp.device)[:, None] + logp[rows]  # (k, V)
            top_scores, top_idx = scores.view(-1).topk(min(2 * beams, scores.numel()))
            kept = []
            for rank, (sc, ix) in enumerate(zip(top_scores.tolist(), top_idx.tolist())):
                hyp, tok = group[ix // V], ix % V
                if tok == eos_id:
                    if rank < beams:  # an eos below the top `beams` would not have survived the beam
                        finished[s].append(_finished(hyp[3], sc, len(hyp[3]) + 1, length_penalty))
                    continue
                kept.append((hyp, tok, sc))
                if len(kept) == beams:
                    break
            for hyp, tok, sc in kept:
                tokens = hyp[3] + [tok]
                if len(tokens) >= budgets[s]:  # out of room: this hypothesis ends here
                    finished[s].append(_finished(tokens, sc, len(tokens), length_penalty))
                elif len(finished[s]) < beams:
                    new_live.append((s, len(src), sc, tokens))
                    src.append(hyp[1])
                    toks.append(tok)
            if len(finished[s]) >= beams:  # enough finished hypotheses: drop this sentence's live ones
                new_live = [h for h in new_live if h[0] != s]
            i = j
        if not new_live:
            break
        # rows were appended in order; drop those whose sentence finished, then renumber
        keep_rows = [h[1] for h in new_live]
        index = torch.tensor([src[r] for r in keep_rows], device=logits.device)
        tokens = torch.tensor([toks[r] for r in keep_rows], device=logits.device)
        live = [(s, n, sc, t) for n, (s, _, sc, t) in enumerate(new_live)]
        logits = decoder.step(index, tokens)
    return [sorted(f, key=lambda h: -h.score) for f in finished]  # stable: ties keep the order they finished in


def _finished(ids: list[int], logprob: float, length: int, length_penalty: float) -> Hypothesis:
    return Hypothesis(ids=ids, score=logprob / length**length_penalty, logprob=logprob, length=length)


# ----------------------------------------------------------------------------------------------
# the model's entry points: checked arguments, eval mode, no gradients


def generate(
    model,
    prefixes: list[list[int]],
    max_new_tokens: int | list[int],
    eos_id: int,
    beams: int = 1,
    use_cache: bool = True,
    length_penalty: float = 1.0,
) -> list[list[int]]:
    """Continue each prefix (``<bos> French <sep>`` ids; lengths may differ) until ``eos_id``.

    Returns the new tokens per sentence, without the prefix and without the eos. ``beams=1`` is
    greedy; beam search returns its best hypothesis (:func:`beam_search` returns all of them).
    ``max_new_tokens`` may be one number or one per sentence. A row also stops when prefix plus
    continuation reaches ``max_len`` (a warning says so). ``use_cache=False`` recomputes the whole
    sequence each step: slower, same answer; models without a cache (``supports_cache``) always do.
    The model is put in eval mode for the call.
    """
    prefixes, budgets = check_generate_args(model, prefixes, max_new_tokens, eos_id, beams, length_penalty)
    with _decoding(model):
        decoder = decoder_for(model, prefixes, use_cache)
        if beams == 1:
            return greedy_decode(decoder, budgets, eos_id)
        return [found[0].ids if found else [] for found in beam_decode(decoder, budgets, eos_id, beams, length_penalty)]


def beam_search(
    model,
    prefixes: list[list[int]],
    max_new_tokens: int | list[int],
    eos_id: int,
    beams: int = 4,
    length_penalty: float = 1.0,
    use_cache: bool = True,
) -> list[list[Hypothesis]]:
    """Every finished hypothesis of each prefix's beam search, best first (``score``, then the order they finished).

    The first hypothesis of each sentence is what ``generate(..., beams=beams)`` returns. A sentence with a
    budget of 0 has none. Arguments as :func:`generate`; ``beams=1`` is a beam of width one (the same tokens
    as greedy decoding, with their scores)."""
    prefixes, budgets = check_generate_args(model, prefixes, max_new_tokens, eos_id, beams, length_penalty)
    with _decoding(model):
        return beam_decode(decoder_for(model, prefixes, use_cache), budgets, eos_id, beams, length_penalty)


@contextlib.contextmanager
def _decoding(model):
    was_training = model.training
    model.eval()  # dropout would make every step random, and the cache would disagree with a recomputation
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def check_generate_args(model, prefixes, max_new_tokens, eos_id, beams, length_penalty):
    """``(prefixes, budgets)``: the prefixes as lists of ints, and each sentence's room for new tokens; or an
    error that says what is wrong with an argument (a warning when a budget passes ``max_len``)."""
    cfg = model.config
    if isinstance(prefixes, torch.Tensor):
        prefixes = prefixes.tolist()
    if not isinstance(prefixes, (list, tuple)) or not all(isinstance(p, (list, tuple)) for p in prefixes):
        raise TypeError(
            "prefixes must be a list of token-id lists, one per sentence, e.g. [[bos, 5, 9, sep], [bos, 7, sep]]."
        )
    prefixes = [[int(t) for t in p] for p in prefixes]
    for i, p in enumerate(prefixes):
        if not p:
            raise ValueError(f"prefix {i} is empty: start it with <bos> (and end the source with <sep>).")
        if min(p) < 0 or max(p) >= cfg.vocab_size:
            raise ValueError(
                f"prefix {i} has token ids outside [0, {cfg.vocab_size - 1}]: the tokenizer and vocab_size={cfg.vocab_size} disagree."
            )
        if len(p) >= cfg.max_len:
            raise ValueError(
                f"prefix {i} has {len(p)} tokens, leaving no room within max_len={cfg.max_len}: "
                "shorten or skip that sentence, or build the model with a larger max_len."
            )
    if isinstance(max_new_tokens, numbers.Integral):
        budgets = [int(max_new_tokens)] * len(prefixes)
    else:
        budgets = [int(n) for n in max_new_tokens]
        if len(budgets) != len(prefixes):
            raise ValueError(
                f"max_new_tokens has {len(budgets)} entries for {len(prefixes)} prefixes: give one per sentence or a single int."
            )
    if any(n < 0 for n in budgets):
        raise ValueError("max_new_tokens must be >= 0.")
    room = [min(n, cfg.max_len - len(p)) for n, p in zip(budgets, prefixes)]
    if room != budgets:
        short = sum(r < n for r, n in zip(room, budgets))
        warnings.warn(
            f"{short} sentence(s) would pass max_len={cfg.max_len}; their generation stops at max_len "
            "(pass a smaller max_new_tokens or use a model with a larger max_len).",
            stacklevel=3,
        )
    if not (0 <= int(eos_id) < cfg.vocab_size):
        raise ValueError(
            f"eos_id={eos_id} is outside the vocabulary [0, {cfg.vocab_size - 1}]: pass the tokenizer's <eos> id."
        )
    if not isinstance(beams, int) or beams < 1:
        raise ValueError(f"beams must be a whole number >= 1 (1 = greedy), got {beams!r}.")
    if not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}.")
    return prefixes, room
