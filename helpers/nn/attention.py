"""Attention on plain vectors: the pieces notebook 01 derives and later notebooks reuse.

Notebook 01 writes each of these out in front of the learner first (``attend`` there is
:func:`attention` here) and tests/notebooks/test_notebook01.py proves the two agree.

Conventions: vectors are rows. ``q`` is one query ``(d,)`` or a stack of queries ``(..., m, d)``;
keys ``K`` are ``(..., n, d)`` and values ``V`` are ``(..., n, d_v)``; leading dims broadcast.
"""

from __future__ import annotations

import math

import torch

COVARIANCES = ("isotropic", "item5")


def attention(q, K, V, scale: float | None = None, mask=None):
    """Softmax attention: ``alpha = softmax(scale * q K^T)``, ``c = alpha V``. Returns ``(c, alpha)``.

    ``scale`` multiplies the scores (``1 / sqrt(d_k)`` gives scaled dot-product attention);
    ``None`` means 1, the plain dot product used in the written questions.
    ``mask`` (broadcastable to the scores, True = may attend) hides keys, e.g. future positions.
    """
    if q.shape[-1] != K.shape[-1]:
        raise ValueError(
            f"query size {q.shape[-1]} does not match key size {K.shape[-1]} (q {tuple(q.shape)}, K {tuple(K.shape)}): "
            "queries and keys must live in the same space, so their last dimensions must agree."
        )
    if K.dim() < 2 or V.dim() < 2 or K.shape[-2] != V.shape[-2]:
        raise ValueError(
            f"K {tuple(K.shape)} and V {tuple(V.shape)} must be (..., n, d) and (..., n, d_v) with the same n: "
            "every key needs exactly one value."
        )
    scores = q @ K.transpose(-2, -1)  # (..., m, n), or (n,) for a single query
    if scale is not None:
        scores = scores * scale
    if mask is not None:
        mask = torch.as_tensor(mask, dtype=torch.bool, device=scores.device)
        if not mask.any(dim=-1).all():
            raise ValueError(
                "mask hides every key from some query, so its weights are undefined: leave at least one key visible per query."
            )
        scores = scores.masked_fill(~mask, float("-inf"))
    alpha = torch.softmax(scores, dim=-1)  # over keys: each query's weights sum to 1
    return alpha @ V, alpha  # (..., m, d_v), (..., m, n)


def self_attention(X, Wq, Wk, Wv, scale: float | None = None, mask=None):
    """Single-head self-attention of a sequence ``X`` (..., T, d_model) with itself. Returns ``(out, alpha)``.

    Queries, keys and values are the rows of ``X @ Wq``, ``X @ Wk``, ``X @ Wv`` (weights ``(d_model, d_k)``,
    ``(d_model, d_k)``, ``(d_model, d_v)``). ``scale=None`` uses ``1 / sqrt(d_k)``; pass 1.0 for the plain dot product.
    """
    if X.shape[-1] != Wq.shape[0] or X.shape[-1] != Wk.shape[0] or X.shape[-1] != Wv.shape[0]:
        raise ValueError(
            f"X has d_model={X.shape[-1]} but Wq, Wk, Wv have {Wq.shape[0]}, {Wk.shape[0]}, {Wv.shape[0]} rows: "
            "each weight must be (d_model, d_out) so that X @ W works."
        )
    Q, K, V = X @ Wq, X @ Wk, X @ Wv  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
    if scale is None:
        scale = 1.0 / math.sqrt(Wk.shape[-1])
    return attention(Q, K, V, scale=scale, mask=mask)


def orthonormal_vectors(n: int, d: int, generator: torch.Generator | None = None, dtype=None):
    """``n`` random orthonormal vectors in R^d as the rows of an ``(n, d)`` tensor (needs n <= d)."""
    if not 1 <= n <= d:
        raise ValueError(
            f"cannot fit {n} orthonormal vectors in R^{d}: ask for between 1 and d={d} vectors, or raise d."
        )
    dtype = dtype or torch.get_default_dtype()
    G = torch.randn(d, n, generator=generator, dtype=dtype)
    Q, _ = torch.linalg.qr(G)  # (d, n), orthonormal columns
    return Q.T.contiguous()  # (n, d)


def sample_keys(
    mu,
    alpha: float,
    n_samples: int,
    generator: torch.Generator | None = None,
    covariance: str = "isotropic",
    a: int = 0,
):
    """Draw ``n_samples`` sets of keys ``k_i ~ N(mu_i, Sigma_i)`` around the rows of ``mu`` (n, d). Returns (n_samples, n, d).

    ``"isotropic"``: every ``Sigma_i = alpha I`` (keys jitter slightly around their means).
    ``"item5"``: as isotropic, except ``Sigma_a = alpha I + 1/2 mu_a mu_a^T``: key ``a`` keeps its direction
    but its length along ``mu_a`` varies a lot (the CS224N single-head drawback).
    """
    if covariance not in COVARIANCES:
        raise ValueError(f"covariance={covariance!r} is not known: use one of {COVARIANCES}.")
    if alpha < 0:
        raise ValueError(f"alpha={alpha} is a variance and must be >= 0.")
    n, d = mu.shape
    if not 0 <= a < n:
        raise ValueError(f"a={a} must index one of the n={n} keys (0 <= a < {n}).")
    noise = torch.randn(n_samples, n, d, generator=generator, dtype=mu.dtype)  # (S, n, d)
    keys = mu + math.sqrt(alpha) * noise
    if covariance == "item5":
        # g * mu_a with g ~ N(0, 1/2) has covariance 1/2 mu_a mu_a^T: only the length along mu_a moves
        g = math.sqrt(0.5) * torch.randn(n_samples, 1, generator=generator, dtype=mu.dtype)  # (S, 1)
        keys[:, a] = keys[:, a] + g * mu[a]
    return keys
