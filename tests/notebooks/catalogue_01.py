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
    # 1.3 copy_error_bound: the check is two-sided
    ("01", "1.3", "no bound at all: infinity", [("return min(1.0, others) * spread", 'return float("inf")')]),
    ("01", "1.3", "the measured spread as the bound", [("return min(1.0, others) * spread", "return spread")]),
    (
        "01",
        "1.3",
        "ten times too loose",
        [("return min(1.0, others) * spread", "return 10 * min(1.0, others) * spread")],
    ),
    ("01", "1.3", "half the gap in the exponent", [("math.exp(-s * gap)", "math.exp(-s * gap / 2)")]),
    ("01", "1.3", "min(1, .) left out", [("return min(1.0, others) * spread", "return others * spread")]),
    ("01", "1.3", "the gap left out", [("math.exp(-s * gap)", "math.exp(-s)")]),
    ("01", "1.3", "the n - 1 other keys left out", [("others = (n - 1) * math.exp", "others = math.exp")]),
    ("01", "1.3", "the spread left out", [("return min(1.0, others) * spread", "return min(1.0, others)")]),
    # 1.4 beta_needed
    (
        "01",
        "1.4",
        "n keys instead of the n - 2 others",
        [("math.log((n - 2) * (1 / tau - 0.5))", "math.log(n * (1 / tau - 0.5))")],
    ),
    (
        "01",
        "1.4",
        "2 eps <= tau solved as eps <= tau",
        [("math.log((n - 2) * (1 / tau - 0.5))", "math.log((n - 2) * (1 / tau - 1))")],
    ),
    ("01", "1.4", "no logarithm", [("math.log((n - 2) * (1 / tau - 0.5))", "(n - 2) * (1 / tau - 0.5)")]),
    (
        "01",
        "1.4",
        "the looser bound (n - 2) e^-beta <= tau",
        [("math.log((n - 2) * (1 / tau - 0.5))", "math.log((n - 2) / tau)")],
    ),
    # 1.5 projection_onto
    ("01", "1.5", "A A^T without orthonormalising", [("return Q @ Q.T  # (d, d)", "return A @ A.T  # (d, d)")]),
    ("01", "1.5", "Q^T Q: a (p, p) matrix", [("return Q @ Q.T  # (d, d)", "return Q.T @ Q  # (d, d)")]),
    (
        "01",
        "1.5",
        "the projector onto the complement",
        [("return Q @ Q.T  # (d, d)", "return torch.eye(len(A), dtype=A.dtype) - Q @ Q.T  # (d, d)")],
    ),
    (
        "01",
        "1.5",
        "the identity",
        [("return Q @ Q.T  # (d, d)", "return torch.eye(len(A), dtype=A.dtype)  # (d, d)")],
    ),
    ("01", "1.5", "QR of the transpose", [("torch.linalg.qr(A)  # (d, p)", "torch.linalg.qr(A.T)  # (d, p)")]),
    # 1.6 two_head_queries
    (
        "01",
        "1.6",
        "both heads on key a",
        [("return beta * mu[a], beta * mu[b]", "return beta * mu[a], beta * mu[a]")],
    ),
    (
        "01",
        "1.6",
        "the single head's query, twice",
        [("return beta * mu[a], beta * mu[b]", "return beta * (mu[a] + mu[b]), beta * (mu[a] + mu[b])")],
    ),
    ("01", "1.6", "no scale beta", [("return beta * mu[a], beta * mu[b]", "return mu[a], mu[b]")]),
    (
        "01",
        "1.6",
        "head 2 pointed away from b",
        [("return beta * mu[a], beta * mu[b]", "return beta * mu[a], -beta * mu[b]")],
    ),
    # 1.7 route_projections
    (
        "01",
        "1.7",
        "queries routed the wrong way round",
        [("torch.outer(u_d, u_a) + torch.outer(u_c, u_d)", "torch.outer(u_c, u_a) + torch.outer(u_d, u_d)")],
    ),
    (
        "01",
        "1.7",
        "u_c kept instead of flipped",
        [("torch.outer(u_b, u_b) - torch.outer(u_c, u_c)", "torch.outer(u_b, u_b) + torch.outer(u_c, u_c)")],
    ),
    (
        "01",
        "1.7",
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
        "1.7",
        "no routing: Q = I",
        [
            (
                "Q = (torch.outer(u_d, u_a) + torch.outer(u_c, u_d)) / beta2",
                "Q = torch.eye(len(u_a), dtype=u_a.dtype)",
            )
        ],
    ),
    # 1.8 score_variance and score_scale
    (
        "01",
        "1.8",
        "the standard deviation, not the variance",
        [("return d * var_q * var_k", "return math.sqrt(d * var_q * var_k)")],
    ),
    ("01", "1.8", "var_k forgotten", [("return d * var_q * var_k", "return d * var_q")]),
    ("01", "1.8", "variances added", [("return d * var_q * var_k", "return d * (var_q + var_k)")]),
    ("01", "1.8", "d forgotten", [("return d * var_q * var_k", "return var_q * var_k")]),
    (
        "01",
        "1.8",
        "divided by the variance, not its root",
        [("return 1 / math.sqrt(d * var_q * var_k)", "return 1 / (d * var_q * var_k)")],
    ),
    ("01", "1.8", "not scaled", [("return 1 / math.sqrt(d * var_q * var_k)", "return 1.0")]),
    ("01", "1.8", "fourth root", [("return 1 / math.sqrt(d * var_q * var_k)", "return (d * var_q * var_k) ** -0.25")]),
    ("01", "1.8", "the variances ignored", [("return 1 / math.sqrt(d * var_q * var_k)", "return 1 / math.sqrt(d)")]),
]
