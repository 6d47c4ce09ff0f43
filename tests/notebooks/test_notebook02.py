"""Notebook 02: its checks catch the mistakes they name, and its model is helpers.nn.model's model.

The notebook is executed once in-process (quick mode). Each check cell is then re-run with one
deliberately buggy implementation swapped into the namespace and must raise AssertionError; with the
notebook's own implementation it must pass. Finally the notebook's model, masks, positions, parameter
count and greedy decoding are compared with helpers.nn.model.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers.course import exercises
from helpers.course.notebooks import code_cells, exec_cells, read_py
from helpers.nn import model as pkg
from tests.solved import reads_solved, solved

pytestmark = [pytest.mark.notebook, reads_solved("02")]  # every test here reads the solved notebook's run

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "solutions" / "02_transformer_from_scratch.py"


@pytest.fixture(scope="module")
def nb():
    cells = code_cells(NOTEBOOK)
    ns = solved("02").namespace  # every cell, and full marks for the solutions
    return cells, ns


def check_cell(cells, check_name):
    """The check cell of ``check_name``: the one defining it, or (a check split into a probe and a verify,
    helpers.course.probes) the one defining ``verify_<name>``."""
    verify = "verify_" + check_name.removeprefix("check_")
    found = [
        c for c in cells if "check" in c.tags and (f"def {check_name}(" in c.source or f"def {verify}(" in c.source)
    ]
    assert len(found) == 1, f"expected one check cell defining {check_name}, found {len(found)}"
    return found[0]


def rerun_check(nb, check_name, **swaps):
    """Re-execute the check cell that defines `check_name`, with names in the namespace replaced."""
    cells, ns = nb
    env = dict(ns)
    env.update(swaps)
    exec_cells([check_cell(cells, check_name)], env, name="notebook 02")


# ---------------------------------------------------------------------------------------------
# buggy implementations, one per mistake a check should catch


def attention_softmax_wrong_dim(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(dim=-2)
    return w @ v, w


def attention_no_scale(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(dim=-1)
    return w @ v, w


def attention_mask_after_softmax(q, k, v, mask=None):
    w = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(dim=-1)
    if mask is not None:
        w = w.masked_fill(~mask, 0.0)
    return w @ v, w


def attention_mask_zero_not_minus_inf(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    w = scores.softmax(dim=-1)
    return w @ v, w


def sinusoidal_sin_cos_swapped(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.cos(pos * freq)
    table[:, 1::2] = torch.sin(pos * freq)
    return table


def _table(max_len, d_model, *, exponent=1.0, start=0, sign=1.0, interleaved=True):
    """The sinusoidal table with one thing changed (the defaults give the right table)."""
    pos = torch.arange(start, start + max_len, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-exponent * math.log(10000.0) / d_model))
    sin, cos = torch.sin(sign * pos * freq), torch.cos(sign * pos * freq)
    if interleaved:
        return torch.stack((sin, cos), dim=-1).flatten(-2)
    return torch.cat((sin, cos), dim=-1)


def sinusoidal_exponent_halved(max_len, d_model):  # wavelengths only up to 100 * 2 pi
    return _table(max_len, d_model, exponent=0.5)


def sinusoidal_from_position_one(max_len, d_model):
    return _table(max_len, d_model, start=1)


def sinusoidal_turning_backwards(max_len, d_model):
    return _table(max_len, d_model, sign=-1.0)


def sinusoidal_side_by_side(max_len, d_model):
    return _table(max_len, d_model, interleaved=False)


def sinusoidal_speeds_over_max_len(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / max_len))
    return torch.stack((torch.sin(pos * freq), torch.cos(pos * freq)), dim=-1).flatten(-2)


def causal_mask_transposed(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool))


def causal_mask_without_self(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)


def prefix_mask_on_queries(T, prefix_len):
    in_prefix = torch.arange(T)[None, :] < prefix_len[:, None]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    return (causal[None] | in_prefix[:, :, None])[:, None]  # source queries see everything: leaks the target


def prefix_mask_causal_only(T, prefix_len):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None].expand(len(prefix_len), 1, T, T)


def labels_not_shifted(ids, prefix_len, pad_id=0):
    labels = ids.clone()
    labels[torch.arange(ids.size(1))[None, :] < prefix_len[:, None]] = -100
    labels[labels == pad_id] = -100
    return labels


def labels_include_source(ids, prefix_len, pad_id=0):
    labels = torch.full_like(ids, -100)
    labels[:, :-1] = ids[:, 1:]
    labels[labels == pad_id] = -100
    return labels


def labels_keep_padding(ids, prefix_len, pad_id=0):
    labels = torch.full_like(ids, -100)
    labels[:, :-1] = ids[:, 1:]
    labels[torch.arange(1, ids.size(1) + 1)[None, :] < prefix_len[:, None]] = -100
    return labels


def count_without_biases(cfg):
    V, C, F_, L = cfg.vocab_size, cfg.d_model, cfg.d_ff, cfg.n_layer
    positions = cfg.max_len * C if cfg.positional == "learned" else 0
    return V * C + positions + L * (4 * C * C + 2 * C * F_ + 4 * C) + 2 * C


def count_with_untied_head(cfg):
    V, C, F_, L = cfg.vocab_size, cfg.d_model, cfg.d_ff, cfg.n_layer
    per_block = (3 * C * C + 3 * C) + (C * C + C) + (C * F_ + F_ + F_ * C + C) + 4 * C
    positions = cfg.max_len * C if cfg.positional == "learned" else 0
    return 2 * V * C + positions + L * per_block + 2 * C


def count_positions_always(cfg):
    V, C, F_, L = cfg.vocab_size, cfg.d_model, cfg.d_ff, cfg.n_layer
    per_block = (3 * C * C + 3 * C) + (C * C + C) + (C * F_ + F_ + F_ * C + C) + 4 * C
    return V * C + cfg.max_len * C + L * per_block + 2 * C


def count_one_qkv_per_head(cfg):  # heads counted as if each had its own full-width q/k/v
    V, C, F_, L, H = cfg.vocab_size, cfg.d_model, cfg.d_ff, cfg.n_layer, cfg.n_head
    per_block = H * (3 * C * C + 3 * C) + (C * C + C) + (C * F_ + F_ + F_ * C + C) + 4 * C
    positions = cfg.max_len * C if cfg.positional == "learned" else 0
    return V * C + positions + L * per_block + 2 * C


def count_d_ff_assumed_4c(cfg):
    V, C, L = cfg.vocab_size, cfg.d_model, cfg.n_layer
    per_block = (3 * C * C + 3 * C) + (C * C + C) + (8 * C * C + 5 * C) + 4 * C
    positions = cfg.max_len * C if cfg.positional == "learned" else 0
    return V * C + positions + L * per_block + 2 * C


def make_buggy_classes(ns):
    """Subclasses of the notebook's own modules, each with one mistake."""
    MHA, FFN, Block, Transformer = ns["MultiHeadAttention"], ns["FeedForward"], ns["Block"], ns["Transformer"]

    class MergeWithoutTranspose(MHA):
        def merge_heads(self, t):
            B, nh, T, hs = t.shape
            return t.reshape(B, T, nh * hs)  # interleaves positions and heads

    class SplitWithoutTranspose(MHA):
        def split_heads(self, t):
            B, T, C = t.shape
            return t.reshape(B, self.n_head, T, C // self.n_head)

    class ReluFFN(FFN):
        def forward(self, x):
            return self.proj(F.relu(self.fc(x)))

    class NoActivationFFN(FFN):
        def forward(self, x):
            return self.proj(self.fc(x))

    class NoResidual(Block):
        def forward(self, x, mask=None):
            x = self.attn(self.ln1(x), mask)
            return self.ffn(self.ln2(x))

    class PostLN(Block):
        def forward(self, x, mask=None):
            x = self.ln1(x + self.attn(x, mask))
            return self.ln2(x + self.ffn(x))

    class NormOnOutput(Block):
        def forward(self, x, mask=None):
            x = x + self.ln1(self.attn(x, mask))
            return x + self.ln2(self.ffn(x))

    class Parallel(Block):  # the feed-forward reads the stream from before attention's update
        def forward(self, x, mask=None):
            return x + self.attn(self.ln1(x), mask) + self.ffn(self.ln2(x))

    class MaskDropped(Block):
        def forward(self, x, mask=None):
            x = x + self.attn(self.ln1(x))
            return x + self.ffn(self.ln2(x))

    class FeedForwardFirst(Block):
        def forward(self, x, mask=None):
            x = x + self.ffn(self.ln2(x))
            return x + self.attn(self.ln1(x), mask)

    class FinalNorm(Block):  # a LayerNorm on the stream on the way out
        def forward(self, x, mask=None):
            x = x + self.attn(self.ln1(x), mask)
            return self.ln2(x + self.ffn(self.ln2(x)))

    class NoPositions(Transformer):
        def embed(self, ids, start=0):
            return self.tok_emb(ids)

    class Untied(Transformer):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.lm_head.weight = nn.Parameter(self.tok_emb.weight.detach().clone())

    return locals()


def make_buggy_caches(ns):
    attention, causal_mask = ns["attention"], ns["causal_mask"]

    def run(model, new_ids, cache, start, store=True, prefix_causal=False):
        x = model.embed(new_ids, start)
        for layer, block in enumerate(model.blocks):
            attn = block.attn
            q, k, v = (attn.split_heads(t) for t in attn.qkv(block.ln1(x)).chunk(3, dim=-1))
            if layer < len(cache):
                k, v = torch.cat([cache[layer][0], k], dim=2), torch.cat([cache[layer][1], v], dim=2)
                if store:
                    cache[layer] = (k, v)
            else:
                cache.append((k, v))
            mask = causal_mask(k.size(2)) if prefix_causal and q.size(2) == k.size(2) else None  # the prefix step
            y, _ = attention(q, k, v, mask)
            x = x + attn.proj(attn.merge_heads(y))
            x = x + block.ffn(block.ln2(x))
        return model.lm_head(model.ln_f(x))

    def positions_restart_at_zero(model, new_ids, cache):
        return run(model, new_ids, cache, start=0)

    def cache_never_grows(model, new_ids, cache):
        start = cache[0][0].size(2) if cache else 0
        return run(model, new_ids, cache, start, store=False)

    def off_by_one_position(model, new_ids, cache):
        start = cache[0][0].size(2) + 1 if cache else 0
        return run(model, new_ids, cache, start)

    def causal_prefix(model, new_ids, cache):
        start = cache[0][0].size(2) if cache else 0
        return run(model, new_ids, cache, start, prefix_causal=True)

    def recomputes_caching_no_keys(model, new_ids, cache):  # right logits; the "cache" holds the ids
        if not cache:
            cache += [new_ids.size(1), new_ids]
        else:
            cache[1] = torch.cat([cache[1], new_ids], dim=1)
        return model(cache[1], torch.tensor([cache[0]]))[:, -new_ids.size(1) :]

    def zeroes_the_model(model, new_ids, cache):  # every logit equal: a reference built from the model agrees
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
        return model.lm_head(model.ln_f(model.embed(new_ids, 0)))

    return locals()


# ---------------------------------------------------------------------------------------------
# the notebook's own implementations pass every check


def test_every_check_cell_passes_as_written(nb):
    cells, ns = nb
    checks = [c for c in cells if "check" in c.tags]
    assert len(checks) >= 12
    for cell in checks:
        exec_cells([cell], dict(ns), name="notebook 02")


@pytest.mark.parametrize(
    "check, name, buggy",
    [
        ("check_attention", "attention", attention_softmax_wrong_dim),
        ("check_attention", "attention", attention_no_scale),
        ("check_attention", "attention", attention_mask_after_softmax),
        ("check_attention", "attention", attention_mask_zero_not_minus_inf),
        ("check_sinusoidal", "sinusoidal_positions", sinusoidal_sin_cos_swapped),
        ("check_sinusoidal", "sinusoidal_positions", sinusoidal_exponent_halved),
        ("check_sinusoidal", "sinusoidal_positions", sinusoidal_from_position_one),
        ("check_sinusoidal", "sinusoidal_positions", sinusoidal_turning_backwards),
        ("check_sinusoidal", "sinusoidal_positions", sinusoidal_side_by_side),
        ("check_sinusoidal", "sinusoidal_positions", sinusoidal_speeds_over_max_len),
        ("check_causal_mask", "causal_mask", causal_mask_transposed),
        ("check_causal_mask", "causal_mask", causal_mask_without_self),
        ("check_prefix_lm_mask", "prefix_lm_mask", prefix_mask_on_queries),
        ("check_prefix_lm_mask", "prefix_lm_mask", prefix_mask_causal_only),
        ("check_labels", "make_labels", labels_not_shifted),
        ("check_labels", "make_labels", labels_include_source),
        ("check_labels", "make_labels", labels_keep_padding),
        ("check_parameter_count", "count_parameters", count_without_biases),
        ("check_parameter_count", "count_parameters", count_with_untied_head),
        ("check_parameter_count", "count_parameters", count_positions_always),
        ("check_parameter_count", "count_parameters", count_one_qkv_per_head),
        ("check_parameter_count", "count_parameters", count_d_ff_assumed_4c),
    ],
    ids=lambda v: v.__name__ if callable(v) else None,
)
def test_check_catches_buggy_function(nb, check, name, buggy):
    with pytest.raises(AssertionError):
        rerun_check(nb, check, **{name: buggy})


@pytest.mark.parametrize(
    "check, name, bug",
    [
        ("check_multi_head", "MultiHeadAttention", "MergeWithoutTranspose"),
        ("check_multi_head", "MultiHeadAttention", "SplitWithoutTranspose"),
        ("check_feed_forward", "FeedForward", "ReluFFN"),
        ("check_feed_forward", "FeedForward", "NoActivationFFN"),
        ("check_block", "Block", "NoResidual"),
        ("check_block", "Block", "PostLN"),
        ("check_block", "Block", "NormOnOutput"),
        ("check_block", "Block", "Parallel"),
        ("check_block", "Block", "MaskDropped"),
        ("check_block", "Block", "FeedForwardFirst"),
        ("check_block", "Block", "FinalNorm"),
        ("check_model", "Transformer", "NoPositions"),
        ("check_model", "Transformer", "Untied"),
    ],
)
def test_check_catches_buggy_module(nb, check, name, bug):
    buggy = make_buggy_classes(nb[1])[bug]
    with pytest.raises(AssertionError):
        rerun_check(nb, check, **{name: buggy})


def test_the_parameter_count_check_refuses_a_count_that_builds_the_model(nb):
    """Building the model and summing its tensors gives the right number, and still fails: it derives nothing."""

    def count_by_building(cfg):
        return sum(p.numel() for p in nb[1]["Transformer"](cfg).parameters())

    cfg = pkg.ModelConfig(vocab_size=20, max_len=8, n_layer=2, n_head=2, d_model=16)
    assert count_by_building(cfg) == nb[1]["count_parameters"](cfg)  # the right number
    with pytest.raises(AssertionError, match="built a module"):
        rerun_check(nb, "check_parameter_count", count_parameters=count_by_building)


def test_the_checks_of_the_derivation_exercises_accept_other_correct_solutions(nb):
    """2.1 (both parts) and 2.7 are checked by their properties, not by one way of writing them: other correct code
    passes."""

    def table_by_rotation(max_len, d_model):  # row by row, turning each pair as property 2 says
        speeds = [10000.0 ** (-2 * i / d_model) for i in range(d_model // 2)]
        rows = [[0.0, 1.0] * (d_model // 2)]
        for _ in range(max_len - 1):
            row = []
            for i, w in enumerate(speeds):
                a, b = rows[-1][2 * i], rows[-1][2 * i + 1]
                row += [a * math.cos(w) + b * math.sin(w), b * math.cos(w) - a * math.sin(w)]
            rows.append(row)
        return torch.tensor(rows)

    rerun_check(nb, "check_sinusoidal", sinusoidal_positions=table_by_rotation)

    def rotate_by_complex_numbers(x, positions):  # each pair a complex number, multiplied by e^(i p w)
        h = x.size(-1)
        speeds = 10000.0 ** (-torch.arange(h // 2, dtype=torch.float64) * 2 / h)
        turn = torch.polar(torch.ones(len(positions), h // 2, dtype=torch.float64), positions[:, None] * speeds)
        pairs = torch.view_as_complex(x.double().unflatten(-1, (h // 2, 2)).contiguous())
        return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)

    rerun_check(nb, "check_rotation", rotate_pairs=rotate_by_complex_numbers)

    class KeywordBlock(nb[1]["Block"]):  # sub-layers called with keyword arguments
        def forward(self, x, mask=None):
            h = x + self.attn(x=self.ln1(x), mask=mask)
            return h + self.ffn(x=self.ln2(h))

    rerun_check(nb, "check_block", Block=KeywordBlock)


def test_the_derivation_exercises_do_not_show_what_they_ask_for():
    """Issue 37, "no retyping": the student copy of 2.1, 2.7 and 2.9 states properties, not the formula or the lines."""
    copy = exercises.student_notebook(read_py(NOTEBOOK))
    text = "\n".join(cell.source for cell in copy.cells)
    shown = [
        "10000^{2i/d}",  # 2.1: the angle's formula, as LaTeX, as a docstring or as code
        "10000^(2i/d)",
        "10000 ** (2 * i / d)",
        "sin(p /",
        "\\sin(p",
        "a * cos - b * sin",  # 2.1, the rotation: the turned pair, as code or as a formula
        "x1 * cos",
        "\\cos(p\\,\\omega",
        "(cos pw",
        "x + attn(ln1(x))",  # 2.7: the two lines
        "x + ffn(ln2(x))",
        "self.attn(self.ln1(",
        "3C^2",  # 2.9: the counts, term by term
        "CF + F",
        "3 * C * C",
        "2 \\cdot 2C",
    ]
    found = [s for s in shown if s in text]
    assert not found, f"the student copy of notebook 02 shows {found}"
    assert "Exercise 2.1" in text and "Exercise 2.7" in text and "Exercise 2.9" in text  # the search has its target


def test_the_mask_exercises_answers_are_not_spelt_out_by_any_check():
    """2.4 and 2.5 ask which keys each query may see: no check cell (2.4's, 2.5's, 2.7's) writes the rule as code; the
    solved notebook does, in the solutions, so the search has its target."""
    rules = ["torch.tril(", ".tril()", "j <= i", "j < p", "<= i or"]
    solved = "\n".join(cell.source for cell in read_py(NOTEBOOK).cells)
    assert "torch.tril(" in solved
    copy = "\n".join(cell.source for cell in exercises.student_notebook(read_py(NOTEBOOK)).cells)
    found = [r for r in rules if r in copy]
    assert not found, f"the student copy of notebook 02 spells the mask rule: {found}"


def test_no_cell_of_the_copy_writes_question_1_9s_factor_or_the_pre_ln_stream():
    """Question 1.9 (notebook 01) asks by what the scores must be multiplied: 2.2's text names the question and its
    check's reference attention takes the scale from the package. 2.7 asks for the pre-LN block: its check compares
    the residual stream through the package too. The old copy wrote both (the formula with sqrt(d_k), the reference
    loop's `/ math.sqrt(d_k)`, `x + attn_out + ffn_out`, `stream = x + attn_out`)."""
    copy = "\n".join(cell.source for cell in exercises.student_notebook(read_py(NOTEBOOK)).cells)
    assert "check_inputs.attention_by_loops" in copy and "check_inputs.check_block_stream" in copy  # the targets
    told = [
        r"\\sqrt\{d_k\}",  # LaTeX
        r"(math|torch|np)\.sqrt\(\s*(d_k|q\.size\(-1\)|q\.shape\[-1\]|len\(q\[0\]\))\s*\)",  # code
        r"rsqrt",
        r"\*\*\s*-?0\.5",
        r"x\s*\+\s*attn_out\s*\+\s*ffn_out",
        r"stream\s*=\s*x\s*\+\s*attn_out",
        r"layer_norm_by_hand\(\s*stream",
    ]
    found = [m.group(0) for pattern in told for m in [re.search(pattern, copy)] if m]
    assert not found, f"the student copy of notebook 02 tells: {found}"


@pytest.mark.parametrize(
    "bug",
    [
        "positions_restart_at_zero",
        "cache_never_grows",
        "off_by_one_position",
        "causal_prefix",
        "recomputes_caching_no_keys",  # the last two passed before the check read the cache and kept the weights
        "zeroes_the_model",
    ],
)
def test_kv_cache_check_catches_drift(nb, bug):
    buggy = make_buggy_caches(nb[1])[bug]
    with pytest.raises(AssertionError):  # the check builds its own models (zeroes_the_model zeroes one of those)
        rerun_check(nb, "check_kv_cache", forward_cached=buggy)


def test_overfit_check_catches_a_model_that_does_not_learn(nb):
    with pytest.raises(AssertionError):
        rerun_check(nb, "check_overfit", losses=[3.3] * 50 + [1.0] * 50)
    with pytest.raises(AssertionError):  # starts low: labels leaking
        rerun_check(nb, "check_overfit", losses=[0.2] * 10 + [0.001] * 10)


def test_package_parity_check_can_fail(nb):
    _, ns = nb
    other = ns["to_package"](ns["model"])
    with torch.no_grad():
        other.blocks[0].ffn.fc.bias.add_(1e-3)  # a tiny difference must be seen
    with pytest.raises(AssertionError):
        ns["check_same_as_package"](ns["model"], other)


# ---------------------------------------------------------------------------------------------
# defined once: the notebook and helpers.nn.model agree


def _random_nb_model(ns, **overrides):
    kwargs = dict(vocab_size=len(ns["vocab"]), max_len=16, n_layer=2, n_head=4, d_model=32)
    kwargs.update(overrides)
    torch.manual_seed(11)
    m = ns["Transformer"](pkg.ModelConfig(**kwargs))
    with torch.no_grad():  # weights far from the init, and non-trivial LayerNorms, so every path matters
        for p in m.parameters():
            p.normal_(0.0, 0.2)  # 0.3 squared by ReLU² saturates: every greedy output one token
    return m.eval()


@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rotary"])
def test_same_logits_as_helpers_model(nb, positional):
    _, ns = nb
    m = _random_nb_model(ns, positional=positional)
    package = ns["to_package"](m)
    assert isinstance(package, pkg.DecoderOnlyTransformer)
    ids, plen = ns["ids"], ns["prefix_len"]
    with torch.no_grad():
        for pl in (plen, None):
            diff32 = (m(ids, pl) - package(ids, pl)).abs().max().item()
            assert diff32 < 1e-4
            diff64 = (m.double()(ids, pl) - package.double()(ids, pl)).abs().max().item()
            m.float(), package.float()
            assert diff64 <= 1e-6, f"{positional}, prefix_len={'given' if pl is not None else None}: {diff64:.2e}"


def test_trained_notebook_model_matches_helpers(nb):
    _, ns = nb
    package = ns["to_package"](ns["model"])
    with torch.no_grad():
        a = ns["model"].double()(ns["ids"], ns["prefix_len"])
        b = package.double()(ns["ids"], ns["prefix_len"])
    ns["model"].float()
    assert (a - b).abs().max().item() <= 1e-6
    # and the attention weights the notebook plots are the package's attention_maps
    with torch.no_grad():
        ns["model"](ns["ids"], ns["prefix_len"])
        maps = package.float().attention_maps(ns["ids"], ns["prefix_len"])
    for block, w in zip(ns["model"].blocks, maps):
        assert torch.allclose(block.attn.last_weights, w, atol=1e-5)


def test_to_package_fails_loudly_on_renamed_parameters(nb):
    _, ns = nb
    m = _random_nb_model(ns)
    m.blocks[0].register_parameter("extra", nn.Parameter(torch.zeros(1)))
    with pytest.raises(RuntimeError, match="extra"):
        ns["to_package"](m)


def test_greedy_translate_matches_helpers_generate(nb):
    _, ns = nb
    m = _random_nb_model(ns)
    package = ns["to_package"](m)
    V = len(ns["vocab"])
    torch.manual_seed(12)
    prefixes = [[ns["BOS"], *torch.randint(4, V, (n,)).tolist(), ns["SEP"]] for n in (1, 4, 2, 6)]
    ours = [ns["greedy_translate"](m, p, 7) for p in prefixes]
    uncached = [ns["greedy_translate"](m, p, 7, use_cache=False) for p in prefixes]
    assert ours == uncached
    assert package.generate(prefixes, 7, eos_id=ns["EOS"]) == ours
    assert len({tuple(o) for o in ours}) > 1


def test_masks_match_helpers(nb):
    _, ns = nb
    for T in (1, 4, 9):
        assert torch.equal(ns["causal_mask"](T), pkg.build_attention_mask(T)[0, 0])
        plen = torch.randint(1, T + 1, (5,))
        assert torch.equal(ns["prefix_lm_mask"](T, plen), pkg.build_attention_mask(T, plen))


def test_positions_and_parameter_count_match_helpers(nb):
    _, ns = nb
    assert torch.equal(ns["sinusoidal_positions"](12, 10), pkg.sinusoidal_table(12, 10))
    x, positions = torch.randn(2, 3, 7, 16), torch.tensor([0, 1, 2, 5, 17, 40, 95])
    torch.testing.assert_close(ns["rotate_pairs"](x, positions), pkg.rotary(x, positions))  # the package's rotation
    x64 = x.double()
    torch.testing.assert_close(ns["rotate_pairs"](x64, positions), pkg.rotary(x64, positions), atol=1e-12, rtol=0)
    for kw in [dict(), dict(positional="sinusoidal"), dict(positional="rotary"), dict(d_ff=40, n_layer=3),
               dict(vocab_size=7, n_head=1)]:  # fmt: skip
        cfg = pkg.ModelConfig(**{**dict(vocab_size=30, max_len=9, n_layer=2, n_head=2, d_model=16), **kw})
        assert ns["count_parameters"](cfg) == pkg.num_parameters(cfg)


def test_labels_and_loss_match_helpers_train(nb):
    train = pytest.importorskip("helpers.training.train")
    if not hasattr(train, "loss_fn"):
        pytest.skip("helpers.training.train.loss_fn is not there yet")
    _, ns = nb
    torch.manual_seed(13)
    logits = torch.randn(*ns["ids"].shape, len(ns["vocab"]))
    labels = ns["make_labels"](ns["ids"], ns["prefix_len"])
    assert torch.allclose(ns["lm_loss"](logits, labels), train.loss_fn(logits, labels), atol=1e-6)


def test_figures_saved(nb):
    from helpers import runtime

    for name in ("02_masks", "02_attention_weights", "02_overfit_loss"):
        for ext in ("pdf", "png"):
            assert (runtime.figures_dir() / f"{name}.{ext}").is_file(), f"{name}.{ext} was not saved"


def test_notebook_says_later_notebooks_import_helpers_model():
    text = NOTEBOOK.read_text()
    assert "from helpers.nn.model import DecoderOnlyTransformer" in text
    assert "Later notebooks import the same model from `helpers.nn.model`" in text
