"""helpers.nn.attention: shapes, the math it promises, and the errors it gives on bad input."""

import math

import pytest
import torch

from helpers.nn.attention import attention, orthonormal_vectors, sample_keys, self_attention
from helpers.nn.model import sinusoidal_table


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_attention_single_query_by_hand():
    K = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    V = torch.eye(3)
    c, alpha = attention(torch.tensor([2.0, 0.0]), K, V)
    e = math.exp(2.0)
    expected = torch.tensor([e, 1.0, e]) / (2 * e + 1)
    assert alpha.shape == (3,) and c.shape == (3,)
    assert torch.allclose(alpha, expected) and torch.allclose(c, expected)


def test_attention_batches_and_broadcasts():
    g = _gen()
    q = torch.randn(2, 4, 8, generator=g)  # (B, m, d)
    K = torch.randn(2, 5, 8, generator=g)  # (B, n, d)
    V = torch.randn(2, 5, 3, generator=g)  # (B, n, d_v)
    c, alpha = attention(q, K, V)
    assert c.shape == (2, 4, 3) and alpha.shape == (2, 4, 5)
    assert torch.allclose(alpha.sum(-1), torch.ones(2, 4))
    # each query of each batch separately gives the same answer
    c01, _ = attention(q[0, 1], K[0], V[0])
    assert torch.allclose(c[0, 1], c01, atol=1e-6)
    # shared keys broadcast over a batch of queries
    c_shared, _ = attention(q, K[0], V[0])
    assert torch.allclose(c_shared[0], c[0], atol=1e-6)


def test_attention_scale_equals_scaling_the_query():
    g = _gen(1)
    q, K, V = torch.randn(4, 8, generator=g), torch.randn(6, 8, generator=g), torch.randn(6, 2, generator=g)
    c1, a1 = attention(q, K, V, scale=0.25)
    c2, a2 = attention(0.25 * q, K, V)
    assert torch.allclose(a1, a2) and torch.allclose(c1, c2)
    assert not torch.allclose(a1, attention(q, K, V)[1]), "scale must change the weights"


def test_attention_mask_hides_keys():
    g = _gen(2)
    q, K, V = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g), torch.randn(3, 2, generator=g)
    causal = torch.tril(torch.ones(3, 3, dtype=torch.bool))
    c, alpha = attention(q, K, V, mask=causal)
    assert (alpha[~causal] == 0).all()
    assert torch.allclose(alpha.sum(-1), torch.ones(3))
    assert torch.allclose(c[0], V[0]), "the first query sees only the first key"
    with pytest.raises(ValueError, match="at least one key visible"):
        attention(q, K, V, mask=torch.zeros(3, 3, dtype=torch.bool))


def test_attention_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="query size 4 does not match key size 5"):
        attention(torch.zeros(4), torch.zeros(3, 5), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="every key needs exactly one value"):
        attention(torch.zeros(4), torch.zeros(3, 4), torch.zeros(2, 2))


def test_self_attention_default_scale_and_shapes():
    g = _gen(3)
    X = torch.randn(2, 5, 6, generator=g)  # (B, T, d_model)
    Wq, Wk, Wv = (torch.randn(6, 4, generator=g) for _ in range(3))
    out, alpha = self_attention(X, Wq, Wk, Wv)
    assert out.shape == (2, 5, 4) and alpha.shape == (2, 5, 5)
    ref, _ = attention(X @ Wq, X @ Wk, X @ Wv, scale=1 / math.sqrt(4))
    assert torch.allclose(out, ref)
    unscaled, _ = self_attention(X, Wq, Wk, Wv, scale=1.0)
    assert not torch.allclose(out, unscaled)
    with pytest.raises(ValueError, match="d_model=6"):
        self_attention(X, torch.zeros(5, 4), Wk, Wv)


def test_orthonormal_vectors():
    U = orthonormal_vectors(5, 8, _gen(4), dtype=torch.float64)
    assert U.shape == (5, 8) and U.dtype == torch.float64
    assert torch.allclose(U @ U.T, torch.eye(5, dtype=torch.float64), atol=1e-12)
    assert torch.equal(U, orthonormal_vectors(5, 8, _gen(4), dtype=torch.float64)), "same seed, same vectors"
    assert not torch.allclose(U, orthonormal_vectors(5, 8, _gen(5), dtype=torch.float64))
    with pytest.raises(ValueError, match="cannot fit 9 orthonormal vectors in R\\^8"):
        orthonormal_vectors(9, 8)


def test_sample_keys_isotropic_covariance():
    mu = orthonormal_vectors(3, 4, _gen(6), dtype=torch.float64)
    keys = sample_keys(mu, 0.01, 20_000, _gen(7))
    assert keys.shape == (20_000, 3, 4)
    assert torch.allclose(keys.mean(0), mu, atol=5e-3)
    dev = (keys - mu).reshape(-1, 4)
    cov = dev.T @ dev / len(dev)
    assert torch.allclose(cov, 0.01 * torch.eye(4, dtype=torch.float64), atol=1e-3)


def test_sample_keys_item5_stretches_only_key_a_along_its_mean():
    mu = orthonormal_vectors(3, 4, _gen(8), dtype=torch.float64)
    alpha, a = 1e-4, 1
    keys = sample_keys(mu, alpha, 40_000, _gen(9), covariance="item5", a=a)
    dev = keys[:, a] - mu[a]  # (S, d)
    cov = dev.T @ dev / len(dev)
    expected = alpha * torch.eye(4, dtype=torch.float64) + 0.5 * torch.outer(mu[a], mu[a])
    assert torch.allclose(cov, expected, atol=2e-2)
    other = keys[:, 0] - mu[0]
    assert torch.allclose(other.T @ other / len(other), alpha * torch.eye(4, dtype=torch.float64), atol=1e-5)


def test_sample_keys_rejects_bad_arguments():
    mu = torch.eye(3)
    with pytest.raises(ValueError, match="isotropic"):
        sample_keys(mu, 0.1, 2, covariance="diagonal")
    with pytest.raises(ValueError, match="variance"):
        sample_keys(mu, -1.0, 2)
    with pytest.raises(ValueError, match="a=3"):
        sample_keys(mu, 0.1, 2, covariance="item5", a=3)


def test_sinusoidal_table_in_float64_as_notebook_01_uses_it():
    P64 = sinusoidal_table(50, 8, dtype=torch.float64)
    assert P64.dtype == torch.float64
    assert torch.allclose(P64.float(), sinusoidal_table(50, 8), atol=1e-5), "float32 and float64 tables agree"
    P = P64.float()
    assert P.shape == (50, 8)
    assert torch.allclose(P[0], torch.tensor([0.0, 1.0] * 4)), "position 0: sin 0 = 0, cos 0 = 1"
    assert torch.allclose(P[:, 0], torch.sin(torch.arange(50.0)), atol=1e-6), (
        "the fastest pair turns one radian per step"
    )
    assert torch.allclose(P[:, 6], torch.sin(torch.arange(50.0) / 10000 ** (6 / 8)), atol=1e-6)
    assert torch.allclose(P[:, 0::2] ** 2 + P[:, 1::2] ** 2, torch.ones(50, 4), atol=1e-6)
    assert len({tuple(row) for row in P.round(decimals=4).tolist()}) == 50, "every position gets its own code"
    with pytest.raises(ValueError, match="even d_model"):
        sinusoidal_table(10, 7)
