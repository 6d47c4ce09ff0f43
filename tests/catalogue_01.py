"""Wrong answers for notebook 01's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/test_exercises.py grades the result and requires
that exercise, and no other, to fail (with AssertionError unless a fifth field names the error)."""

CATALOGUE = [
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
    ("01", "1.2", "the largest gap instead of the smallest", [("gap.min().item()", "gap.max().item()")]),
    ("01", "1.2", "the gap left out", [("math.exp(-s * gap.min().item())", "math.exp(-s)")]),
    ("01", "1.2", "the mean gap instead of the smallest", [("gap.min().item()", "gap.mean().item()")]),
    ("01", "1.2", "the n - 1 other keys left out", [("(len(K) - 1) * math.exp", "math.exp")]),
    (
        "01",
        "1.3",
        "n keys instead of the n - 2 others",
        [("math.log((n - 2) * (1 / tau - 0.5))", "math.log(n * (1 / tau - 0.5))")],
    ),
    (
        "01",
        "1.3",
        "2 eps <= tau solved as eps <= tau",
        [("math.log((n - 2) * (1 / tau - 0.5))", "math.log((n - 2) * (1 / tau - 1))")],
    ),
    ("01", "1.3", "no logarithm", [("math.log((n - 2) * (1 / tau - 0.5))", "(n - 2) * (1 / tau - 0.5)")]),
    ("01", "1.4", "divided by d", [("return 1 / math.sqrt(d)", "return 1 / d")]),
    ("01", "1.4", "not scaled", [("return 1 / math.sqrt(d)", "return 1.0")]),
    ("01", "1.4", "fourth root", [("return 1 / math.sqrt(d)", "return d**-0.25")]),
]
