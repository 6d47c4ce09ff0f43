"""Notebook 05: every row and figure is written, each variant passes the leakage checks, the complexity
measurement agrees with the derivation, and pretraining shares the budget instead of adding to it.

The notebook runs once in-process in quick mode (tiny models, the built-in corpus). Its two exercises (the
synthesizer's weights and the horizon rule) are checked against helpers.variants; their wrong answers are
in tests/test_exercises.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers import exercises, runtime

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "05_research_variants.py"
FIGURES = ["05_complexity", "05_variant_curves", "05_positions", "05_pretraining", "05_sweep"]


@pytest.fixture(scope="module")
def nb():
    threads = torch.get_num_threads()
    ns = exercises.run_solved(NOTEBOOK)
    yield ns
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def record(nb):
    return json.loads((runtime.metrics_dir() / "05_variants.json").read_text())


def test_every_row_is_scored_and_names_its_test_sets(record):
    labels = [r["label"] for r in record["rows"]]
    assert labels[0] == "vanilla" and len(labels) == len(set(labels))
    for needed in ("synthesizer", "bottleneck m=4", "positions rotary", "positions alibi", "positions none"):
        assert needed in labels
    assert sum("pretrained," in x for x in labels) == 2 and sum("scratch," in x for x in labels) == 1  # + vanilla
    for row in record["rows"]:
        assert row["steps"] > 0 and row["val_loss"] > 0 and 100 <= row["eval_sentences"] <= 200
        assert 0 <= row["bleu_new"] <= 100 and 0 <= row["bleu_valid"] <= 100
    assert "never used to choose" in record["scores"]["bleu_new"] and "validation" in record["scores"]["bleu_valid"]


def test_rows_change_what_they_say(record):
    rows = {r["label"]: r for r in record["rows"]}
    assert rows["synthesizer"]["changed"] == {"attention": "synthesizer"}
    assert rows["positions rotary"]["changed"] == {"positional": "rotary"}
    assert rows["vanilla"]["changed"] == {}
    assert rows["synthesizer"]["parameters"] != rows["vanilla"]["parameters"]
    assert set(rows["pretrained embeddings"]["changed"]) == {"init_embeddings"}
    assert "token embeddings from" in rows["pretrained embeddings"]["embeddings"]


def test_pretraining_shares_the_budget(record):
    rows = {r["label"]: r for r in record["rows"]}
    for n in ("300", "all"):
        pre, scratch = rows[f"pretrained, {n} pairs"], rows["vanilla" if n == "all" else f"scratch, {n} pairs"]
        assert pre["pretrain_steps"] + pre["steps"] == scratch["steps"] == 300
        assert scratch["pretrain_steps"] == 0
    assert rows["scratch, 300 pairs"]["pairs"] <= 300 < rows["vanilla"]["pairs"]


def test_leakage_checks_and_complexity(record):
    assert record["leakage_checks"] and all(all(v.values()) for v in record["leakage_checks"].values())
    for rows in record["complexity"].values():
        assert [r["length"] for r in rows] == sorted(r["length"] for r in rows)
        assert all(b["bytes"] > a["bytes"] for a, b in zip(rows, rows[1:]))


def test_figures_are_written_with_their_questions(nb):
    for name in FIGURES:
        meta = json.loads((runtime.figures_dir() / f"{name}.json").read_text())
        assert meta["question"].endswith("?") and meta["caption"]
        for ext in ("pdf", "png"):
            assert (runtime.figures_dir() / f"{name}.{ext}").is_file(), f"{name}.{ext}"


def test_leakage_check_catches_a_leak(nb):
    """The notebook's leakage report can fail: a model whose mask lets the future in is caught."""
    from helpers import model as M

    original = M.build_attention_mask
    try:
        M.build_attention_mask = lambda T, prefix_len=None, device=None: torch.ones(1, 1, T, T, dtype=torch.bool)
        assert nb["leakage_report"]({})["causal"] is False
    finally:
        M.build_attention_mask = original
    assert nb["leakage_report"]({}) == {"causal": True, "source seen both ways": True, "padding-safe": True}
