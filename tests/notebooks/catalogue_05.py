"""Wrong answers for notebook 05's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/course/test_exercises.py grades the result and requires
that exercise, and no other, to fail (with AssertionError unless a fifth field names the error)."""

CATALOGUE = [
    # 5.1 synthesizer attention
    ("05", "5.1", "no ReLU", [("h = torch.relu(w1(x)).view(", "h = w1(x).view(")]),
    ("05", "5.1", "the mask not applied", [('scores.masked_fill(~mask, float("-inf")), dim=-1)', "scores, dim=-1)")]),
    (
        "05",
        "5.1",
        "softmax over the queries",
        [('float("-inf")), dim=-1)  # over the keys', 'float("-inf")), dim=-2)')],
    ),
    ("05", "5.1", "b2 left out", [("scores = h @ w2[:, :, :T] + b2[:, None, :T]", "scores = h @ w2[:, :, :T]")]),
    # 5.2 the horizon rule
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
    (
        "05",
        "5.2",
        "the course's latent horizons (i, not spread over the block)",
        [("latents = torch.arange(m) * ell // m", "latents = torch.arange(m)")],
    ),
    (
        "05",
        "5.2",
        "latent horizons rounded up",
        [("latents = torch.arange(m) * ell // m", "latents = (torch.arange(m) * ell + m - 1) // m")],
    ),
    (
        "05",
        "5.2",
        "down and up swapped",
        [
            (
                '"down": may_read(latents, positions, prefix_len),',
                '"down": may_read(positions, latents, prefix_len),',
            ),
            ('"up": may_read(positions, latents, prefix_len),', '"up": may_read(latents, positions, prefix_len),'),
        ],
    ),
    # 5.3 ALiBi's bias
    (
        "05",
        "5.3",
        "slopes start at 1",
        [
            (
                "slopes = 2.0 ** (-8.0 * torch.arange(1, n_head + 1) / n_head)",
                "slopes = 2.0 ** (-8.0 * torch.arange(n_head) / n_head)",
            )
        ],
    ),
    (
        "05",
        "5.3",
        "a bonus for distance: the sign flipped",
        [
            (
                "return -slopes[:, None, None] * distance[None].float()",
                "return slopes[:, None, None] * distance[None].float()",
            )
        ],
    ),
    (
        "05",
        "5.3",
        "the distance |i - j| (not the paper's decoder form)",
        [
            (
                "distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]",
                "distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs()",
            )
        ],
    ),
    (
        "05",
        "5.3",
        "one slope for every head",
        [
            (
                "slopes = 2.0 ** (-8.0 * torch.arange(1, n_head + 1) / n_head)",
                "slopes = torch.full((n_head,), 2.0 ** (-8.0 / n_head))",
            )
        ],
    ),
    # 5.4 span corruption
    (
        "05",
        "5.4",
        "spans average n/2: drawn up to n - 1",
        [("rng.integers(1, max(1, n // 2), endpoint=True)", "rng.integers(1, max(1, n - 1), endpoint=True)")],
    ),
    ("05", "5.4", "the four special tokens forgotten", [("room = max_len - 4  # <bos>", "room = max_len  # <bos>")]),
    (
        "05",
        "5.4",
        "<sep> not counted in the source",
        [("len(prefix) + len(suffix) + 3", "len(prefix) + len(suffix) + 2")],
    ),
    (
        "05",
        "5.4",
        "the suffix taken as the target",
        [
            (
                "return [BOS, *prefix, MASK, *suffix, SEP, *span, EOS]",
                "return [BOS, *prefix, MASK, *span, SEP, *suffix, EOS]",
            )
        ],
    ),
    ("05", "5.4", "the end of the sentence kept", [("kept = list(ids[:n])", "kept = list(ids[len(ids) - n :])")]),
    (
        "05",
        "5.4",
        "no <mask> where the span was",
        [("return [BOS, *prefix, MASK, *suffix, SEP, *span, EOS]", "return [BOS, *prefix, *suffix, SEP, *span, EOS]")],
    ),
    (
        "05",
        "5.4",
        "the span's start drawn before its length",
        [
            (
                "span_len = min(int(rng.integers(1, max(1, n // 2), endpoint=True)), n - 1)  # about n / 4 on average\n"
                "    start = int(rng.integers(0, n - span_len, endpoint=True))",
                "start = int(rng.integers(0, n - 1, endpoint=True))\n"
                "    span_len = min(int(rng.integers(1, max(1, n // 2), endpoint=True)), n - start)",
            )
        ],
    ),
]
