"""Wrong answers for notebook 04's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/test_exercises.py grades the result and requires
that exercise, and no other, to fail (with AssertionError unless a fifth field names the error)."""

CATALOGUE = [
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
]
