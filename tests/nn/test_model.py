"""helpers.nn.model: masks, attention paths, padding, cached generation, parameter count, errors, precision."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from helpers.nn import generate as G
from helpers.nn.model import (
    DecoderOnlyTransformer,
    ModelConfig,
    build_attention_mask,
    num_parameters,
    sinusoidal_table,
)

V, EOS = 23, 3

# notebook 05's variants must pass the vanilla model's own tests: the same tests run on each
VARIANTS = {
    "vanilla": {},
    "synthesizer": {"attention": "synthesizer"},
    "bottleneck": {"bottleneck_dim": 4},
    "bottleneck-3-layers": {"bottleneck_dim": 6, "n_layer": 3, "positional": "sinusoidal"},
    "rotary": {"positional": "rotary"},
    "alibi": {"positional": "alibi"},
    "no-positions": {"positional": "none"},
}
variant = pytest.mark.parametrize("variant", list(VARIANTS.values()), ids=list(VARIANTS))


def make(seed: int = 0, sharp: bool = False, **overrides) -> DecoderOnlyTransformer:
    """A tiny model. `sharp` widens the random weights so generation varies (GPT init gives near-uniform outputs)."""
    torch.manual_seed(seed)
    kwargs = dict(vocab_size=V, max_len=24, n_layer=2, n_head=4, d_model=32)
    kwargs.update(overrides)
    model = DecoderOnlyTransformer(ModelConfig(**kwargs)).eval()
    if sharp:
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() > 1:
                    p.normal_(0.0, 0.35)
    return model


def as_explicit(model):
    """The same weights, attention computed by the written-out softmax instead of the fused kernel."""
    twin = DecoderOnlyTransformer(replace(model.config, attention_kernel="explicit"))
    twin.load_state_dict(model.state_dict())
    return twin.train(model.training)


def test_build_attention_mask_hand_example():
    causal = build_attention_mask(4)
    assert causal.shape == (1, 1, 4, 4) and causal.dtype == torch.bool
    assert causal[0, 0].int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    prefix = build_attention_mask(5, torch.tensor([3, 1]))
    assert prefix.shape == (2, 1, 5, 5)
    assert prefix[0, 0].int().tolist() == [
        [1, 1, 1, 0, 0],  # source positions see the whole source, both ways
        [1, 1, 1, 0, 0],
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],  # target positions: whole source + earlier targets
        [1, 1, 1, 1, 1],
    ]
    assert torch.equal(prefix[1, 0], build_attention_mask(5)[0, 0])  # a prefix of just <bos> is plain causal


@variant
def test_causality_future_token_changes_no_earlier_logit(variant):
    model = make(sharp=True, **variant)
    x = torch.randint(0, V, (2, 10))
    y = x.clone()
    y[:, 6] = (y[:, 6] + 1) % V
    a, b = model(x), model(y)
    assert torch.allclose(a[:, :6], b[:, :6], atol=1e-6)
    assert not torch.allclose(a[:, 6:], b[:, 6:], atol=1e-4)  # and the change does reach later positions


@variant
def test_prefix_visibility(variant):
    model = make(sharp=True, **variant)  # sharp: the bottleneck's small initial latents would hide the effect
    x = torch.randint(4, V, (1, 10))
    y = x.clone()
    y[0, 4] = (y[0, 4] + 1) % V  # a source word late in the source
    plen = torch.tensor([6])
    with_prefix = (model(x, plen) - model(y, plen)).abs().amax(-1)[0]
    causal_only = (model(x) - model(y)).abs().amax(-1)[0]
    assert (with_prefix[:4] > 1e-4).all(), "earlier source positions must see a later source word"
    assert (causal_only[:4] < 1e-6).all(), "a causal mask hides later source words from earlier ones"
    # a target token still cannot leak backwards under the prefix mask
    z = x.clone()
    z[0, 8] = (z[0, 8] + 1) % V
    diff = (model(x, plen) - model(z, plen)).abs().amax(-1)[0]
    assert (diff[:8] < 1e-6).all() and diff[8] > 1e-4


@pytest.mark.parametrize("positional", ["learned", "rotary", "alibi"])
@pytest.mark.parametrize("prefix", [None, [3, 7, 10]])
def test_sdpa_matches_explicit_attention(prefix, positional):
    model = make(sharp=True, positional=positional)
    x = torch.randint(0, V, (3, 10))
    plen = None if prefix is None else torch.tensor(prefix)
    fast = model(x, plen)
    slow = as_explicit(model)(x, plen)
    assert torch.allclose(fast, slow, atol=1e-5)


def test_attention_maps_are_masked_distributions():
    model = make()
    x = torch.randint(0, V, (2, 7))
    plen = torch.tensor([3, 5])
    maps = model.attention_maps(x, plen)
    assert len(maps) == 2 and maps[0].shape == (2, 4, 7, 7)
    mask = build_attention_mask(7, plen)
    for w in maps:
        assert torch.allclose(w.sum(-1), torch.ones(2, 4, 7), atol=1e-6)
        assert (w.masked_select(~mask.expand_as(w)) == 0).all()
    # the maps come from the same computation as forward: rebuilding layer 0's output from them agrees
    blk = model.blocks[0]
    h = blk.ln1(model.embed(x, torch.arange(7)))
    q, k, v = blk.attn.qkv(h).split(32, dim=2)
    v = v.view(2, 7, 4, 8).transpose(1, 2)
    rebuilt = blk.attn.proj((maps[0] @ v).transpose(1, 2).reshape(2, 7, 32))
    assert torch.allclose(rebuilt, blk.attn(h, mask), atol=1e-6)


@variant
@pytest.mark.parametrize("use_prefix", [False, True])
def test_right_padding_never_changes_real_positions(use_prefix, variant):
    model = make(sharp=True, **variant)
    lengths = [5, 9, 7]
    seqs = [torch.randint(4, V, (n,)) for n in lengths]
    padded = torch.zeros(3, 12, dtype=torch.long)  # pad id 0, and a couple of extra columns
    for i, s in enumerate(seqs):
        padded[i, : len(s)] = s
    padded2 = padded.clone()
    for i, n in enumerate(lengths):
        padded2[i, n:] = torch.randint(0, V, (12 - n,))  # any padding content
    plen = torch.tensor([2, 4, 3]) if use_prefix else None
    a, b = model(padded, plen), model(padded2, plen)
    for i, (s, n) in enumerate(zip(seqs, lengths)):
        alone = model(s[None], None if plen is None else plen[i : i + 1])[0]
        assert torch.allclose(a[i, :n], alone, atol=1e-5)
        assert torch.allclose(b[i, :n], alone, atol=1e-5)


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


PREFIXES = [[1, 5, 9, 14, 2], [1, 7, 2], [1, 8, 11, 6, 4, 12, 10, 2], [1, 13, 2]]


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


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"positional": "sinusoidal"},
        {"tie_weights": False},
        {"d_ff": 48, "n_layer": 3, "n_head": 2},
        {"vocab_size": 101, "max_len": 7, "d_model": 16, "n_head": 1, "positional": "sinusoidal", "tie_weights": False},
        *VARIANTS.values(),
        {"attention": "synthesizer", "bottleneck_dim": 5, "n_layer": 4, "tie_weights": False},
    ],
)
def test_num_parameters_formula(overrides):
    model = make(**overrides)
    assert num_parameters(model.config) == sum(p.numel() for p in model.parameters())


def test_num_parameters_by_hand():
    # V=10, C=4, F=16, L=1, max_len=5, learned, tied:
    # 40 tok + 20 pos + (4*12+12 + 16+4) qkv/proj + (4*16+16 + 16*4+4) ffn + 16 LNs + 8 final LN
    cfg = ModelConfig(vocab_size=10, max_len=5, n_layer=1, n_head=2, d_model=4)
    assert num_parameters(cfg) == 40 + 20 + 80 + 148 + 16 + 8


@variant
def test_overfits_one_batch(variant):
    torch.manual_seed(0)
    model = make(**variant)
    model.train()
    x = torch.randint(4, V, (4, 12))
    plen = torch.tensor([4, 5, 3, 6])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(150):
        logits = model(x, plen)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 2.5 and losses[-1] < 0.1 * losses[0]


def _autocast_or_skip(dtype):
    model = make(sharp=False)
    x = torch.randint(0, V, (2, 9))
    plen = torch.tensor([3, 5])
    ref = model(x, plen)
    try:
        with torch.autocast("cpu", dtype=dtype):
            out = model(x, plen)
            out_causal = model(x)
    except (RuntimeError, NotImplementedError) as err:
        pytest.skip(f"torch {torch.__version__} has no CPU autocast for {dtype}: {err}")
    return ref, out, out_causal


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_forward_cpu(dtype):
    ref, out, out_causal = _autocast_or_skip(dtype)
    assert torch.isfinite(out).all() and torch.isfinite(out_causal).all()
    assert (out.float() - ref).abs().max() < 0.1  # close to fp32, not merely finite


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (fp16 autocast as on a T4)")
def test_fp16_autocast_cuda_and_generate():
    model = make(sharp=True).cuda()
    x = torch.randint(0, V, (3, 11), device="cuda")
    plen = torch.tensor([3, 5, 11], device="cuda")
    ref = model(x, plen)
    with torch.autocast("cuda", dtype=torch.float16):
        out = model(x, plen)
        gen = model.generate(PREFIXES, 5, eos_id=EOS)
    assert torch.isfinite(out).all() and (out.float() - ref).abs().max() < 0.2
    assert all(len(g) <= 5 for g in gen)
    assert model.generate(PREFIXES, 5, eos_id=EOS) == model.generate(PREFIXES, 5, eos_id=EOS, use_cache=False)


def test_positional_switch():
    learned = make()
    sinus = make(positional="sinusoidal")
    assert "pos_emb.weight" in dict(learned.named_parameters())
    assert not any("pos" in n for n, _ in sinus.named_parameters())
    assert "pos_table" not in sinus.state_dict()  # rebuilt from the config, not saved
    table = sinusoidal_table(6, 4)
    for pos in range(6):
        for i in range(2):
            angle = pos / 10000 ** (2 * i / 4)
            assert math.isclose(table[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(table[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)
    # positions matter: with no positions the last token could not tell "a b c" from "b a c"
    for model in (learned, sinus):
        x = torch.tensor([[5, 6, 7, 8]])
        y = torch.tensor([[6, 5, 7, 8]])
        assert not torch.allclose(model(x)[0, -1], model(y)[0, -1], atol=1e-5)


def test_weight_tying():
    tied, untied = make(), make(tie_weights=False)
    assert tied.lm_head.weight is tied.tok_emb.weight
    assert untied.lm_head.weight is not untied.tok_emb.weight
    assert num_parameters(untied.config) - num_parameters(tied.config) == V * 32
    logits = tied(torch.tensor([[1, 2, 3]]))
    h = tied.ln_f(tied.blocks[1](tied.blocks[0](tied.embed(torch.tensor([[1, 2, 3]]), torch.arange(3)))))
    assert torch.allclose(logits, h @ tied.tok_emb.weight.T, atol=1e-6)


def test_config_round_trip_and_defaults():
    cfg = ModelConfig(vocab_size=10, max_len=8, n_layer=1, n_head=2, d_model=8, positional="sinusoidal")
    assert cfg.d_ff == 32 and cfg.head_dim == 4
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown ModelConfig fields.*Remove the extra keys"):
        ModelConfig.from_dict({**cfg.to_dict(), "flash": True})
    with pytest.raises(ValueError, match="attention_kernel='flash' is not known"):
        ModelConfig(vocab_size=10, max_len=8, n_layer=1, n_head=2, d_model=8, attention_kernel="flash")


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        (
            {"d_model": 30, "n_head": 4},
            r"d_model=30 is not divisible by n_head=4.*Choose n_head from \[1, 2, 3, 5, 6, 10, 15, 30\]",
        ),
        ({"positional": "rope"}, r"positional='rope' is not known: choose one of"),
        ({"attention": "linear"}, r"attention='linear' is not known: choose one of"),
        ({"positional": "rotary", "d_model": 12, "n_head": 4}, r"rotary positions turn pairs of channels"),
        ({"attention": "synthesizer", "positional": "alibi"}, r"no query-key dot product"),
        ({"bottleneck_dim": 0}, r"bottleneck_dim must be a whole number of latents"),
        ({"bottleneck_dim": 25}, r"between 1 and max_len=24"),
        ({"bottleneck_dim": 4, "n_layer": 1}, r"needs n_layer >= 2"),
        ({"bottleneck_dim": 4, "positional": "rotary"}, r"latents have none"),
        ({"attention_kernel": "linear"}, r"attention_kernel='linear' is not known: choose one of"),
        ({"n_layer": 0}, r"n_layer must be a positive whole number"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\).*use 0.0"),
        (
            {"d_model": 5, "n_head": 1, "positional": "sinusoidal"},
            r"d_model must be even.*d_model=6 or positional='learned'",
        ),
        ({"d_ff": 0}, r"d_ff must be a positive whole number or None"),
    ],
)
def test_config_errors(overrides, pattern):
    kwargs = dict(vocab_size=V, max_len=24, n_layer=2, n_head=4, d_model=32)
    kwargs.update(overrides)
    with pytest.raises(ValueError, match=pattern):
        ModelConfig(**kwargs)


def test_forward_errors_say_what_to_do():
    model = make()
    with pytest.raises(ValueError, match=r"sequence length 25 exceeds max_len=24: truncate.*larger max_len"):
        model(torch.zeros(1, 25, dtype=torch.long))
    with pytest.raises(TypeError, match=r"integer token ids.*input_ids.long\(\)"):
        model(torch.zeros(1, 5))
    with pytest.raises(ValueError, match=r"shape \(B, T\).*unsqueeze\(0\)"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 22\].*vocab_size"):
        model(torch.tensor([[1, V]]))
    with pytest.raises(ValueError, match=r"token ids must lie"):
        model(torch.tensor([[1, -1]]))
    x = torch.zeros(2, 6, dtype=torch.long)
    with pytest.raises(ValueError, match=r"prefix_len values must lie in \[1, 6\].*count those tokens"):
        model(x, torch.tensor([0, 3]))
    with pytest.raises(ValueError, match=r"prefix_len values must lie in \[1, 6\]"):
        model(x, torch.tensor([7, 3]))
    with pytest.raises(ValueError, match=r"shape \(2,\), one prefix length per row.*got \(2, 1\)"):
        model(x, torch.tensor([[3], [3]]))
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        model(x, torch.tensor([3, 3, 3]))
    with pytest.raises(TypeError, match=r"prefix_len.long\(\)"):
        model(x, torch.tensor([3.0, 3.0]))
    with pytest.raises(TypeError, match=r"torch.full\(\(B,\), n\)"):
        model(x, 3)
    with pytest.raises(TypeError, match="needs a ModelConfig"):
        DecoderOnlyTransformer({"vocab_size": 10})


def test_dropout_is_used_in_training_only():
    model = make(dropout=0.3)
    x = torch.randint(0, V, (2, 8))
    assert torch.equal(model(x), model(x))  # eval: deterministic
    model.train()
    assert not torch.equal(model(x), model(x))


def test_bottleneck_latents_spread_over_the_block():
    """Token 9 must reach position 12 (through the latent whose horizon is 12). With the course's horizons
    0, 1, ..., m-1 no latent reads past position m-1, and position 12 could not see token 9 at all."""
    from helpers.nn import variants

    assert variants.latent_horizons(4, 24).tolist() == [0, 6, 12, 18]
    model = make(sharp=True, bottleneck_dim=4)
    x = torch.randint(4, V, (1, 16))
    y = x.clone()
    y[0, 9] = (y[0, 9] + 1) % V
    diff = (model(x) - model(y)).abs().amax(-1)[0]
    assert (diff[:9] < 1e-6).all() and diff[12] > 1e-4 and diff[10] < 1e-6  # 10, 11 see only horizons 0 and 6
    model.bottleneck.horizons = torch.arange(4)  # the course's horizons: still causal, but 9 reaches no latent
    diff = (model(x) - model(y)).abs().amax(-1)[0]
    assert (diff[:9] < 1e-6).all() and (diff[10:] < 1e-6).all()


def test_synthesizer_scores_come_from_the_query_alone():
    """Changing an earlier token's content changes the values read, not where a later query looks."""
    model = make(attention="synthesizer")
    x = torch.randint(4, V, (1, 8))
    y = x.clone()
    y[0, 2] = (y[0, 2] + 1) % V
    blk = model.blocks[0]
    hx, hy = (blk.ln1(model.embed(t, torch.arange(8))) for t in (x, y))
    _, wx = blk.attn(hx, return_weights=True)
    _, wy = blk.attn(hy, return_weights=True)
    assert torch.allclose(wx[:, :, 3:], wy[:, :, 3:]) and not torch.allclose(wx[:, :, 2], wy[:, :, 2])
    assert torch.allclose(wx.sum(-1), torch.ones(1, 4, 8)) and (wx.triu(1) == 0).all()


def _branches_and_lines(source: str) -> tuple[int, int]:
    """Branch points (if, conditional expressions, match, loops, and/or chains) and lines of a function's body,
    its docstring left out."""
    import ast
    import textwrap

    fn = ast.parse(textwrap.dedent(source)).body[0]
    body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else fn.body
    kinds = (ast.If, ast.IfExp, ast.Match, ast.For, ast.While, ast.BoolOp, ast.Try)
    branches = sum(isinstance(node, kinds) for stmt in body for node in ast.walk(stmt))
    return branches, body[-1].end_lineno - body[0].lineno + 1


def test_the_attention_forward_is_short_and_has_at_most_three_branches():
    """One architecture read top to bottom: notebook 05's variants are modules chosen when the model is built, not
    branches inside the forward pass (nanoGPT's attention forward: about 15 lines, one if)."""
    import inspect

    from helpers.nn.model import SelfAttention

    branches, lines = _branches_and_lines(inspect.getsource(SelfAttention.forward))
    assert branches <= 3 and lines <= 20, f"SelfAttention.forward: {branches} branches, {lines} lines"
    # the control: the forward pass before the variants became modules (two of its 19 branch points shown)
    planted = (
        "def forward(self, x, mask=None):\n    if self.qk_norm:\n        x = x\n"
        "    if self.positional == 'rotary':\n        x = x\n    y = x if mask is None else x\n"
        "    return (y, 1) if self.w else y\n"
    )
    assert _branches_and_lines(planted) == (4, 6)
