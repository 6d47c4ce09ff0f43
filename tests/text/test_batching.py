"""A pretrained model's translation batches are sized in tokens (helpers.hf.pretrained.token_batches).

A batch is padded to its longest source and generates until its last row stops, so it costs about
rows × longest. With a fixed number of sentences per batch the last batch (the longest sources) is the
largest by far; sized in tokens, no batch of several sentences costs more than the budget. The order of the
translations is the order of the sources whatever the batches. The check of the bound is shown to fail on
the fixed-size batches it replaces.
"""

from __future__ import annotations

import random
import statistics

import pytest
import torch

from helpers.hf import pretrained
from helpers.hf.pretrained import token_batches


def _lengths(n: int = 300, seed: int = 0) -> list[int]:
    """Source lengths with a long tail, as a test set has: mostly 5-20 tokens, a few up to 120."""
    rng = random.Random(seed)
    return [rng.randint(5, 20) if rng.random() < 0.9 else rng.randint(21, 120) for _ in range(n)]


def bound_violations(batches: list[list[int]], lengths: list[int], max_rows: int, max_tokens: int) -> list[str]:
    """What breaks the contract of token_batches: every index once, sorted by length (ties in input order),
    at most ``max_rows`` rows, rows × longest ≤ ``max_tokens`` unless the batch is one sentence."""
    problems = []
    flat = [i for b in batches for i in b]
    if flat != sorted(range(len(lengths)), key=lambda i: lengths[i]):
        problems.append("not every source exactly once, shortest first")
    for k, b in enumerate(batches):
        if not b or len(b) > max_rows:
            problems.append(f"batch {k} has {len(b)} rows")
        elif len(b) > 1 and len(b) * max(lengths[i] for i in b) > max_tokens:
            problems.append(f"batch {k}: {len(b)} rows × {max(lengths[i] for i in b)} > {max_tokens}")
    return problems


def _fixed(lengths: list[int], rows: int) -> list[list[int]]:
    """The batching this replaces: sorted by length, cut every ``rows`` sentences."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[s : s + rows] for s in range(0, len(order), rows)]


@pytest.mark.parametrize("max_rows, max_tokens", [(64, None), (64, 500), (8, 10_000), (32, 50)])
def test_batches_are_bounded_in_tokens_and_keep_every_source_once(max_rows, max_tokens):
    lengths = _lengths()
    batches = token_batches(lengths, max_rows, max_tokens)
    budget = max_tokens if max_tokens is not None else max_rows * statistics.median_high(lengths)
    assert bound_violations(batches, lengths, max_rows, budget) == []
    if max_tokens == 50:  # sources longer than the budget go alone
        assert any(len(b) == 1 and lengths[b[0]] > 50 for b in batches)


def test_default_budget_is_a_full_batch_of_median_sources_and_the_longest_batches_shrink():
    lengths = _lengths()
    batches = token_batches(lengths, 64)
    median = statistics.median_high(lengths)
    assert len(batches[0]) == 64, "short sources still fill a batch"
    costs = [len(b) * max(lengths[i] for i in b) for b in batches]
    assert all(cost <= 64 * median for cost, b in zip(costs, batches) if len(b) > 1), costs
    assert len(batches[-1]) < len(batches[len(batches) // 2]), "the longest sources must come in smaller batches"


def test_bound_check_catches_fixed_size_batches():
    """Control: cut every 64 sentences, the tail batch holds 64 rows of the longest sources, far over budget."""
    lengths = _lengths()
    fixed = _fixed(lengths, 64)
    problems = bound_violations(fixed, lengths, 64, 64 * statistics.median_high(lengths))
    assert problems and all(">" in p for p in problems), problems
    shuffled = [fixed[0][::-1], *fixed[1:]]  # and one batch out of length order
    assert "not every source exactly once, shortest first" in bound_violations(shuffled, lengths, 64, 10**9)


def test_edge_cases():
    assert token_batches([], 64) == []
    assert token_batches([0, 0, 3], 2) == [[0, 1], [2]]  # a source with no tokens costs nothing
    assert token_batches([5, 5, 5], 64, max_tokens=1) == [[0], [1], [2]]
    assert token_batches([3, 1, 2], 64) == [[1, 2, 0]]


def _fake_translator(max_source_tokens: int = 1000):
    """An HFTranslator whose tokenizer splits on spaces and whose 'model' upper-cases the sentence; it records
    each batch it is given. Enough to test the batching and the ordering in translate without a model."""
    tr = object.__new__(pretrained.HFTranslator)
    tr.model = torch.nn.Linear(1, 1)
    tr.max_source_tokens = max_source_tokens
    tr._ids = lambda text: text.split()
    tr.seen = []

    def generate(texts, lengths, beams, length_penalty):
        tr.seen.append(list(lengths))
        return [t.upper() for t in texts]

    tr._generate_batch = generate
    return tr


def test_translate_batches_in_tokens_and_returns_the_sources_order():
    rng = random.Random(1)
    sources = [" ".join(f"w{k}" for k in range(n)) for n in _lengths(200, seed=1)]
    sources[3], sources[50] = "", "   "  # blank lines give blank output and are not sent to the model
    rng.shuffle(sources)
    tr = _fake_translator()
    out = tr.translate(sources, batch_size=16, max_tokens=200)
    assert out == [s.strip().upper() for s in sources]
    assert sum(map(len, tr.seen)) == 198
    for lengths in tr.seen:
        assert len(lengths) <= 16 and (len(lengths) == 1 or len(lengths) * max(lengths) <= 200), lengths
    assert [n for b in tr.seen for n in b] == sorted(n for b in tr.seen for n in b)


def test_translate_batches_a_cut_source_at_its_cut_length():
    from helpers.evaluation.evaluate import TranslateReport

    tr = _fake_translator(max_source_tokens=30)
    report = TranslateReport()
    out = tr.translate(["a " * 100, "b c", "d " * 40], batch_size=64, max_tokens=60, report=report)
    assert out[1] == "B C" and report.truncated == [(1, 100, 30), (3, 40, 30)]
    assert tr.seen == [[2, 30], [30]]
