"""Notebook 01 (attention math): its code agrees with helpers.attention, and every check can fail.

The notebook is executed once in-process (quick mode). Each test then calls one of the notebook's
check functions with a plausible mistake and requires AssertionError: a check that cannot fail
proves nothing.
"""

from __future__ import annotations

import math

import pytest
import torch

from helpers import exercises, notebooks, runtime
from helpers.attention import attention, self_attention

NB = "01"
FIGURES = [
    "01_categorical_weights",
    "01_copying_sharpness",
    "01_average_of_two",
    "01_subspace_recovery",
    "01_single_head_swing",
    "01_multi_head_variance",
    "01_kqv_self_attention",
    "01_permutation_equivariance",
    "01_scaling_sqrt_dk",
]


@pytest.fixture(scope="module")
def ns():
    """The notebook's namespace after running every cell (the checks inside have passed)."""
    return exercises.run_solved(NB)  # every exercise passes: full marks


def _check_cells():
    return [c for c in notebooks.code_cells(NB) if "check" in c.tags]


def test_every_item_has_a_check_cell():
    sources = "\n".join(c.source for c in _check_cells())
    for name in [
        "check_matches_package",
        "check_categorical",
        "check_copying",
        "check_average_of_two",
        "check_recover",
        "check_single_head_swings",
        "check_multi_head",
        "check_construction",
        "check_equivariant",
        "check_scaling_keeps_gradients",
    ]:
        assert f"def {name}(" in sources, f"{name} is not defined in a cell tagged check"


def test_figures_saved_as_pdf_and_png(ns):
    folder = runtime.figures_dir()
    for name in FIGURES:
        assert (folder / f"{name}.pdf").is_file() and (folder / f"{name}.png").is_file(), f"{name} not saved"


# ---------------------------------------------------------------------------------------------
# defined once: the notebook's attend / self_attend are helpers.attention's


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_notebook_attend_equals_package(ns, dtype):
    g = torch.Generator().manual_seed(123)
    for q_shape, kv in [((16,), ()), ((7, 16), ()), ((3, 7, 16), (3,)), ((2, 3, 7, 16), (3,))]:
        q = 3 * torch.randn(q_shape, generator=g, dtype=dtype)
        K = torch.randn(*kv, 9, 16, generator=g, dtype=dtype)
        V = torch.randn(*kv, 9, 5, generator=g, dtype=dtype)
        c, alpha = ns["attend"](q, K, V)
        c_ref, alpha_ref = attention(q, K, V)
        assert torch.allclose(alpha, alpha_ref, atol=1e-6) and torch.allclose(c, c_ref, atol=1e-6)
        # item 9's scaling: scaling the query is the package's `scale`
        assert torch.allclose(ns["attend"](q / 4, K, V)[0], attention(q, K, V, scale=0.25)[0], atol=1e-6)


def test_notebook_self_attend_equals_package(ns):
    g = torch.Generator().manual_seed(7)
    X = torch.randn(6, 12, generator=g, dtype=torch.float64)
    Wq, Wk, Wv = (torch.randn(12, 4, generator=g, dtype=torch.float64) for _ in range(3))
    for scale in [1.0, 0.5]:
        out, alpha = ns["self_attend"](X, Wq, Wk, Wv, scale=scale)
        out_ref, alpha_ref = self_attention(X, Wq, Wk, Wv, scale=scale)
        assert torch.allclose(out, out_ref, atol=1e-6) and torch.allclose(alpha, alpha_ref, atol=1e-6)


def test_package_check_catches_a_different_attention(ns):
    def unnormalised(q, K, V):  # forgets the softmax: weights are raw exponentials
        alpha = torch.exp(q @ K.transpose(-2, -1))
        return alpha @ V, alpha

    with pytest.raises(AssertionError):
        ns["check_matches_package"](unnormalised)


# ---------------------------------------------------------------------------------------------
# item 1: categorical


def _softmax_over(dim):
    def attend(q, K, V):
        alpha = torch.softmax(q @ K.transpose(-2, -1), dim=dim)
        return alpha @ V, alpha

    return attend


def test_categorical_check_fails_on_softmax_over_the_wrong_dim(ns):
    ns["check_categorical"](_softmax_over(-1))  # the right one passes
    with pytest.raises(AssertionError, match="sum to 1"):
        ns["check_categorical"](_softmax_over(-2))  # normalises over the queries


def test_categorical_check_fails_on_the_naive_softmax(ns):
    def naive(q, K, V):
        alpha = ns["naive_softmax"](q @ K.transpose(-2, -1))
        return alpha @ V, alpha

    ns["check_categorical"](naive, scales=[1e-2, 1.0])  # fine at moderate scales
    with pytest.raises(AssertionError, match="NaN"):
        ns["check_categorical"](naive)


def test_categorical_check_cell_fails_with_a_buggy_attend_swapped_in(ns):
    """The pattern of the brief: swap the notebook's function, re-run its check cell."""
    cell = next(c for c in _check_cells() if "def check_categorical" in c.source)
    patched = dict(ns)
    patched["attend"] = _softmax_over(-2)
    with pytest.raises(AssertionError):
        exec(compile(cell.source, "<notebook 01 check cell>", "exec"), patched)


# ---------------------------------------------------------------------------------------------
# item 2: copying


def test_copying_check_fails_with_a_query_that_is_not_aligned(ns):
    K, V = ns["K2"], ns["V2"]
    ns["check_copying"](K[0], K, V, j=0)
    with pytest.raises(AssertionError, match="does not single out"):
        ns["check_copying"](K[3], K, V, j=0)  # aligned with another key
    with pytest.raises(AssertionError):
        ns["check_copying"](-K[0], K, V, j=0)  # pointing away


def test_copying_check_fails_when_the_query_is_too_small(ns):
    K, V = ns["K2"], ns["V2"]
    with pytest.raises(AssertionError):
        ns["check_copying"](K[0], K, V, j=0, scale=2.0)


def test_copying_bound_check_fails_on_a_wrong_bound(ns):
    sweep = ns["copy"].clone()
    sweep[:, 2] = sweep[:, 2] * 1e-3  # a bound 1000x too optimistic
    with pytest.raises(AssertionError, match="exceeds the bound"):
        ns["check_copying_bound"](sweep)


# ---------------------------------------------------------------------------------------------
# item 3: average of two


def test_average_of_two_fails_when_beta_is_too_small(ns):
    ns["check_average_of_two"](beta=12.0, n=64)
    with pytest.raises(AssertionError, match="not within"):
        ns["check_average_of_two"](beta=3.0, n=64)
    # the required beta grows like log n: enough for 8 keys, not for 1024
    ns["check_average_of_two"](beta=9.0, n=8)
    with pytest.raises(AssertionError):
        ns["check_average_of_two"](beta=9.0, n=1024)


def test_average_of_two_derivation_matches_the_measurement(ns):
    for beta, n in [(0.0, 5), (2.5, 30), (10.0, 200)]:
        K, V = ns["orthonormal_setup"](n, 4, torch.Generator().manual_seed(1))
        err, exact, bound, alpha = ns["average_of_two"](beta, K, V)
        assert err == pytest.approx(exact, rel=1e-9, abs=1e-14) and err <= bound
        assert alpha[0].item() == pytest.approx(math.exp(beta) / (2 * math.exp(beta) + n - 2), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# item 4: M = A A^T


def test_recover_check_fails_when_subspaces_are_not_orthogonal(ns):
    ns["check_recover"](ns["basis_A"], ns["W4"])
    with pytest.raises(AssertionError, match="orthogonal"):
        ns["check_recover"](ns["basis_A"], ns["tilted_basis"](math.pi / 4))
    with pytest.raises(AssertionError):
        ns["check_recover"](ns["basis_A"], ns["tilted_basis"](math.pi / 2 - 0.01))  # barely tilted still leaks


def test_leak_formula_check_fails_on_a_wrong_subspace(ns):
    tilted = ns["tilted_basis"]
    ns["check_leak_formula"](math.pi / 3)
    ns["tilted_basis"] = lambda theta: tilted(theta / 2)  # the subspace is not at the angle we claim
    try:
        with pytest.raises(AssertionError, match="cos theta"):
            ns["check_leak_formula"](math.pi / 3)
    finally:
        ns["tilted_basis"] = tilted


# ---------------------------------------------------------------------------------------------
# items 5 and 6: single head vs two heads


def test_single_head_checks_tell_the_two_key_distributions_apart(ns):
    with pytest.raises(AssertionError, match="does not swing"):
        ns["check_single_head_swings"](ns["c_iso"])  # isotropic keys do not swing
    with pytest.raises(AssertionError):
        ns["check_single_head_averages"](ns["c_single"])  # stretched keys do not average


def test_multi_head_check_fails_if_both_heads_use_the_same_query(ns):
    beta, mu, a, b = ns["BETA"], ns["mu"], ns["A_IDX"], ns["B_IDX"]
    q_single = beta * (mu[a] + mu[b])
    with pytest.raises(AssertionError, match="smaller"):
        ns["check_multi_head"](ns["keys_stretch"], q_single, q_single)
    with pytest.raises(AssertionError):
        ns["check_multi_head"](ns["keys_stretch"], beta * mu[a], beta * mu[a])  # both heads on a: not even the average


# ---------------------------------------------------------------------------------------------
# item 7: key/query/value projections


def test_construction_check_fails_without_projections(ns):
    eye = ns["I8"]
    with pytest.raises(AssertionError, match="away from u_b"):
        ns["check_construction"](eye, eye, eye)
    with pytest.raises(AssertionError):  # queries routed the wrong way round
        ns["check_construction"](ns["Q7"].T, ns["K7"], ns["V7"])


def test_cannot_reach_check_fails_when_something_does_reach_u_b(ns):
    X7, Q7, K7, V7 = ns["X7"], ns["Q7"], ns["K7"], ns["V7"]

    def c2_projected(x2):
        X = torch.stack([X7[0], x2, X7[2]])
        return ns["self_attend"](X, Q7.T, K7.T, V7.T)[0][1]

    with pytest.raises(AssertionError, match="within"):
        ns["check_cannot_reach_ub"](c2_projected, {"x2 = u_a": ns["u_a"]})


# ---------------------------------------------------------------------------------------------
# item 8: permutation equivariance


def test_equivariance_checks_detect_positions(ns):
    with pytest.raises(AssertionError, match="not permutation equivariant"):
        ns["check_equivariant"](ns["attn_with_positions"])
    with pytest.raises(AssertionError, match="ignores order"):
        ns["check_order_sensitive"](ns["attn_plain"])


def test_equivariance_check_catches_a_position_dependent_bug(ns):
    """A mask (here causal) also ties outputs to slots, so it breaks equivariance too."""
    Wq, Wk, Wv, T = ns["Wq8"], ns["Wk8"], ns["Wv8"], ns["T8"]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    with pytest.raises(AssertionError):
        ns["check_equivariant"](lambda X: self_attention(X, Wq, Wk, Wv, mask=causal)[0])


# ---------------------------------------------------------------------------------------------
# item 9: sqrt(d_k)


def test_scaling_check_fails_if_scaling_is_removed(ns):
    with pytest.raises(AssertionError, match="saturates|vanishes"):
        ns["check_scaling_keeps_gradients"](lambda d: 1.0)


def test_variance_check_fails_if_the_variance_does_not_grow_like_d(ns):
    with pytest.raises(AssertionError, match="expected about d"):
        ns["check_score_variance"](lambda d: 1 / math.sqrt(d))
