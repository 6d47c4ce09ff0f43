"""Wrong answers for notebook 03's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/test_exercises.py grades the result and requires
that exercise, and no other, to fail (with AssertionError unless a fifth field names the error)."""

CATALOGUE = [
    ("03", "3.1", "gradients never zeroed", [("run.optimizer.zero_grad(set_to_none=True)", "pass")]),
    (
        "03",
        "3.1",
        "loss without label smoothing",
        [("T.loss_fn(logits, labels, cfg.label_smoothing)", "T.loss_fn(logits, labels)")],
    ),
    ("03", "3.1", "causal mask: prefix_len not passed", [("logits = model(ids, plen)", "logits = model(ids)")]),
    (
        "03",
        "3.1",
        "no gradient clipping",
        [("clip_grad_norm_(model.parameters(), cfg.grad_clip)", 'clip_grad_norm_(model.parameters(), float("inf"))')],
    ),
]
