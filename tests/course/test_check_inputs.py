"""What the checks hold answers against (helpers.course.check_inputs): the worst cases reach the bounds (that no random
keys beat the copy case: tests/notebooks/test_notebook01.py), the mask rule is the package model's, and the mask check
fails on the mistakes a student makes."""

import math

import pytest
import torch

from helpers.course.check_inputs import (
    attention_by_loops,
    check_block_stream,
    check_mask_entries,
    drawn_answer_sets,
    worst_average_case,
    worst_copy_case,
)
from helpers.nn.attention import attention
from helpers.nn.model import build_attention_mask


def copy_error(K, V, s):
    alpha = torch.softmax(s * K @ K[0], dim=0)
    return (alpha @ V - V[0]).norm().item()


@pytest.mark.parametrize("n, gap, spread", [(2, 2.0, 0.25), (16, 0.5, 1.0), (40, 0.1, 3.0)])
def test_the_worst_copy_case_has_the_numbers_it_is_asked_for_and_reaches_the_bound(n, gap, spread):
    K, V = worst_copy_case(n, gap, spread)
    torch.testing.assert_close(K.norm(dim=-1), torch.ones(n, dtype=torch.float64))  # unit keys
    assert (1 - K[1:] @ K[0]).min().item() == pytest.approx(gap)
    assert (V - V[0]).norm(dim=-1).max().item() == pytest.approx(spread)
    for s in (0.0, 3.0, 20.0):
        x = (n - 1) * math.exp(-s * gap)
        assert copy_error(K, V, s) == pytest.approx(x / (1 + x) * spread, rel=1e-9)  # exactly 1 - alpha_j times it


def test_a_gap_unit_keys_cannot_have_is_refused():
    with pytest.raises(ValueError, match="gap must lie in"):
        worst_copy_case(4, 2.5, 1.0)


def test_no_prefix_lengths_is_refused_not_a_check_that_checks_nothing():
    with pytest.raises(ValueError, match="prefix_lengths is empty"):
        check_mask_entries(torch.zeros(0, 4, 4, dtype=torch.bool), 4, [])


def test_the_worst_average_case_misses_the_average_by_twice_the_stray_weight():
    for n, beta in [(3, 0.0), (64, 4.0), (1024, 9.0)]:
        K, V = worst_average_case(n)
        assert V.norm(dim=-1).max().item() == 1.0
        alpha = torch.softmax(beta * (K[0] + K[1]) @ K.T, dim=0)
        eps = (n - 2) / (2 * math.exp(beta) + n - 2)  # the weight left on the n - 2 other keys
        assert (alpha @ V - (V[0] + V[1]) / 2).norm().item() == pytest.approx(2 * eps, rel=1e-9)


@pytest.mark.parametrize("T", [1, 2, 7])
def test_the_causal_rule_is_the_models_and_a_mask_that_sees_the_future_fails(T):
    right = build_attention_mask(T)  # (1, 1, T, T): the package's model
    check_mask_entries(right, T)
    if T > 1:
        with pytest.raises(AssertionError, match="query 0 must not see key 1"):
            check_mask_entries(right.transpose(-1, -2), T)  # the upper triangle
        with pytest.raises(AssertionError, match="query 0 must see key 0"):
            check_mask_entries(torch.ones(T, T, dtype=torch.bool).tril(-1), T)  # a query that cannot see itself


def test_the_prefix_rule_is_the_models_and_the_common_mistakes_fail():
    T, lengths = 6, [1, 3, 6]
    plen = torch.tensor(lengths)
    right = build_attention_mask(T, plen)[:, 0]  # (B, T, T)
    check_mask_entries(right, T, lengths)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    queries_opened = causal[None] | (torch.arange(T)[None, :, None] < plen[:, None, None])  # sources read targets
    with pytest.raises(
        AssertionError, match=r"row 0 \(prefix 1\): query 0 must not see key 1; sources see the whole source"
    ):
        check_mask_entries(queries_opened, T, lengths)
    one_too_many = causal[None] | (torch.arange(T)[None, None, :] <= plen[:, None, None])  # the first target opened
    with pytest.raises(AssertionError, match=r"row 0 \(prefix 1\): query 0 must not see key 1"):
        check_mask_entries(one_too_many, T, lengths)
    with pytest.raises(AssertionError, match=r"row 1 \(prefix 3\): query 0 must see key 1"):
        check_mask_entries(causal.expand(3, T, T), T, lengths)  # causal alone: the source not opened


def test_padding_keys_are_hidden_when_lengths_are_given():
    T, lengths, prefixes = 5, [5, 3], [2, 2]
    plen = torch.tensor(prefixes)
    right = build_attention_mask(T, plen)[:, 0] & (
        torch.arange(T)[None, None, :] < torch.tensor(lengths)[:, None, None]
    )
    check_mask_entries(right, T, prefixes, lengths)
    with pytest.raises(
        AssertionError, match=r"row 1 \(length 3, prefix 2\): query 3 must not see key 3: it is padding"
    ):
        check_mask_entries(build_attention_mask(T, plen)[:, 0], T, prefixes, lengths)  # the padding left readable
    with pytest.raises(ValueError, match="lengths needs prefix_lengths"):
        check_mask_entries(right, T, None, lengths)


def test_the_drawn_answers_are_the_places_written_the_tables_ways_with_both_marks():
    """Each drawn prediction counts as its place under the course's rule, or has lost or gained a last letter (which
    does not count): both kinds occur, so a rule that accepts too much or too little meets its counter-example."""
    from helpers.knowledge import PLACES, normalise_answer

    sets = drawn_answer_sets(3, PLACES, n_sets=50)
    assert sets == drawn_answer_sets(3, PLACES, n_sets=50) and sets != drawn_answer_sets(4, PLACES, n_sets=50)
    right = wrong = 0
    for made, answers in sets:
        for prediction, place in zip(made, answers, strict=True):
            if normalise_answer(prediction) == normalise_answer(place):
                right += 1
            else:
                wrong += 1
                written = normalise_answer(prediction)
                assert written in (normalise_answer(place)[:-1], normalise_answer(place) + "s"), (prediction, place)
    assert right > 0 and wrong > 0


def test_the_loop_reference_is_the_packages_scaled_attention_and_not_the_unscaled_one():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(5, 4, generator=g, dtype=torch.float64) * 3 for _ in range(3))
    mask = (torch.rand(5, 5, generator=g) > 0.4) | torch.eye(5, dtype=torch.bool)
    out, weights = (
        torch.tensor(x, dtype=torch.float64)
        for x in attention_by_loops(q.tolist(), k.tolist(), v.tolist(), mask.tolist())
    )
    want_out, want_weights = attention(q, k, v, scale=1 / math.sqrt(4), mask=mask)
    torch.testing.assert_close(weights, want_weights)
    torch.testing.assert_close(out, want_out)
    _, unscaled = attention(q, k, v, scale=1.0, mask=mask)
    assert not torch.allclose(weights, unscaled, atol=1e-3)  # the scale is there to be missed
    big = [[300.0, 0.0], [0.0, 300.0]]  # scores of 45,000: the loop subtracts each row's largest, no overflow
    assert attention_by_loops(big, big, [[1.0], [2.0]], [[True, True], [True, True]])[0] == [[1.0], [2.0]]


def _block_run(arrangement, seed=0):
    """A (2, 5, 8) input through one block of the given arrangement, and what each sub-layer received and returned."""
    g = torch.Generator().manual_seed(seed)
    C = 8
    ln1, ln2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
    for ln in (ln1, ln2):
        ln.weight.data = 0.5 + torch.rand(C, generator=g)
        ln.bias.data = torch.rand(C, generator=g) - 0.5
    A, W = torch.randn(C, C, generator=g), torch.randn(C, C, generator=g)
    x = torch.randn(2, 5, C, generator=g) * 3 + 1
    seen = {}

    def attn(h):
        seen["attn"] = (h, torch.tanh(h @ A))
        return seen["attn"][1]

    def ffn(h):
        seen["ffn"] = (h, torch.relu(h @ W))
        return seen["ffn"][1]

    if arrangement == "pre-LN":
        h = x + attn(ln1(x))
        out = h + ffn(ln2(h))
    elif arrangement == "post-LN":  # the 2017 original: the stream itself normalised
        h = ln1(x + attn(x))
        out = ln2(h + ffn(h))
    elif arrangement == "parallel":  # the feed-forward reads the stream before attention added to it
        out = x + attn(ln1(x)) + ffn(ln2(x))
    elif arrangement == "norms swapped":
        h = x + attn(ln2(x))
        out = h + ffn(ln1(h))
    with torch.no_grad():
        lns = [(ln.weight.detach(), ln.bias.detach()) for ln in (ln1, ln2)]
        return (x, out.detach(), *(t.detach() for t in seen["attn"]), *(t.detach() for t in seen["ffn"]), *lns)


def test_the_block_stream_check_passes_pre_ln_and_names_the_guarantee_each_other_arrangement_breaks():
    check_block_stream(*_block_run("pre-LN"))
    for arrangement, broken in [("post-LN", "guarantee 1"), ("parallel", "stream as it stood after attention"),
                                ("norms swapped", "normalised by ln1")]:  # fmt: skip
        with pytest.raises(AssertionError, match=broken):
            check_block_stream(*_block_run(arrangement))
