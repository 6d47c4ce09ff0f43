"""Wrong answers for notebook 03's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/course/test_exercises.py grades the result and requires
that exercise, and no other, to fail (with AssertionError unless a fifth field names the error)."""

_UNION = 'a, b = root(("fr", fr)), root(("en", en))'
_UNSCALE = "run.scaler.unscale_(run.optimizer)  # true gradients again, before clipping"
_CLIP = "grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)"
_EOS = "                done[r] = True  # <eos> ends the row and is not part of its output"
_LABELS = "labels[b, e.prefix_len - 1 : L - 1] = input_ids[b, e.prefix_len : L]"

CATALOGUE = [
    # 3.1 groups of pairs that share a sentence
    ("03", "3.1", "grouped by the French sentence only", [(_UNION, 'a, b = root(("fr", fr)), root(("fr", fr))')]),
    (
        "03",
        "3.1",
        "grouped by the English sentence only",
        [
            (_UNION, 'a, b = root(("en", en)), root(("en", en))'),
            (
                'for i, (fr, _) in enumerate(pairs):\n        groups.setdefault(root(("fr", fr)), [])',
                'for i, (_, en) in enumerate(pairs):\n        groups.setdefault(root(("en", en)), [])',
            ),
        ],
    ),
    ("03", "3.1", "the sentence linked, not its group's root", [(_UNION, 'a, b = ("fr", fr), root(("en", en))')]),
    # 3.2 a bucketed batch as tensors
    ("03", "3.2", "labels not shifted", [(_LABELS, "labels[b, e.prefix_len : L] = input_ids[b, e.prefix_len : L]")]),
    ("03", "3.2", "loss on the French too", [(_LABELS, "labels[b, : L - 1] = input_ids[b, 1:L]")]),
    (
        "03",
        "3.2",
        "padding not hidden from attention",
        [
            (
                "attention = (causal[None] | in_prefix[:, None, :]) & real[:, None, :]",
                "attention = causal[None] | in_prefix[:, None, :]",
            )
        ],
    ),
    (
        "03",
        "3.2",
        "padding on the left",
        [("input_ids[b, :L] = torch.tensor(e.input_ids)", "input_ids[b, T - L :] = torch.tensor(e.input_ids)")],
    ),
    (
        "03",
        "3.2",
        "the prefix one token too long",
        [("in_prefix = pos[None, :] < prefix_len[:, None]", "in_prefix = pos[None, :] <= prefix_len[:, None]")],
    ),
    # 3.3 the training step, with an enabled gradient scaler
    (
        "03",
        "3.3",
        "gradients never zeroed",
        [("        run.optimizer.zero_grad(set_to_none=True)\n", "        pass\n")],
    ),
    (
        "03",
        "3.3",
        "loss without label smoothing",
        [("loss = train.loss_fn(logits, labels, cfg.label_smoothing)", "loss = train.loss_fn(logits, labels)")],
    ),
    (
        "03",
        "3.3",
        "causal mask: prefix_len not passed",
        [("logits = model(ids, plen, logits_at", "logits = model(ids, logits_at")],
    ),
    (
        "03",
        "3.3",
        "no gradient clipping",
        [(_CLIP, 'grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))')],
    ),
    ("03", "3.3", "no unscale_: clipping sees the scaled gradients", [(_UNSCALE, "pass")]),
    (
        "03",
        "3.3",
        "clipping before unscaling",
        [(f"{_UNSCALE}\n        {_CLIP}", f"{_CLIP}\n        run.scaler.unscale_(run.optimizer)")],
    ),
    ("03", "3.3", "scaler.update() forgotten", [("        run.scaler.update()\n", "")]),
    (
        "03",
        "3.3",
        "optimizer.step() instead of scaler.step(optimizer)",
        [("run.scaler.step(run.optimizer)  # fp16: skipped when a gradient overflowed", "run.optimizer.step()")],
    ),
    # 3.4 greedy decoding with the cache
    (
        "03",
        "3.4",
        "<eos> kept in the output",
        [(_EOS, "                done[r] = True\n                out[r].append(token)")],
    ),
    ("03", "3.4", "a row goes on after its <eos>", [(_EOS, "                pass")]),
    ("03", "3.4", "new token one position early", [("next_pos = positions[:, -1] + 1", "next_pos = positions[:, -1]")]),
    (
        "03",
        "3.4",
        "padding readable",
        [("real = cols[None, :] >= pad[:, None]", "real = torch.ones(N, S, dtype=torch.bool, device=device)")],
    ),
    (
        "03",
        "3.4",
        "positions counted from the padded edge",
        [("positions = (cols[None, :] - pad[:, None]).clamp(min=0)", "positions = cols[None, :].expand(N, S)")],
    ),
    (
        "03",
        "3.4",
        "budget off by one",
        [("done[r] = len(out[r]) >= budgets[r]", "done[r] = len(out[r]) > budgets[r]")],
    ),
    # 3.5 BLEU by hand
    (
        "03",
        "3.5",
        "n-grams not clipped",
        [
            (
                "sum(min(c, ref_counts[g]) for g, c in hyp_counts.items())",
                "sum(c for g, c in hyp_counts.items() if g in ref_counts)",
            )
        ],
    ),
    (
        "03",
        "3.5",
        "no brevity penalty",
        [("bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len) if hyp_len else 0.0", "bp = 1.0")],
    ),
    (
        "03",
        "3.5",
        "brevity penalty upside down",
        [("math.exp(1 - ref_len / hyp_len)", "math.exp(1 - hyp_len / ref_len)")],
    ),
    (
        "03",
        "3.5",
        "arithmetic mean of the precisions",
        [("math.exp(sum(math.log(p / 100) for p in precisions) / max_n)", "sum(p / 100 for p in precisions) / max_n")],
    ),
    (
        "03",
        "3.5",
        "split on spaces, not the 13a tokenizer",
        [("h, r = tokenize_13a(hyp).split(), tokenize_13a(ref).split()", "h, r = hyp.split(), ref.split()")],
    ),
]
