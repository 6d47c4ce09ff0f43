"""Wrong answers for notebook 06's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/test_exercises.py grades the result and requires
that exercise, and no other, to fail (with AssertionError unless a fifth field names the error)."""

CATALOGUE = [
    # 6.1: exact-match accuracy
    ("06", "6.1", "case kept: 'dunmere' is not 'Dunmere'", [('string.punctuation + " ").casefold().split())', 'string.punctuation + " ").split())')]),
    ("06", "6.1", "punctuation at the ends kept", [('text.strip().strip(string.punctuation + " ")', "text.strip()")]),
    ("06", "6.1", "containment counted as a match", [("normalise_place(p) == normalise_place(a) for p, a", "normalise_place(a) in normalise_place(p) for p, a")]),
    ("06", "6.1", "a prefix counted as a match", [("normalise_place(p) == normalise_place(a) for p, a", "normalise_place(p).startswith(normalise_place(a)) for p, a")]),
    ("06", "6.1", "a count, not a share", [("return sum(hits) / len(answers)", "return float(sum(hits))")]),
    # 6.2: the most-common-place baseline
    ("06", "6.2", "the town picked on the test answers (a leak)", [("counts = Counter(normalise_place(a) for a in train_answers)", "counts = Counter(normalise_place(a) for a in test_answers)")]),
    ("06", "6.2", "training and test answers pooled", [("counts = Counter(normalise_place(a) for a in train_answers)", "counts = Counter(normalise_place(a) for a in [*train_answers, *test_answers])")]),
    ("06", "6.2", "scored on the training answers", [("exact_match_accuracy([place] * len(test_answers), test_answers)", "exact_match_accuracy([place] * len(train_answers), train_answers)")]),
    (
        "06",
        "6.2",
        "towns counted as written, not normalised",
        [
            ("counts = Counter(normalise_place(a) for a in train_answers)", "counts = Counter(a.strip() for a in train_answers)"),
            ("if counts[normalise_place(a)] == top)", "if counts[a.strip()] == top)"),
        ],
    ),
    ("06", "6.2", "a tie goes to the town seen last", [("for a in train_answers if counts", "for a in reversed(train_answers) if counts")]),
]  # fmt: skip
