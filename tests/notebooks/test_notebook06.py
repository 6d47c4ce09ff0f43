"""Notebook 06: the solved notebook gets full marks, writes its figures and metrics, uses the exercises'
functions for its numbers (the driver of Exercise 6.5 makes the accuracy table), its printed conclusions
follow the numbers, and its student copy states none of the rubrics' key phrases.

The notebook runs once in-process in quick mode (tiny models, seconds). Its exercises' wrong answers are in
tests/notebooks/catalogue_06.py; helpers.knowledge itself is tested in tests/test_knowledge.py.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from helpers import embeddings, runtime
from helpers import knowledge as K
from tests.solved import reads_solved, solved

pytestmark = [pytest.mark.notebook, reads_solved("06")]  # every test here reads the solved notebook's run

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "06_what_pretraining_knows.py"
FIGURES = ["06_birthplaces", "06_knowledge_access", "06_embeddings"]


@pytest.fixture(scope="module")
def nb():
    return solved("06").namespace


@pytest.fixture(scope="module")
def record(nb):
    return json.loads((runtime.metrics_dir() / "06_knowledge.json").read_text())


def test_figures_are_written_with_their_questions(nb):
    for name in FIGURES:
        meta = json.loads((runtime.figures_dir() / f"{name}.json").read_text())
        assert meta["question"].endswith("?") and len(meta["caption"]) > 40
        for ext in ("pdf", "png"):
            assert (runtime.figures_dir() / f"{name}.{ext}").is_file(), f"{name}.{ext}"
    curve = json.loads((runtime.figures_dir() / "06_knowledge_access.json").read_text())["numbers"]
    assert {"scratch", "pretrained", "baseline", "biography_words"} <= set(curve)


def test_the_knowledge_record_names_its_test_and_holds_every_number(record):
    k = record["knowledge"]
    assert record["quick"] is True and "never in fine-tuning" in k["test"]
    result = k["result"]
    assert (
        result["n_test"] == k["config"]["n_test"] and result["n_finetune"] + result["n_test"] == k["config"]["n_people"]
    )
    assert [c["pretrain_steps"] for c in result["curve"]][0] == 0
    assert result["curve"][-1]["pretrain_steps"] == k["config"]["pretrain_steps"]
    assert all(0 <= v <= 1 for v in k["scores"].values()) and len(k["scores"]) == 4
    assert "verdict" not in k, "the verdict sentence is printed in an answer cell, not saved with the student's numbers"
    assert (k["table"]["scratch"], k["table"]["pretrained"]) == (result["scratch"], result["pretrained"])


def test_the_embedding_record_has_four_rows_at_one_budget_and_three_comparisons(record):
    e = record["embeddings"]
    assert [r["label"] for r in e["rows"]] == list(embeddings.EMBEDDING_KINDS)
    assert len({r["steps"] for r in e["rows"]}) == 1, "every start gets the same budget"
    frozen = next(r for r in e["rows"] if r["label"] == "random frozen")
    assert frozen["trainable"] < e["rows"][0]["trainable"] and "frozen" in frozen["embeddings"]
    assert "word2vec" in e["rows"][2]["embeddings"] and "token embeddings from" in e["rows"][3]["embeddings"]
    assert [c["label"] for c in e["comparisons"]] == list(embeddings.EMBEDDING_KINDS[1:])
    for c in e["comparisons"]:
        assert c["low"] <= c["delta"] <= c["high"] and 0 <= c["p"] <= 1 and c["resamples"] == 1000
    assert "paired bootstrap" in e["test"]


def test_the_notebook_scores_with_the_students_functions_and_they_agree_with_the_package(nb):
    """Defined once: the package's accuracy and baseline are what the notebook's exercises compute."""
    rng = random.Random(0)
    towns = ["Dunmere", "dunmere.", " Kestrel  Bay ", "Kestrel", "Kelby", "Kelby!", "", "Dunmere Kelby"]
    for _ in range(200):
        n = rng.randint(1, 6)
        preds, answers = rng.choices(towns, k=n), rng.choices(towns[:6], k=n)
        assert nb["exact_match_accuracy"](preds, answers) == pytest.approx(K.accuracy(preds, answers))
        train = rng.choices(towns[:6], k=rng.randint(1, 8))
        place, acc = nb["most_common_place_baseline"](train, answers)
        assert place == K.majority_answer(train)
        assert acc == pytest.approx(K.accuracy([K.majority_answer(train)] * n, answers))
    assert (
        nb["BASELINE"] == pytest.approx(nb["RESULT"].baseline) and nb["BASELINE_PLACE"] == nb["RESULT"].baseline_answer
    )


@pytest.mark.parametrize(
    "measured, expected, n, word",
    [(0.22, 0.246, 100, "within"), (0.40, 0.246, 100, "outside"), (0.22, 0.246, 100_000, "outside")],
)
def test_the_baseline_sentence_flips_with_the_numbers(nb, measured, expected, n, word):
    sentence = nb["compare_with_law"](measured, expected, n)
    assert f" is {word} two standard errors" in sentence and f"{measured:.1%}" in sentence


def test_the_printed_verdict_is_the_runs(nb):
    r = nb["RESULT"]
    assert r.verdict() == K.knowledge_verdict(r.scratch, r.pretrained, r.baseline, r.n_test)


def test_the_accuracy_table_is_the_students_driver_and_equals_the_packages_run(nb):
    """The table comes from Exercise 6.5's driver; on the CPU it is the package's run_knowledge, number for number."""
    table, r = nb["TABLE"], nb["RESULT"]
    assert (table["scratch"], table["pretrained"], table["baseline"]) == (r.scratch, r.pretrained, r.baseline)
    assert table["answers"] == nb["RUN"]["answers"] and table["baseline_place"] == r.baseline_answer
    for name in ("scratch", "pretrained"):
        mine, theirs = table["models"][name].state_dict(), nb["RUN"][name].state_dict()
        assert all(torch.equal(mine[k], theirs[k]) for k in theirs), f"{name}: the driver's model is run_knowledge's"


def test_the_word2vec_row_starts_from_the_students_function(record):
    row = next(r for r in record["embeddings"]["rows"] if r["label"] == "word2vec")
    assert row["embeddings"].endswith("(gensim skip-gram on the training text cut into our pieces)"), row["embeddings"]
