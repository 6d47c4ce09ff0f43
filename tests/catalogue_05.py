"""Wrong answers for notebook 05's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/test_exercises.py grades the result and requires
that exercise, and no other, to fail (with AssertionError unless a fifth field names the error)."""

CATALOGUE = [
    ("05", "5.1", "no ReLU", [("h = torch.relu(w1(x)).view(", "h = w1(x).view(")]),
    ("05", "5.1", "the mask not applied", [('scores.masked_fill(~mask, float("-inf")), dim=-1)', "scores, dim=-1)")]),
    (
        "05",
        "5.1",
        "softmax over the queries",
        [('float("-inf")), dim=-1)  # over the keys', 'float("-inf")), dim=-2)')],
    ),
    ("05", "5.1", "b2 left out", [("scores = h @ w2[:, :, :T] + b2[:, None, :T]", "scores = h @ w2[:, :, :T]")]),
    (
        "05",
        "5.2",
        "a key may not be read at its own horizon",
        [("ok = k_horizon[None, None, :] <= q_horizon", "ok = k_horizon[None, None, :] < q_horizon")],
    ),
    (
        "05",
        "5.2",
        "the source rule left out",
        [("return (ok | source_only)[:, None]", "return ok.expand(len(prefix_len), -1, -1)[:, None]")],
    ),
    (
        "05",
        "5.2",
        "the <sep> counted as target",
        [
            (
                "k_horizon[None, None, :] < prefix_len[:, None, None]",
                "k_horizon[None, None, :] < prefix_len[:, None, None] - 1",
            )
        ],
    ),
]
