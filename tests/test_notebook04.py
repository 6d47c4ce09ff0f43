"""Notebook 04: it writes the comparison and its figures, its format cell is helpers.pretrained's (defined once,
proven equal, and its assert fails on a plausible slip), and quick mode says its models are not pretrained.

The notebook runs once in-process in quick mode (tiny random Marian and Llama models, the built-in corpus).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from helpers import evaluate as E
from helpers import exercises, runtime
from helpers.notebooks import code_cells

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "04_pretrained_comparison.py"
FIGURES = ["04_bleu_by_test_set", "04_bleu_vs_minutes"]


@pytest.fixture(scope="module")
def nb():
    threads = torch.get_num_threads()
    cells = code_cells(NOTEBOOK)
    ns = exercises.run_solved(NOTEBOOK)  # every cell, and full marks for the solutions
    yield cells, ns
    torch.set_num_threads(threads)
    for key in ("RUNS", "stand_ins"):
        if key in ns:
            shutil.rmtree(ns[key], ignore_errors=True)


def test_comparison_json_has_every_model_on_every_test_set(nb):
    _, ns = nb
    record = json.loads((runtime.metrics_dir() / "04_comparison.json").read_text())
    assert record["quick"] is True and "tiny random" in record["not_pretrained_note"]
    names = [row["model"] for row in record["table"]]
    assert len(names) == 5 and names[0].startswith("ours, scratch")
    assert {"opus-mt as it is", "opus-mt fine-tuned", "SmolLM2 3-shot", "SmolLM2 fine-tuned"} <= set(names)
    for row in record["table"]:
        for test_set in ns["TEST_SETS"]:
            assert set(row[test_set]) >= {"bleu_greedy", "bleu_beam", "chrf_greedy", "sentences_per_s"}
        assert row["parameters"] > 0 and row["trained"] >= 0
    for model in record["models"]:
        assert model["schema"] == E.METRICS_SCHEMA
        for ev in model["evaluations"]:
            assert set(E.EVALUATION_KEYS) <= set(ev), "every model is scored by evaluate_pairs"
    fine_tuned = [r for r in record["table"] if "fine-tuned" in r["model"]]
    assert all(r["minutes"] > 0 and r["tokens"] > 0 and r["trained"] == r["parameters"] for r in fine_tuned)


def test_figures_are_written(nb):
    for name in FIGURES:
        for ext in ("pdf", "png"):
            assert (runtime.figures_dir() / f"{name}.{ext}").is_file(), f"{name}.{ext}"


def test_quick_mode_says_the_models_are_not_pretrained(nb):
    _, ns = nb
    assert not ns["marian"].pretrained and not ns["lm"].pretrained
    assert "NOT pretrained" in ns["marian"].describe()


def test_the_same_split_as_helpers_data(nb):
    """The notebook's test sets are the ones `train`/`finetune` write for the same data, seed and limit."""
    from helpers.data import clean_pairs, split_pairs
    from helpers.sources import load_path

    _, ns = nb
    pairs, _ = load_path(ns["DATA"], ns["COLUMNS"], limit=ns["LIMIT"], seed=ns["SEED"])
    splits = split_pairs(clean_pairs(pairs)[0], seed=ns["SEED"])
    assert ns["splits"].new == splits.new and ns["splits"].test == splits.test


def test_format_cell_is_the_package_format_and_its_assert_can_fail(nb):
    """Defined once: the notebook's lm_example equals HFTranslator.encode_pair; a plausible slip in the cell
    (the separator left out of the mask) makes the notebook's own assert fail."""
    cells, ns = nb
    lm = ns["lm"]
    for fr, en in ns["splits"].train[:20]:
        assert ns["lm_example"](lm.tokenizer, fr, en) == lm.encode_pair(fr, en)
    cell = next(c for c in cells if "def lm_example(" in c.source)
    slip = cell.source.replace("[-100] * len(prompt) + target", "[-100] * (len(prompt) - 1) + prompt[-1:] + target")
    assert slip != cell.source, "the cell changed: update this test"
    env = dict(ns)
    exec(compile(slip, "<notebook 04 lm_example, with a slip>", "exec"), env)
    check = next(c for c in cells if "the notebook's format and helpers.pretrained's disagree" in c.source)
    with pytest.raises(AssertionError, match="disagree"):
        exec(compile(check.source, "<notebook 04 format check>", "exec"), env)


def test_the_as_is_row_is_the_untouched_model(nb):
    """Fine-tuning changes the translator object in place: the table's "as it is" row must be a fresh copy."""
    _, ns = nb
    as_is = ns["evaluations"]["opus-mt as it is", ns["D"].NEW_SENTENCES, 1]
    assert as_is["bleu"] == ns["before"]["opus-mt as it is"]["bleu"]
    assert as_is["samples"] == ns["before"]["opus-mt as it is"]["samples"]


def test_fluent_but_wrong_check_counts_what_it_says(nb):
    """Planted cases: a changed number, a dropped name, a sentence-initial word and "I" (never counted)."""
    _, ns = nb
    test = [("Tom a 97 ans.", "Tom is 97."), ("Je parle à Marie.", "I speak to Marie."), ("Il dort.", "He sleeps.")]
    hyps = ["Tom is 19.", "I speak to her.", "He sleeps, I think."]
    dropped, invented = ns["fluent_but_wrong"]("any", test, hyps)
    assert [d[3] for d in dropped] == [["97"], ["Marie"]]
    assert [v[3] for v in invented] == [["19"]]
