"""Wrong answers for notebook 04's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/course/test_exercises.py grades the result and requires
that exercise, and no other, to fail (with AssertionError unless a fifth field names the error)."""

CATALOGUE = [
    # 4.1 the prompt and labels of our format
    ("04", "4.1", "loss on the prompt too", [('"labels": [-100] * len(prompt) + target', '"labels": prompt + target')]),
    (
        "04",
        "4.1",
        "no <eos>: the model never learns to stop",
        [('target = ids(" " + en) + [tokenizer.eos_token_id]', 'target = ids(" " + en)')],
    ),
    ("04", "4.1", "no space before the English", [('ids(" " + en)', "ids(en)")]),
    (
        "04",
        "4.1",
        "prompt tokenized in pieces",
        [('ids("French: " + fr + "\\nEnglish:")', 'ids("French: ") + ids(fr) + ids("\\nEnglish:")')],
    ),
    (
        "04",
        "4.1",
        "labels shifted by hand, as in notebook 03: Hugging Face shifts them again",
        [('"labels": [-100] * len(prompt) + target', '"labels": [-100] * (len(prompt) - 1) + target + [-100]')],
    ),
    (
        "04",
        "4.1",
        "the space ends the prompt: the model is given it instead of writing it",
        [
            ('ids("French: " + fr + "\\nEnglish:")', 'ids("French: " + fr + "\\nEnglish: ")'),
            ('ids(" " + en)', "ids(en)"),
        ],
    ),
    # 4.2 the padded batch
    (
        "04",
        "4.2",
        "labels padded with pad_id: the padding is scored",
        [
            (
                '"labels": torch.full((len(examples), width), -100, dtype=torch.long)',
                '"labels": torch.full((len(examples), width), pad_id, dtype=torch.long)',
            )
        ],
    ),
    (
        "04",
        "4.2",
        "labels masked where ids == pad_id: the <eos> label is lost",
        [
            (
                "    return batch\n    # END SOLUTION",
                '    batch["labels"][batch["input_ids"] == pad_id] = -100\n    return batch\n    # END SOLUTION',
            )
        ],
    ),
    (
        "04",
        "4.2",
        "attention mask 1 on the padding too",
        [
            (
                '"attention_mask": torch.zeros((len(examples), width), dtype=torch.long)',
                '"attention_mask": torch.ones((len(examples), width), dtype=torch.long)',
            )
        ],
    ),
    (
        "04",
        "4.2",
        "padded on the left",
        [
            ('batch["input_ids"][i, :n]', 'batch["input_ids"][i, width - n :]'),
            ('batch["attention_mask"][i, :n]', 'batch["attention_mask"][i, width - n :]'),
            ('batch["labels"][i, :n]', 'batch["labels"][i, width - n :]'),
        ],
    ),
    # 4.3 the paired bootstrap
    (
        "04",
        "4.3",
        "not paired: each system resampled with its own sentences",
        [
            (
                "diffs = np.array([score(stats_b[i].sum(axis=0)) - score(stats_a[i].sum(axis=0)) for i in idx])",
                "other = np.random.default_rng(seed + 1).integers(0, n, size=(n_samples, n))\n"
                "    diffs = np.array([score(stats_b[i].sum(axis=0)) - score(stats_a[j].sum(axis=0))"
                " for i, j in zip(idx, other)])",
            )
        ],
    ),
    ("04", "4.3", "a tie counted as a win for B", [("np.mean(diffs <= 0)", "np.mean(diffs < 0)")]),
    (
        "04",
        "4.3",
        "resampled without replacement",
        [
            (
                "np.random.default_rng(seed).integers(0, n, size=(n_samples, n))",
                "np.stack([np.random.default_rng(seed + k).permutation(n) for k in range(n_samples)])",
            )
        ],
    ),
    (
        "04",
        "4.3",
        "A minus B in the resamples",
        [
            (
                "score(stats_b[i].sum(axis=0)) - score(stats_a[i].sum(axis=0))",
                "score(stats_a[i].sum(axis=0)) - score(stats_b[i].sum(axis=0))",
            )
        ],
    ),
    (
        "04",
        "4.3",
        "the mean of sentence scores instead of corpus BLEU",
        [
            (
                "diffs = np.array([score(stats_b[i].sum(axis=0)) - score(stats_a[i].sum(axis=0)) for i in idx])",
                "diffs = np.array([np.mean([score(s) for s in stats_b[i]]) - np.mean([score(s) for s in stats_a[i]])"
                " for i in idx])",
            ),
            (
                '"difference": score(stats_b.sum(axis=0)) - score(stats_a.sum(axis=0)),',
                '"difference": np.mean([score(s) for s in stats_b]) - np.mean([score(s) for s in stats_a]),',
            ),
        ],
    ),
    # 4.4 the fluent-but-wrong checker
    ("04", "4.4", "invented: the source forgotten", [("made_up = out - ref - src", "made_up = out - ref")]),
    ("04", "4.4", "dropped: the reference forgotten", [("lost = (src & ref) - out", "lost = src - out")]),
    (
        "04",
        "4.4",
        "only the text's first word starts a sentence",
        [('starts_sentence = not before or before[-1] in ".!?:;"', "starts_sentence = not before")],
    ),
    (
        "04",
        "4.4",
        "a number that starts a sentence is skipped",
        [("if m.group()[0].isdigit() or not starts_sentence:", "if not starts_sentence:")],
    ),
    ("04", "4.4", "opening quotes not stripped", [('.rstrip(" \\"\'«“")', ".rstrip()")]),
]
