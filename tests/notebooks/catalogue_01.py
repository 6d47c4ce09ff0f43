"""Wrong answers for notebook 01's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/course/test_exercises.py grades the result and requires
that exercise, and no other, to fail (with AssertionError unless a fifth field names the error)."""

CATALOGUE = [
    # 1.1 attend
    (
        "01",
        "1.1",
        "softmax over the queries",
        [("softmax(scores, dim=-1)  # normalise over the keys", "softmax(scores, dim=-2)  # normalise over the keys")],
        "IndexError",
    ),
    (
        "01",
        "1.1",
        "scores divided by sqrt(d)",
        [("scores = q @ K.transpose(-2, -1)", "scores = q @ K.transpose(-2, -1) / q.size(-1) ** 0.5")],
    ),
    ("01", "1.1", "values weighted by the scores", [("return alpha @ V, alpha", "return scores @ V, alpha")]),
    ("01", "1.1", "weights not returned", [("return alpha @ V, alpha", "return alpha @ V, scores")]),
    (
        "01",
        "1.1",
        "the package called instead",
        [
            (
                "scores = q @ K.transpose(-2, -1)  # (..., m, n)",
                "from helpers.nn.attention import attention\n\n    return attention(q, K, V)\n"
                "    scores = q @ K.transpose(-2, -1)  # (..., m, n)",
            )
        ],
        "ReferenceOutOfReach",  # the grader's guard stops it first; the check would refuse it too
    ),
    # 1.2 stable_softmax
    (
        "01",
        "1.2",
        "the textbook formula: nothing subtracted",
        [("shifted = scores - scores.amax(dim=-1, keepdim=True)", "shifted = scores")],
    ),
    (
        "01",
        "1.2",
        "the smallest score subtracted",
        [("scores.amax(dim=-1, keepdim=True)", "scores.amin(dim=-1, keepdim=True)")],
    ),
    ("01", "1.2", "one max for the whole batch", [("scores.amax(dim=-1, keepdim=True)", "scores.max()")]),
    (
        "01",
        "1.2",
        "torch.softmax called",
        [("e = torch.exp(shifted)", "return torch.nn.functional.softmax(scores, dim=-1)\n    e = torch.exp(shifted)")],
        "ReferenceOutOfReach",  # the guard, before the check's "library" list (which reads only the names written)
    ),
    ("01", "1.2", "the mean subtracted", [("scores.amax(dim=-1, keepdim=True)", "scores.mean(dim=-1, keepdim=True)")]),
    (
        "01",
        "1.2",
        "normalised over the first axis",
        [
            (
                "return e / e.sum(dim=-1, keepdim=True)  # the denominator",
                "return e / e.sum(dim=0, keepdim=True)  # the denominator",
            )
        ],
    ),
    # 1.3 copying_query: a design, checked by what attention does with it
    ("01", "1.3", "no scale: a query of norm 1", [("return s * K[j]  # scores", "return K[j]  # scores")]),
    (
        "01",
        "1.3",
        "every key at once",
        [("return s * K[j]  # scores", "return s * K.sum(0) / K.sum(0).norm()  # scores")],
    ),
    ("01", "1.3", "pointing away from key j", [("return s * K[j]  # scores", "return -s * K[j]  # scores")]),
    (
        "01",
        "1.3",
        "the j-th axis, not the j-th key",
        [("return s * K[j]  # scores", "return s * torch.eye(K.shape[1], dtype=K.dtype)[j]  # scores")],
    ),
    ("01", "1.3", "the neighbouring key", [("return s * K[j]  # scores", "return s * K[j - 1]  # scores")]),
    (
        "01",
        "1.3",
        "the right direction at a fixed norm",
        [("return s * K[j]  # scores", "return 20.0 * K[j]  # scores")],
    ),
    # 1.4 copy_error_bound: the check is two-sided
    ("01", "1.4", "no bound at all: infinity", [("return min(1.0, others) * spread", 'return float("inf")')]),
    ("01", "1.4", "the measured spread as the bound", [("return min(1.0, others) * spread", "return spread")]),
    (
        "01",
        "1.4",
        "ten times too loose",
        [("return min(1.0, others) * spread", "return 10 * min(1.0, others) * spread")],
    ),
    ("01", "1.4", "half the gap in the exponent", [("math.exp(-s * gap)", "math.exp(-s * gap / 2)")]),
    ("01", "1.4", "min(1, .) left out", [("return min(1.0, others) * spread", "return others * spread")]),
    ("01", "1.4", "the gap left out", [("math.exp(-s * gap)", "math.exp(-s)")]),
    ("01", "1.4", "the n - 1 other keys left out", [("others = (n - 1) * math.exp", "others = math.exp")]),
    ("01", "1.4", "the spread left out", [("return min(1.0, others) * spread", "return min(1.0, others)")]),
    # 1.5 averaging_query: a design, checked by what attention does with it
    ("01", "1.5", "one key only", [("return beta * (K[a] + K[b])  # scores", "return beta * K[a]  # scores")]),
    (
        "01",
        "1.5",
        "a difference of keys",
        [("return beta * (K[a] + K[b])  # scores", "return beta * (K[a] - K[b])  # scores")],
    ),
    ("01", "1.5", "no scale", [("return beta * (K[a] + K[b])  # scores", "return (K[a] + K[b])  # scores")]),
    (
        "01",
        "1.5",
        "b weighted twice",
        [("return beta * (K[a] + K[b])  # scores", "return beta * (K[a] + 2 * K[b])  # scores")],
    ),
    (
        "01",
        "1.5",
        "every key at once",
        [("return beta * (K[a] + K[b])  # scores", "return beta * K.sum(0)  # scores")],
    ),
    (
        "01",
        "1.5",
        "half the score asked for",
        [("return beta * (K[a] + K[b])  # scores", "return beta * (K[a] + K[b]) / 2  # scores")],
    ),
    # 1.6 beta_needed
    (
        "01",
        "1.6",
        "n keys instead of the n - 2 others",
        [("math.log((n - 2) * (1 / tau - 0.5))", "math.log(n * (1 / tau - 0.5))")],
    ),
    (
        "01",
        "1.6",
        "2 eps <= tau solved as eps <= tau",
        [("math.log((n - 2) * (1 / tau - 0.5))", "math.log((n - 2) * (1 / tau - 1))")],
    ),
    ("01", "1.6", "no logarithm", [("math.log((n - 2) * (1 / tau - 0.5))", "(n - 2) * (1 / tau - 0.5)")]),
    (
        "01",
        "1.6",
        "the looser bound (n - 2) e^-beta <= tau",
        [("math.log((n - 2) * (1 / tau - 0.5))", "math.log((n - 2) / tau)")],
    ),
    # 1.7 recovering_map: a design, checked by what M does
    ("01", "1.7", "A A^T without orthonormalising", [("return Q @ Q.T  # (d, d)", "return A @ A.T  # (d, d)")]),
    ("01", "1.7", "Q^T Q: a (p, p) matrix", [("return Q @ Q.T  # (d, d)", "return Q.T @ Q  # (d, d)")]),
    (
        "01",
        "1.7",
        "the projector onto the complement",
        [("return Q @ Q.T  # (d, d)", "return torch.eye(len(A), dtype=A.dtype) - Q @ Q.T  # (d, d)")],
    ),
    (
        "01",
        "1.7",
        "the identity",
        [("return Q @ Q.T  # (d, d)", "return torch.eye(len(A), dtype=A.dtype)  # (d, d)")],
    ),
    ("01", "1.7", "QR of the transpose", [("torch.linalg.qr(A)  # (d, p)", "torch.linalg.qr(A.T)  # (d, p)")]),
    # 1.8 single_head_query: a design, checked by what attention does with it
    (
        "01",
        "1.8",
        "one mean only",
        [("return averaging_query(mu, a, b, beta)", "return beta * mu[a]")],
    ),
    (
        "01",
        "1.8",
        "a difference of means",
        [("return averaging_query(mu, a, b, beta)", "return beta * (mu[a] - mu[b])")],
    ),
    ("01", "1.8", "no scale", [("return averaging_query(mu, a, b, beta)", "return mu[a] + mu[b]")]),
    ("01", "1.8", "every mean at once", [("return averaging_query(mu, a, b, beta)", "return beta * mu.sum(0)")]),
    # 1.9 two_head_queries
    (
        "01",
        "1.9",
        "both heads on key a",
        [("return beta * mu[a], beta * mu[b]", "return beta * mu[a], beta * mu[a]")],
    ),
    (
        "01",
        "1.9",
        "the single head's query, twice",
        [("return beta * mu[a], beta * mu[b]", "return beta * (mu[a] + mu[b]), beta * (mu[a] + mu[b])")],
    ),
    ("01", "1.9", "no scale beta", [("return beta * mu[a], beta * mu[b]", "return mu[a], mu[b]")]),
    (
        "01",
        "1.9",
        "head 2 pointed away from b",
        [("return beta * mu[a], beta * mu[b]", "return beta * mu[a], -beta * mu[b]")],
    ),
    # 1.10 route_projections
    (
        "01",
        "1.10",
        "queries routed the wrong way round",
        [("torch.outer(u_d, u_a) + torch.outer(u_c, u_d)", "torch.outer(u_c, u_a) + torch.outer(u_d, u_d)")],
    ),
    (
        "01",
        "1.10",
        "u_c kept instead of flipped",
        [("torch.outer(u_b, u_b) - torch.outer(u_c, u_c)", "torch.outer(u_b, u_b) + torch.outer(u_c, u_c)")],
    ),
    (
        "01",
        "1.10",
        "values not divided by beta^2",
        [
            (
                "V = (torch.outer(u_b, u_b) - torch.outer(u_c, u_c)) / beta2",
                "V = torch.outer(u_b, u_b) - torch.outer(u_c, u_c)",
            )
        ],
    ),
    (
        "01",
        "1.10",
        "no routing: Q = I",
        [
            (
                "Q = (torch.outer(u_d, u_a) + torch.outer(u_c, u_d)) / beta2",
                "Q = torch.eye(len(u_a), dtype=u_a.dtype)",
            )
        ],
    ),
    # 1.11 score_variance and score_scale
    (
        "01",
        "1.11",
        "the standard deviation, not the variance",
        [("return d * var_q * var_k", "return math.sqrt(d * var_q * var_k)")],
    ),
    ("01", "1.11", "var_k forgotten", [("return d * var_q * var_k", "return d * var_q")]),
    ("01", "1.11", "variances added", [("return d * var_q * var_k", "return d * (var_q + var_k)")]),
    ("01", "1.11", "d forgotten", [("return d * var_q * var_k", "return var_q * var_k")]),
    (
        "01",
        "1.11",
        "divided by the variance, not its root",
        [("return 1 / math.sqrt(d * var_q * var_k)", "return 1 / (d * var_q * var_k)")],
    ),
    ("01", "1.11", "not scaled", [("return 1 / math.sqrt(d * var_q * var_k)", "return 1.0")]),
    ("01", "1.11", "fourth root", [("return 1 / math.sqrt(d * var_q * var_k)", "return (d * var_q * var_k) ** -0.25")]),
    ("01", "1.11", "the variances ignored", [("return 1 / math.sqrt(d * var_q * var_k)", "return 1 / math.sqrt(d)")]),
]
