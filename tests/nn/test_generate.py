"""helpers.nn.generate: greedy and beam decoding, cached vs recomputed, the finished hypotheses, argument errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers.nn import generate as G
from tests.nn.test_model import EOS, PREFIXES, V, make, variant


def _naive_greedy(model, prefix, n, eos):
    """One sentence, recompute everything, no padding: the plainest possible decoder."""
    seq = list(prefix)
    out = []
    for _ in range(n):
        logits = model(torch.tensor([seq]), prefix_len=torch.tensor([len(prefix)]))[0, -1]
        tok = int(logits.argmax())
        if tok == eos:
            break
        out.append(tok)
        seq.append(tok)
    return out


BUDGETS = [6, 9, 4, 7]


@variant
@pytest.mark.parametrize("eos", [11, 5, EOS])  # eos values that stop some sentences early and not others
def test_greedy_cache_equals_recompute_and_one_at_a_time(eos, variant):
    model = make(seed=1, sharp=True, **variant)
    cached = model.generate(PREFIXES, BUDGETS, eos_id=eos)
    full = model.generate(PREFIXES, BUDGETS, eos_id=eos, use_cache=False)
    alone = [model.generate([p], n, eos_id=eos)[0] for p, n in zip(PREFIXES, BUDGETS)]
    naive = [_naive_greedy(model, p, n, eos) for p, n in zip(PREFIXES, BUDGETS)]
    assert cached == full == alone == naive
    assert all(len(o) <= n and eos not in o for o, n in zip(cached, BUDGETS))
    assert len({tuple(o) for o in cached}) > 1, "degenerate test model: all outputs equal"


def test_greedy_stops_at_eos_and_excludes_it():
    model = make(seed=1, sharp=True)
    out = model.generate(PREFIXES, 10, eos_id=EOS)
    # pick as eos the first token greedy produced for sentence 0: generation must stop before it
    eos = out[0][0]
    again = model.generate(PREFIXES, 10, eos_id=eos)
    assert again[0] == []
    for o_full, o_eos in zip(out, again):
        expected = o_full[: o_full.index(eos)] if eos in o_full else o_full
        assert o_eos == expected


@variant
@pytest.mark.parametrize("eos, length_penalty", [(6, 1.0), (11, 1.0), (5, 0.0), (4, 2.0)])
def test_beam_cache_equals_recompute_and_one_at_a_time(eos, length_penalty, variant):
    model = make(seed=1, sharp=True, **variant)
    kw = dict(eos_id=eos, beams=3, length_penalty=length_penalty)
    cached = model.generate(PREFIXES, BUDGETS, **kw)
    full = model.generate(PREFIXES, BUDGETS, use_cache=False, **kw)
    alone = [model.generate([p], n, **kw)[0] for p, n in zip(PREFIXES, BUDGETS)]
    assert cached == full == alone
    assert all(len(o) <= n and eos not in o for o, n in zip(cached, BUDGETS))


def _reference_beam(model, prefix, n, eos, K, lp):
    """One sentence, plain Python lists, full recomputation for every hypothesis: the best hypothesis."""
    finished = _reference_finished(model, prefix, n, eos, K, lp)
    return finished[0][1] if finished else []


def _reference_finished(model, prefix, n, eos, K, lp):
    """Every (score, tokens) the reference beam finishes, best first (ties in the order they finished)."""
    live, finished = [(0.0, [])], []
    for _ in range(n):
        cands = []
        for score, toks in live:
            with torch.no_grad():
                logits = model(torch.tensor([prefix + toks]), prefix_len=torch.tensor([len(prefix)]))[0, -1]
            for v, lpv in enumerate(F.log_softmax(logits, -1).tolist()):
                cands.append((score + lpv, toks, v))
        cands.sort(key=lambda c: -c[0])
        kept = []
        for rank, (sc, toks, v) in enumerate(cands[: 2 * K]):
            if v == eos:
                if rank < K:  # an eos candidate counts only if it is among the top K
                    finished.append((sc / (len(toks) + 1) ** lp, toks))
                continue
            kept.append((sc, toks + [v]))
            if len(kept) == K:
                break
        live = []
        for sc, toks in kept:
            if len(toks) >= n:
                finished.append((sc / len(toks) ** lp, toks))
            elif len(finished) < K:
                live.append((sc, toks))
        if len(finished) >= K or not live:
            break
    return sorted(finished, key=lambda f: -f[0])


@pytest.mark.parametrize(
    "seed, eos, length_penalty, beams",
    # (3, 5, ..) and (3, 16, ..) exercise an eos ranked below the top `beams`, which must not finish a hypothesis
    [(1, 6, 1.0, 3), (1, 11, 0.5, 2), (1, 5, 0.0, 3), (1, 4, 2.0, 4), (3, 5, 1.0, 2), (3, 16, 1.0, 3)],
)
def test_beam_search_matches_plain_python_reference(seed, eos, length_penalty, beams):
    model = make(seed=seed, sharp=True)
    got = model.generate(PREFIXES, BUDGETS, eos_id=eos, beams=beams, length_penalty=length_penalty)
    want = [_reference_beam(model, p, n, eos, beams, length_penalty) for p, n in zip(PREFIXES, BUDGETS)]
    assert got == want


# the recomputing decoder is checked against the cached one by the tests above; the reference is slow, so two cases
@pytest.mark.parametrize("seed, eos, length_penalty, beams, use_cache", [(3, 5, 1.0, 2, True), (1, 4, 2.0, 4, False)])
def test_beam_search_returns_every_finished_hypothesis_with_its_score(seed, eos, length_penalty, beams, use_cache):
    """helpers.nn.generate.beam_search, the public API behind explain's candidates: each sentence's finished
    hypotheses, best first, are the plain-Python reference's with its scores; each logprob is what one forward
    pass gives the tokens (and the <eos>, when the hypothesis wrote one), its length counts them, and its score is
    logprob / length ** length_penalty; the first is what generate returns."""
    model = make(seed=seed, sharp=True)
    found = G.beam_search(
        model, PREFIXES, BUDGETS, eos, beams=beams, length_penalty=length_penalty, use_cache=use_cache
    )
    assert [f[0].ids for f in found] == model.generate(
        PREFIXES, BUDGETS, eos_id=eos, beams=beams, length_penalty=length_penalty
    )
    kinds = set()
    for hyps, prefix, n in zip(found, PREFIXES, BUDGETS):
        want = _reference_finished(model, prefix, n, eos, beams, length_penalty)
        assert [h.ids for h in hyps] == [toks for _, toks in want]
        assert [h.score for h in hyps] == pytest.approx([sc for sc, _ in want], abs=1e-4)
        for h in hyps:
            tail = [eos] if h.ended_with_eos else []
            assert h.ended_with_eos or len(h.ids) == n, "a hypothesis without <eos> must have used its whole budget"
            assert h.length == len(h.ids) + len(tail) and eos not in h.ids
            seq = torch.tensor([prefix + h.ids + tail])
            with torch.no_grad():
                logp = F.log_softmax(model(seq, prefix_len=torch.tensor([len(prefix)]))[0], -1)
            want_lp = sum(logp[len(prefix) - 1 + i, t].item() for i, t in enumerate(h.ids + tail))
            assert h.logprob == pytest.approx(want_lp, abs=1e-4)
            assert h.score == pytest.approx(h.logprob / h.length**length_penalty, rel=1e-12)
            kinds.add(h.ended_with_eos)
    assert kinds == {True, False}, "choose a case where some hypotheses end with <eos> and some run out of room"
    assert G.beam_search(model, [[1, 2], [1, 3, 2]], [0, 2], eos, beams=beams)[0] == []


def test_beam_differs_from_greedy_on_this_model():
    # otherwise the beam tests above could pass with beam search silently doing greedy
    model = make(seed=1, sharp=True)
    assert model.generate(PREFIXES, BUDGETS, eos_id=6, beams=3) != model.generate(PREFIXES, BUDGETS, eos_id=6)


def _sequence_logprob(model, prefix, cont, eos):
    seq = prefix + cont + [eos]
    with torch.no_grad():
        logits = model(torch.tensor([seq]), prefix_len=torch.tensor([len(prefix)]))[0]
    logp = F.log_softmax(logits, -1)
    return sum(float(logp[t - 1, seq[t]]) for t in range(len(prefix), len(seq)))


@pytest.mark.parametrize("eos", [4, 6])
def test_beam_search_finds_at_least_as_likely_as_greedy(eos):
    model = make(seed=3, sharp=True)
    greedy = model.generate(PREFIXES, 8, eos_id=eos)
    beam = model.generate(PREFIXES, 8, eos_id=eos, beams=4, length_penalty=0.0)
    compared = 0
    for p, g, b in zip(PREFIXES, greedy, beam):
        if len(g) < 8 and len(b) < 8:  # both ended with eos: compare full-sentence probabilities
            assert _sequence_logprob(model, p, b, eos) >= _sequence_logprob(model, p, g, eos) - 1e-4
            compared += 1
    assert compared >= 1


def test_generate_respects_max_len_and_restores_training_mode():
    model = make(seed=1, sharp=True, max_len=10)
    model.train()
    with pytest.warns(UserWarning, match="max_len"):
        out = model.generate([[1, 5, 2], [1, 4, 6, 7, 8, 2]], 20, eos_id=0)
    assert model.training
    assert all(len(p) + len(o) <= 10 for p, o in zip([[1, 5, 2], [1, 4, 6, 7, 8, 2]], out))
    with pytest.raises(ValueError, match="larger max_len"):
        model.generate([[1] * 10], 2, eos_id=EOS)


def test_generate_argument_errors():
    model = make()
    with pytest.raises(ValueError, match="one per sentence"):
        model.generate([[1, 2], [1, 2]], [3], eos_id=EOS)
    with pytest.raises(ValueError, match="start it with <bos>"):
        model.generate([[]], 3, eos_id=EOS)
    with pytest.raises(ValueError, match="vocab_size"):
        model.generate([[1, V]], 3, eos_id=EOS)
    with pytest.raises(ValueError, match="tokenizer's <eos> id"):
        model.generate([[1, 2]], 3, eos_id=V)
    with pytest.raises(ValueError, match="1 = greedy"):
        model.generate([[1, 2]], 3, eos_id=EOS, beams=0)
    with pytest.raises(TypeError, match="list of token-id lists"):
        model.generate([1, 2], 3, eos_id=EOS)
    assert model.generate([[1, 2]], 0, eos_id=EOS) == [[]]
