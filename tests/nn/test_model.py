"""helpers.nn.model: masks, attention paths, padding, parameter count, errors, precision (decoding: test_generate.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from helpers.nn import build_model
from helpers.nn.model import (
    DecoderOnlyTransformer,
    ModelConfig,
    build_attention_mask,
    sinusoidal_table,
)
from helpers.nn.variants import num_parameters, rms

V, EOS = 23, 3

# rotary positions (notebook 02's, the recipe's) and notebook 05's variants must pass the vanilla model's own tests:
# the same tests run on each
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

# sentences of different lengths; the generation tests in tests/nn/test_generate.py use them too
PREFIXES = [[1, 5, 9, 14, 2], [1, 7, 2], [1, 8, 11, 6, 4, 12, 10, 2], [1, 13, 2]]


def make(seed: int = 0, sharp: bool = False, **overrides) -> DecoderOnlyTransformer:
    """A tiny model. `sharp` widens the random weights so generation varies (GPT init gives near-uniform outputs)."""
    torch.manual_seed(seed)
    kwargs = dict(vocab_size=V, max_len=24, n_layer=2, n_head=4, d_model=32)
    kwargs.update(overrides)
    model = build_model(ModelConfig(**kwargs)).eval()
    if sharp:
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() > 1:
                    p.normal_(0.0, 0.35)
    return model


def as_explicit(model):
    """The same weights, attention computed by the written-out softmax instead of the fused kernel."""
    twin = build_model(replace(model.config, attention_kernel="explicit"))
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


def test_the_models_own_count_refuses_a_variant_and_names_the_count_that_takes_it():
    from helpers.nn import model as M

    plain = ModelConfig(vocab_size=10, max_len=5, n_layer=1, n_head=2, d_model=4)
    assert M.num_parameters(plain) == num_parameters(plain)
    with pytest.raises(ValueError, match=r"helpers.nn.variants.num_parameters"):
        M.num_parameters(replace(plain, attention="synthesizer"))


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
    """A field with no meaning is refused by ModelConfig; variant fields that combine into nothing, by build_model
    (and by TrainConfig, before any data is read)."""
    kwargs = dict(vocab_size=V, max_len=24, n_layer=2, n_head=4, d_model=32)
    kwargs.update(overrides)
    with pytest.raises(ValueError, match=pattern):
        build_model(ModelConfig(**kwargs))
    train_fields = {k: v for k, v in kwargs.items() if k in ("n_layer", "n_head", "d_model", "d_ff", "max_len")}
    variant = {"attention", "bottleneck_dim", "positional"} & set(overrides)
    if variant and set(overrides) <= {"attention", "bottleneck_dim", "positional", "n_layer"}:
        from helpers.training import config as TC

        tc_fields = {**train_fields, **{k: overrides[k] for k in variant}}
        tc_fields["positional"] = tc_fields.get("positional", "learned")
        with pytest.raises(ValueError, match=pattern):
            TC.preset_config("tiny", **{("positional" if k == "positional" else k): v for k, v in tc_fields.items()})


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
    with pytest.raises(TypeError, match="needs a ModelConfig"):
        build_model({"vocab_size": 10})


# ---------------------------------------------------------------------------------------------
# notebook 02's model, and the variants built on it by build_model


def test_rotary_positions_are_the_plain_models_and_train_as_the_variant_did_bit_for_bit():
    """Rotary positions moved from notebook 05's variants into notebook 02's model (the recipe's default). The plain
    model must be the variant it replaces, bit for bit: same parameters drawn in the same order, same logits, same
    cached generation; so the 15-minute scores measured with the variant stand for the default."""
    from helpers.nn.variants import VariantTransformer

    cfg = ModelConfig(vocab_size=V, max_len=24, n_layer=2, n_head=4, d_model=32, positional="rotary")
    assert cfg.variant_fields() == {} and type(build_model(cfg)) is DecoderOnlyTransformer
    torch.manual_seed(3)
    plain = DecoderOnlyTransformer(cfg).eval()
    torch.manual_seed(3)
    variant = VariantTransformer(cfg).eval()  # the variant's class still builds it (QK-norm + rotary uses it)
    assert plain.state_dict().keys() == variant.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), variant.state_dict().values()))
    x, plen = torch.randint(3, V, (3, 11)), torch.tensor([4, 7, 2])
    with torch.no_grad():
        assert torch.equal(plain(x, plen), variant(x, plen))
    assert plain.generate(PREFIXES, 6, eos_id=EOS, beams=2) == variant.generate(PREFIXES, 6, eos_id=EOS, beams=2)
    # control: the rotation is really there (no positions at all, same draws, scores differently)
    torch.manual_seed(3)
    unturned = build_model(replace(cfg, positional="none"))
    with torch.no_grad():
        assert (unturned.eval()(x, plen) - plain(x, plen)).abs().max() > 1e-4  # small: GPT init is near uniform


def test_the_rotation_is_the_one_the_15_minute_rotary_runs_trained_with():
    """Values of helpers.nn.variants.rotary at c167800 (the runs' code; the bit-for-bit comparison of two trained
    checkpoints is in RESULTS.md): a change to the rotation itself since then shows here."""
    from helpers.nn.model import rotary

    g = torch.Generator().manual_seed(0)
    out = rotary(torch.randn(1, 2, 5, 8, generator=g), torch.tensor([0, 1, 7, 40, 95]))
    then = {
        (0, 1, 4): [-0.814072, -1.514664, 0.440926, 0.534329, -1.527554, -0.219357, -0.216469, 0.788777],
        (0, 0, 2): [0.094435, -2.167242, -0.077794, 0.971955, 0.706141, -1.509402, -0.354323, 1.850571],
    }
    for index, values in then.items():
        torch.testing.assert_close(out[index], torch.tensor(values), atol=2e-6, rtol=0)


def test_the_rotary_base_sets_the_speeds_the_model_turns_by():
    """rotary_base reaches every layer (notebook 02's model and a variant's), as rotary(..., base) turns; the default is
    RoPE's 10,000, and a base that cannot give speeds below 1 radian per position is refused."""
    from helpers.nn.model import rotary

    torch.manual_seed(0)
    x, plen = torch.randint(4, V, (2, 12)), torch.tensor([5, 7])
    for fields in ({}, {"qk_norm": True}):  # the plain model, and a variant built on it
        default = build_model(replace(make(positional="rotary").config, **fields)).eval()
        slow = build_model(replace(default.config, rotary_base=1000.0)).eval()
        slow.load_state_dict(default.state_dict())
        assert default.config.rotary_base == 10000.0
        q, k = torch.randn(2, 4, 12, 8), torch.randn(2, 4, 12, 8)
        block = slow.blocks[0].attn
        inputs = (rms(q), rms(k)) if fields else (q, k)  # the variant: unit-RMS q and k first, then the rotation
        turned = block.rotate(q, k, None) if fields else block.turn(q, k, None, None)
        for got, x_in in zip(turned, inputs):  # queries and keys alike
            torch.testing.assert_close(got, rotary(x_in, torch.arange(12), 1000.0))
            assert (got - rotary(x_in, torch.arange(12))).abs().max() > 1e-2  # control: RoPE's speeds turn otherwise
        with torch.no_grad():  # control: the same weights turned at RoPE's speeds give other logits
            assert (default(x, plen) - slow(x, plen)).abs().max() > 1e-4
    for bad in (1.0, 0, True, "10000", float("inf"), float("nan")):
        with pytest.raises(ValueError, match="rotary_base must be a finite number above 1"):
            replace(default.config, rotary_base=bad)


def test_a_cached_rotary_step_without_its_positions_is_refused():
    """Positions None means 0, 1, ...: right for the first step, silently wrong for the next ones with rotary."""
    model = make(positional="rotary")
    block, cache = model.blocks[0], model.new_cache()[0]
    x = torch.randn(1, 4, 32)
    with torch.no_grad():
        block(x, None, cache)  # the first step: 0..3, the default
        step = torch.ones(1, 1, 1, 5, dtype=torch.bool)
        with pytest.raises(ValueError, match="needs the new tokens' positions"):
            block(x[:, :1], step, cache)
        block(x[:, :1], step, cache, torch.tensor([4]))  # with them: fine
    assert cache.k.shape[2] == 5


def test_rotary_turns_in_float32_at_least_and_float64_stays_exact():
    """bf16 angles would be a quarter radian off near position 90; float64 (notebook 02's exact checks) stays float64."""
    from helpers.nn.model import rotary

    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 1, 16, generator=g, dtype=torch.float64), torch.randn(1, 1, 1, 16, generator=g)
    k = k.double()

    def score(x, y, i, j):
        return float(rotary(x, torch.tensor([i])) @ rotary(y, torch.tensor([j])).mT)

    assert rotary(q, torch.tensor([5])).dtype == torch.float64
    assert abs(score(q, k, 95, 90) - score(q, k, 5, 0)) < 1e-12  # the distance alone, to float64's rounding
    x = torch.randn(1, 1, 96, 16, generator=g)
    for low, rounding in ((torch.bfloat16, 0.02), (torch.float16, 0.003)):  # a T4 autocasts q and k to fp16
        turned = rotary(x.to(low), torch.arange(96))
        assert turned.dtype == low
        exact = rotary(x.to(low).float(), torch.arange(96))
        assert (turned.float() - exact).abs().max() <= rounding  # only the output's own rounding (8 and 11 bits)
    # control: the angles of a head of 48 (the recipe's) rounded to bf16 are off by up to a quarter radian
    angle = torch.arange(96.0)[:, None] * 10000.0 ** (-torch.arange(0, 48, 2) / 48)  # (96, 24)
    assert (angle.bfloat16().float() - angle).abs().max() > 0.2


@pytest.mark.parametrize("name", [n for n in VARIANTS if n not in ("vanilla", "rotary")] + ["qk-norm", "zero-init"])
def test_the_plain_model_refuses_a_variants_fields_naming_build_model(name):
    fields = {**VARIANTS, "qk-norm": {"qk_norm": True}, "zero-init": {"zero_init": True}}[name]
    cfg = ModelConfig(**{**dict(vocab_size=V, max_len=24, n_layer=3, n_head=4, d_model=32), **fields})
    with pytest.raises(ValueError, match=r"names a research variant.*helpers.nn.build_model\(config\)"):
        DecoderOnlyTransformer(cfg)
    built = build_model(cfg)
    assert isinstance(built, DecoderOnlyTransformer) and type(built) is not DecoderOnlyTransformer


@pytest.mark.parametrize("fields", [{}, {"positional": "sinusoidal"}, {"activation": "gelu", "tie_weights": False}])
def test_build_model_builds_the_plain_class_for_notebook_02s_configurations(fields):
    cfg = ModelConfig(vocab_size=V, max_len=24, n_layer=2, n_head=4, d_model=32, **fields)
    assert type(build_model(cfg)) is DecoderOnlyTransformer and cfg.variant_fields() == {}
    torch.manual_seed(0)
    a = build_model(cfg)
    torch.manual_seed(0)
    b = DecoderOnlyTransformer(cfg)
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def model_source_problems(source: str) -> list[str]:
    """What breaks the layering of helpers/nn/model.py: an import of any helpers.nn module but generate, a
    Block.forward over 3 lines, a forward that returns a tuple. [] when none."""
    import ast

    tree, problems = ast.parse(source), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module not in ("generate",):
            if node.module is not None or any(a.name != "generate" for a in node.names):
                problems.append(f"imports .{node.module or ''} {[a.name for a in node.names]}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("helpers.nn"):
            problems.append(f"imports {node.module}")
        if isinstance(node, ast.ClassDef):
            for fn in node.body:
                if not (isinstance(fn, ast.FunctionDef) and fn.name == "forward"):
                    continue
                if node.name == "Block":
                    body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) else fn.body  # a docstring is no line
                    lines = sum(stmt.end_lineno - stmt.lineno + 1 for stmt in body)
                    if lines > 3:
                        problems.append(f"Block.forward has {lines} lines")
                for ret in ast.walk(fn):
                    if isinstance(ret, ast.Return) and isinstance(ret.value, (ast.Tuple, ast.IfExp)):
                        problems.append(f"{node.name}.forward returns {ast.unparse(ret.value)}")
    return problems


def test_the_model_imports_nothing_of_the_variants_and_no_forward_returns_a_tuple():
    from pathlib import Path

    from helpers.nn import model as M

    source = Path(M.__file__).read_text(encoding="utf-8")
    assert model_source_problems(source) == []
    # controls: each way the layering broke before
    assert model_source_problems(source + "\nfrom . import variants\n") != []
    assert model_source_problems(source + "\nfrom .variants import relu2\n") != []
    tuple_return = "class A:\n    def forward(self, x, w=False):\n        return (x, 1) if w else x\n"
    assert model_source_problems(tuple_return) != []
    long_block = (
        "class Block:\n    def forward(self, x):\n        a = x\n        b = a\n        c = b\n        return c\n"
    )
    assert model_source_problems(long_block) != []


def test_attention_keeps_its_last_weights_when_asked_and_computes_the_same_output():
    model = make()
    attn = model.blocks[0].attn
    x = torch.randn(2, 6, 32)
    mask = build_attention_mask(6, torch.tensor([2, 3]))
    plain = attn(x, mask)
    assert attn.last_weights is None  # not asked: the fused kernel, nothing kept
    attn.keep_weights = True
    kept = attn(x, mask)
    assert torch.allclose(plain, kept, atol=1e-6) and attn.last_weights.shape == (2, 4, 6, 6)
    assert torch.allclose(attn.last_weights.sum(-1), torch.ones(2, 4, 6), atol=1e-6)
    maps = model.attention_maps(torch.randint(0, V, (2, 6)), torch.tensor([2, 3]))
    assert all(not b.attn.keep_weights and b.attn.last_weights is None for b in model.blocks)  # asked, then let go
    assert [tuple(m.shape) for m in maps] == [(2, 4, 6, 6)] * 2


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
    blk.attn.keep_weights = True
    blk.attn(hx)
    wx = blk.attn.last_weights
    blk.attn(hy)
    wy = blk.attn.last_weights
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
