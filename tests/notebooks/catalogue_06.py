"""Wrong answers for notebook 06's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/course/test_exercises.py grades the result and requires
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
CATALOGUE += [
    # 6.3: the fine-tuning examples
    ("06", "6.3", "labels not shifted: each position asks for its own token", [("        labels[t] = input_ids[t + 1]\n", "        labels[t] = input_ids[t]\n")]),
    ("06", "6.3", "the loss on the question too", [("for t in range(n_source - 1, len(input_ids) - 1):", "for t in range(0, len(input_ids) - 1):")]),
    ("06", "6.3", "no loss on <eos>: the model never learns to stop", [("for t in range(n_source - 1, len(input_ids) - 1):", "for t in range(n_source - 1, len(input_ids) - 2):")]),
    ("06", "6.3", "the first answer piece not asked for (labels start after <sep>)", [("for t in range(n_source - 1, len(input_ids) - 1):", "for t in range(n_source, len(input_ids) - 1):")]),
    ("06", "6.3", "too long by one kept", [("if not q or not a or len(q) + len(a) + 3 > max_len:", "if not q or not a or len(q) + len(a) + 2 > max_len:")]),
    ("06", "6.3", "no <eos> after the answer", [("ids = [tok.bos_id, *q, tok.sep_id, *a, tok.eos_id]", "ids = [tok.bos_id, *q, tok.sep_id, *a]")]),
    # 6.4: span-corruption examples of the biographies
    ("06", "6.4", "the span's length drawn before the kept length", [
        ("    n = rng.randint(min(4, longest), longest)\n    span_len = min(rng.randint(1, max(1, n // 2)), n - 1)\n",
         "    first = rng.randint(1, max(1, longest // 2))\n    n = rng.randint(min(4, longest), longest)\n    span_len = min(first, max(1, n // 2), n - 1)\n"),
    ]),
    ("06", "6.4", "the whole biography kept (no random beginning)", [("    n = rng.randint(min(4, longest), longest)\n", "    n = longest\n")]),
    ("06", "6.4", "the loss on the corrupted source too", [("return example, answer_labels(example, len(prefix) + len(suffix) + 3)", "return example, answer_labels(example, 1)")]),
    ("06", "6.4", "one generator for every epoch: the same cuts each epoch", [('rng = random.Random(f"{seed}-{epoch}")', 'rng = random.Random(f"{seed}-0")')]),
    ("06", "6.4", "a fresh generator per biography", [
        ("    examples = [corrupt_biography(ids, rng, max_len) for ids in biography_ids]",
         '    examples = [corrupt_biography(ids, random.Random(f"{seed}-{epoch}"), max_len) for ids in biography_ids]'),
    ]),
    # 6.5: pretrain, fine-tune, evaluate
    ("06", "6.5", "pretrained on the fine-tuning people's biographies only", [
        ("    bios = tok.encode_batch(data.biographies)  # everyone's",
         "    bios = tok.encode_batch([b for p, b in zip(data.people, data.biographies) if p in data.finetune])  # everyone's"),
    ]),
    ("06", "6.5", "fine-tuned at the pretraining learning rate", [
        ("ft_cfg = knowledge.training_config(model_cfg, kcfg.finetune_steps, kcfg.finetune_lr, seed)",
         "ft_cfg = knowledge.training_config(model_cfg, kcfg.finetune_steps, model_cfg.lr, seed)"),
    ]),
    ("06", "6.5", "the held-out people's questions in fine-tuning (a leak)", [
        ("    questions = [finetune_example(tok, q, a, max_len) for q, a in data.finetune_pairs]",
         "    questions = [finetune_example(tok, q, a, max_len) for q, a in data.finetune_pairs + data.test_pairs]"),
    ]),
    ("06", "6.5", "the two models start from different weights", [
        ("        model = knowledge.new_model(tok, model_cfg, seed, device)  # the same start for both",
         "        model = knowledge.new_model(tok, model_cfg, seed + (name == 'pretrained'), device)"),
    ]),
    ("06", "6.5", "asked about the fine-tuning people", [
        ("    answers = {name: knowledge.answer_questions(m, tok, data.test_pairs) for name, m in models.items()}",
         "    answers = {name: knowledge.answer_questions(m, tok, data.finetune_pairs[: len(data.test)]) for name, m in models.items()}"),
    ]),
    ("06", "6.5", "the baseline's town picked on the test answers", [
        ("    place, baseline = most_common_place_baseline([p.born for p in data.finetune], gold)",
         "    place, baseline = most_common_place_baseline(gold, gold)"),
    ]),
    # 6.6: word vectors into the embedding table
    ("06", "6.7", "not centred", [("    X = X - X.mean(0)\n    X = X * (std / X.std())\n", "    X = X * (std / X.std())\n")]),
    ("06", "6.7", "each vector scaled on its own", [("    X = X * (std / X.std())\n", "    X = X * (std / X.std(dim=1, keepdim=True))\n")]),
    ("06", "6.7", "byte pieces written too", [('if i > tok.unk_id and not tok.id_to_piece(i).startswith("<0x") and str(i) in wv', "if i > tok.unk_id and str(i) in wv")]),
    ("06", "6.7", "a new parameter: the output layer no longer tied", [
        ("    with torch.no_grad():\n        model.tok_emb.weight[ids] = X.to(model.tok_emb.weight.dtype)\n",
         "    table = model.tok_emb.weight.detach().clone()\n    table[ids] = X.to(table.dtype)\n    model.tok_emb.weight = torch.nn.Parameter(table)\n"),
    ]),
    ("06", "6.7", "scaled to the std of the model's whole table, not std", [("    X = X * (std / X.std())\n", "    X = X * (model.tok_emb.weight.std().item() / X.std())\n")]),
]  # fmt: skip
