"""Notebook 05: every row and figure is written, each variant passes the leakage checks, the complexity
measurement agrees with the derivation, and pretraining shares the budget instead of adding to it.

The notebook runs once in-process in quick mode (tiny models, the built-in corpus), graded: its four exercises
(the synthesizer's weights, the horizon rule, ALiBi's bias, span corruption) must earn full marks. The functions the student writes are checked here against the package's, which the model and the CLI
use (defined once); the reference outputs the checks load (data/reference/05_*.json) are written from the
package by :func:`build_references` and must still equal what it computes. The sentences that compare this
run's numbers are fed numbers that flip, and must flip (they run in answer-tagged cells: the student copy prints
the numbers, never the verdict). The student copy states no rubric key phrase and points to no benchmark results,
and section 8's study refuses a choice of settings it cannot run. Wrong answers: tests/notebooks/catalogue_05.py.

Rewrite the reference files after a deliberate change to the package: ``python tests/notebooks/test_notebook05.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import experiments as X
from helpers import runtime
from helpers.course import exercises, notebooks
from helpers.nn import model as pkg_model
from helpers.nn import variants as VAR
from helpers.training import pretrain as P
from tests.notebooks import student_cells
from tests.solved import reads_solved, solved

pytestmark = [pytest.mark.notebook, reads_solved("05")]  # every test here reads the solved notebook's run

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "solutions" / "05_research_variants.py"
FIGURES = ["05_complexity", "05_variant_curves", "05_positions", "05_pretraining", "05_sweep"]
REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference"


# ---------------------------------------------------------------------------------------------------------------
# reference outputs, written from the package


class Draws:
    """``random.Random.randint(a, b)`` drawn from a NumPy Generator: the package's corrupt_span with the notebook's draws."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def randint(self, a: int, b: int) -> int:
        return int(self.rng.integers(a, b, endpoint=True))


def package_cut(ids, rng, max_len):
    example = P.corrupt_span(ids, Draws(rng), max_len)
    return None if example is None else {"input_ids": list(example.input_ids), "n_source": int(example.prefix_len)}


def build_references() -> dict[str, dict]:
    """The saved outputs the notebook's checks load, computed from the package (file name -> content)."""
    g = random.Random(5)
    cases = []
    for length, max_len, cuts in [(0, 16, 1), (1, 16, 1), (2, 16, 3), (3, 16, 3), (5, 16, 4), (12, 16, 4),
                                  (40, 16, 4), (9, 6, 3), (20, 5, 1), (30, 48, 4), (100, 96, 4)]:  # fmt: skip
        ids = [g.randint(5, 999) for _ in range(length)]
        seed = g.randint(0, 10**6)
        rng = np.random.default_rng(seed)
        cases.append({"ids": ids, "max_len": max_len, "seed": seed, "expected": [package_cut(ids, rng, max_len) for _ in range(cuts)]})  # fmt: skip
    lat, pos, plen = VAR.latent_horizons(4, 12), torch.arange(12), torch.tensor([1, 5, 8])
    masks = {"latent_horizons": lat.tolist(), "positions": pos.tolist(), "prefix_len": plen.tolist()}
    for name, (q, k) in {"down": (lat, pos), "middle": (lat, lat), "up": (pos, lat)}.items():
        masks[name] = VAR.read_mask(q, k, plen).int().tolist()
    return {
        "05_corrupt_span.json": {"made_by": "tests/notebooks/test_notebook05.py::build_references", "cases": cases},
        "05_bottleneck_masks.json": {"made_by": "tests/notebooks/test_notebook05.py::build_references", **masks},
    }


def write_references() -> None:
    REFERENCE.mkdir(parents=True, exist_ok=True)
    for name, content in build_references().items():
        (REFERENCE / name).write_text(json.dumps(content, separators=(",", ":")) + "\n")


def test_saved_references_equal_what_the_package_computes():
    for name, content in build_references().items():
        saved = json.loads((REFERENCE / name).read_text())
        assert saved == content, (
            f"{name} no longer equals what the package computes: python tests/notebooks/test_notebook05.py"
        )


def test_the_reference_cuts_cover_every_branch():
    cases = json.loads((REFERENCE / "05_corrupt_span.json").read_text())["cases"]
    cuts = [(c, e) for c in cases for e in c["expected"]]
    assert any(e is None and len(c["ids"]) < 2 for c, e in cuts)  # too short
    assert any(e is None and len(c["ids"]) >= 2 for c, e in cuts)  # no room
    made = [(c, e) for c, e in cuts if e]
    assert any(len(e["input_ids"]) - 4 == len(c["ids"]) for c, e in made)  # the whole sentence kept
    assert any(len(e["input_ids"]) == c["max_len"] for c, e in made)  # as long as the block allows
    assert any(len(e["input_ids"]) - 4 < len(c["ids"]) for c, e in made)  # a beginning only


@pytest.fixture(scope="module")
def nb():
    return solved("05").namespace


@pytest.fixture(scope="module")
def record(nb):
    return json.loads((runtime.metrics_dir() / "05_variants.json").read_text())


def test_every_row_is_scored_and_names_its_test_sets(record):
    labels = [r["label"] for r in record["rows"]]
    assert labels[0] == "vanilla" and len(labels) == len(set(labels))
    for needed in ("synthesizer", "bottleneck m=4", "learned positions", "positions alibi", "positions none"):
        assert needed in labels
    assert sum("pretrained," in x for x in labels) == 2 and sum("scratch," in x for x in labels) == 1  # + vanilla
    for row in record["rows"]:
        assert row["steps"] > 0 and row["val_loss"] > 0 and 100 <= row["eval_sentences"] <= 200
        assert 0 <= row["bleu_new"] <= 100 and 0 <= row["bleu_valid"] <= 100
    assert "never used to choose" in record["scores"]["bleu_new"] and "validation" in record["scores"]["bleu_valid"]


def test_rows_change_what_they_say(record):
    rows = {r["label"]: r for r in record["rows"]}
    assert rows["synthesizer"]["changed"] == {"attention": "synthesizer", "positional": "learned"}
    assert rows["learned positions"]["changed"] == {"positional": "learned"}
    assert rows["vanilla"]["changed"] == {}
    assert rows["synthesizer"]["parameters"] != rows["vanilla"]["parameters"]
    assert set(rows["pretrained embeddings"]["changed"]) == {"init_embeddings"}
    assert "token embeddings from" in rows["pretrained embeddings"]["embeddings"]


def test_pretraining_shares_the_budget(record):
    rows = {r["label"]: r for r in record["rows"]}
    for n in ("300", "all"):
        pre, scratch = rows[f"pretrained, {n} pairs"], rows["vanilla" if n == "all" else f"scratch, {n} pairs"]
        # 60: quick mode's BUDGET in the notebook (every row trains that many steps, pretraining included)
        assert pre["pretrain_steps"] + pre["steps"] == scratch["steps"] == 60
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
    from helpers.nn import model as M

    original = M.build_attention_mask
    try:
        M.build_attention_mask = lambda T, prefix_len=None, device=None: torch.ones(1, 1, T, T, dtype=torch.bool)
        assert nb["leakage_report"]({})["causal"] is False
    finally:
        M.build_attention_mask = original
    assert nb["leakage_report"]({}) == {"causal": True, "source seen both ways": True, "padding-safe": True}


# ---------------------------------------------------------------------------------------------------------------
# the student's functions against the package's (defined once: the model and the CLI use the package's)


def test_the_notebooks_span_corruption_cuts_what_the_package_cuts(nb):
    g = random.Random(0)
    for _ in range(3000):
        ids = [g.randint(5, 999) for _ in range(g.randint(0, 130))]
        max_len, seed = g.choice([5, 6, 8, 16, 48, 96, 128]), g.randint(0, 10**9)
        mine = nb["corrupt_one_span"](ids, np.random.default_rng(seed), max_len)
        mine = None if mine is None else {"input_ids": list(mine[0]), "n_source": mine[1]}
        assert mine == package_cut(ids, np.random.default_rng(seed), max_len), (len(ids), max_len, seed)


def test_the_relative_score_question_runs_on_the_packages_rotation(nb):
    """Question 5.4's cell scores with notebook 02's rotation as the package runs it: the score of q at i and k at j
    depends on i - j only (and, the control, changes with it)."""
    assert nb["rotary"] is pkg_model.rotary
    assert abs(nb["rope_score"](7, 3) - nb["rope_score"](47, 43)) < 1e-4
    assert abs(nb["rope_score"](7, 3) - nb["rope_score"](7, 4)) > 1e-4


def test_the_notebooks_mask_rule_is_the_models(nb):
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        q_h = torch.randint(0, 40, (int(torch.randint(1, 12, (1,), generator=g)),), generator=g)
        k_h = torch.randint(0, 40, (int(torch.randint(1, 12, (1,), generator=g)),), generator=g)
        plen = torch.randint(1, 40, (3,), generator=g)
        assert torch.equal(nb["may_read"](q_h, k_h, plen), VAR.read_mask(q_h, k_h, plen))


def test_the_notebooks_alibi_bias_is_the_models_on_the_target(nb):
    """The signed bias of the paper's decoder equals the package's -m|i - j| wherever a target query reads (j <= i)."""
    for n_head, T in ((2, 5), (8, 9), (12, 4)):
        mine = nb["alibi_causal_bias"](n_head, T)
        theirs = VAR.alibi_bias(VAR.alibi_slopes(n_head), torch.arange(T), torch.arange(T))[0]  # (nh, T, T)
        lower = torch.ones(T, T, dtype=torch.bool).tril()
        torch.testing.assert_close(mine[:, lower], theirs[:, lower])
        torch.testing.assert_close(mine[:, ~lower], -theirs[:, ~lower])  # keys after the query: signed, not |i - j|


# ---------------------------------------------------------------------------------------------------------------
# conclusions computed from the run: they flip when the numbers flip


def _rows(**scores):
    return {
        k: {"bleu_new": v, "bleu_valid": v, "val_loss": 2.0 - v / 100, "val_ppl": 7.0 - v / 10}
        for k, v in scores.items()
    }


def test_compare_rows_flips_with_the_numbers(nb):
    compare = nb["compare_rows"]
    ahead = compare(_rows(vanilla=10.0, synthesizer=12.0), ["synthesizer"], quick=False)
    behind = compare(_rows(vanilla=10.0, synthesizer=8.0), ["synthesizer"], quick=False)
    assert "synthesizer 12.00, higher than vanilla" in ahead and "Best in this run: synthesizer." in ahead
    assert "synthesizer 8.00, lower than vanilla" in behind and "Best in this run: vanilla." in behind
    assert "level with vanilla" in compare(_rows(vanilla=10.0, synthesizer=10.0), ["synthesizer"], quick=False)
    # lower is better for the loss: the best row is the lowest
    assert "Best in this run: synthesizer." in compare(_rows(vanilla=10.0, synthesizer=12.0), ["synthesizer"], key="val_loss", quick=False)  # fmt: skip
    quick = compare(_rows(vanilla=10.0, synthesizer=12.0), ["synthesizer"], quick=True)
    assert "noise" in quick and "paired bootstrap" in quick and "noise" not in ahead


def test_the_pretraining_verdict_flips_with_the_numbers(nb):
    verdict = nb["pretraining_verdict"]
    study = {(300, "span"): {"bleu_new": 5.0}, (300, None): {"bleu_new": 3.0}}
    assert "with 300 pairs span pretraining helped (5.00 against 3.00" in verdict(study, [300], quick=False)
    study[(300, None)]["bleu_new"] = 7.0
    assert "with 300 pairs span pretraining hurt (5.00 against 7.00" in verdict(study, [300], quick=False)
    assert "noise" in verdict(study, [300], quick=True)


def test_the_sweep_paragraph_flips_and_invites_no_reason_in_quick_mode(nb):
    paragraph = nb["sweep_paragraph"]

    def rows(lr_valid, lr_new):
        return [
            {"label": "vanilla", "parameters": 100, "bleu_valid": 10.0, "bleu_new": 9.0, "val_ppl": 5.0},
            {"label": "lr ×2", "parameters": 100, "bleu_valid": lr_valid, "bleu_new": lr_new, "val_ppl": 4.0},
        ]

    won = paragraph(rows(12.0, 11.0), "3 min", quick=False)
    assert "the best was 'lr ×2'" in won and "12.0, higher than 10.0" in won and "held on new sentences" in won
    assert "did not carry over" in paragraph(rows(12.0, 8.0), "3 min", quick=False)
    lost = paragraph(rows(8.0, 11.0), "3 min", quick=False)
    assert "no change beat 'vanilla'" in lost and "the best was" not in lost
    quick = paragraph(rows(12.0, 11.0), "300 steps", quick=True)
    assert "noise" in quick and "we think" not in quick.lower() and "because" not in quick
    assert "we think it is because" in won


def test_the_growth_verdict_and_the_order_disagreements_flip(nb):
    growth = nb["growth_verdict"]
    assert growth("plain", "memory", 1.8, 2.0).endswith("(derived ×2^2.00): close to the derivation.")
    assert "slower than derived by 2^0.90" in growth("plain", "memory", 1.1, 2.0)
    assert "faster than derived by 2^0.94" in growth("bottleneck", "memory", 1.9, 0.96)
    disagree = nb["order_disagreements"]
    rows = {"a": {"val_ppl": 5.0, "bleu_valid": 10.0}, "b": {"val_ppl": 6.0, "bleu_valid": 12.0}}
    assert disagree(rows, ["a", "b"]).startswith("1 of 1 pairs") and "'a' has the lower perplexity" in disagree(
        rows, ["a", "b"]
    )
    rows["b"]["bleu_valid"] = 8.0
    assert disagree(rows, ["a", "b"]).startswith("Perplexity and BLEU order all 1 pairs")


def test_every_question_has_its_answer_and_the_student_copy_leaves_the_answers_out():
    nb = notebooks.read_py(NOTEBOOK)
    questions = exercises.find_questions(nb)
    assert [q.number for q in questions] == [f"5.{i}" for i in range(1, 12)]
    for q in questions:
        prose = [nb.cells[i].source for i in q.answers if nb.cells[i].cell_type == "markdown" and i != q.rubric]
        assert prose and prose[0].startswith("**Model answer.**"), q.label
    student = exercises.student_notebook(nb)
    kept = {line for cell in student.cells for line in cell.source.splitlines()}
    unique = set(exercises.answer_lines(nb)) - {
        line for c in nb.cells if "answer" not in c.metadata.get("tags", []) for line in c.source.splitlines()
    }
    assert unique and not unique & kept


# ---------------------------------------------------------------------------------------------------------------
# the student copy asks and never tells


def test_the_student_copy_sends_no_one_to_the_results_and_prints_no_verdict():
    nb = notebooks.read_py(NOTEBOOK)
    copy = "\n".join(cell.source for cell in exercises.student_notebook(nb).cells)
    assert "RESULTS.md" not in copy
    for verdict in ("order_disagreements", "pretraining_verdict", "sweep_paragraph"):
        assert verdict not in copy, verdict
        cells = [c for c in nb.cells if verdict in c.source]
        assert cells and all("answer" in c.metadata.get("tags", []) for c in cells), verdict


# ---------------------------------------------------------------------------------------------------------------
# section 8: the student chooses the study's settings, within a budget; the package refuses what cannot run

MENU = {"lr ×2": {"lr": 0.004}, "dropout 0.2": {"dropout": 0.2}, "seed 1": {"seed": 1}, "longer": {"steps": 600}}


def test_the_study_runs_the_settings_chosen_in_order():
    assert X.choose_settings(["dropout 0.2", "lr ×2"], MENU, budget=3) == {
        "dropout 0.2": {"dropout": 0.2},
        "lr ×2": {"lr": 0.004},
    }
    chosen = X.choose_settings(("lr ×2", "seed 1", "dropout 0.2"), MENU, budget=3)  # exactly the budget
    assert list(chosen) == ["lr ×2", "seed 1", "dropout 0.2"]


@pytest.mark.parametrize(
    "chosen, says",
    [
        (["lr ×2", "lr x3"], "'lr x3' is not on the menu"),
        (["lr ×2", "dropout 0.3"], "did you mean 'dropout 0.2'?"),
        (["lr ×2", "dropout 0.2", "seed 1", "lr ×2"], "chosen more than once"),
        (["lr ×2", "dropout 0.2", "seed 1", "vanilla"], "'vanilla' is the reference row"),
        (["lr ×2"], "choose at least 2"),
        ([], "0 settings chosen: choose at least 2"),
        (["lr ×2", "dropout 0.2", "seed 1", "dropout 0.2"], "the budget is 3 runs: remove 1"),
        (["lr ×2", "longer"], "changes ['steps']"),
        ("lr ×2", "must be a list of names"),
        ({"lr ×2": {}}, "must be a list of names"),
        (["lr ×2", 2], "are not names"),
    ],
)
def test_the_study_refuses_a_choice_it_cannot_run(chosen, says):
    with pytest.raises(ValueError) as refused:
        X.choose_settings(chosen, MENU, budget=3)
    assert says in str(refused.value), str(refused.value)


def test_the_study_refuses_over_the_budget_and_names_the_count():
    five = ["lr ×2", "dropout 0.2", "seed 1", "a", "b"]
    with pytest.raises(ValueError, match="5 settings chosen but the budget is 4 runs: remove 1"):
        X.choose_settings(five, {**MENU, "a": {"lr": 1.0}, "b": {"lr": 2.0}}, budget=4)


def test_the_notebooks_choice_is_checked_and_fits_quick_mode(nb):
    assert list(nb["SETTINGS"]) == nb["MY_SETTINGS"] and 2 <= len(nb["MY_SETTINGS"]) <= nb["STUDY_RUNS"]
    assert all(k in nb["ROWS"] for k in nb["MY_SETTINGS"]) and nb["SWEEP_LABELS"][0] == "vanilla"
    seed_rows = [k for k in nb["MY_SETTINGS"] if nb["STUDY_MENU"][k] == {"seed": nb["SEED"] + 1}]
    assert seed_rows and nb["ROWS"][seed_rows[0]]["changed"] == {"seed": nb["SEED"] + 1}
    with pytest.raises(ValueError, match="not on the menu"):
        X.choose_settings([*nb["MY_SETTINGS"][:1], "lr x2"], nb["STUDY_MENU"], budget=nb["STUDY_RUNS"])


def test_the_notebooks_bottleneck_masks_are_the_models(nb):
    for m, ell in ((4, 12), (16, 96), (7, 20), (3, 3)):
        plen = torch.tensor([1, max(1, ell // 2), ell])
        lat, pos = VAR.latent_horizons(m, ell), torch.arange(ell)
        mine = nb["bottleneck_masks"](m, ell, plen)
        for name, (q, k) in {"down": (lat, pos), "middle": (lat, lat), "up": (pos, lat)}.items():
            assert torch.equal(mine[name], VAR.read_mask(q, k, plen)), (m, ell, name)


def test_nothing_before_question_5_2_counts_the_inputs_no_latent_reads_and_section_7_says_what_pretraining_reads():
    """Question 5.2 asks how many recent inputs reach a position through no latent: the check of Exercise 5.2 printed
    how many inputs some latent reads (91 of 96: the answer one subtraction away). Question 5.8 asks which comparison
    flatters pretraining, which needs what the unpaired sentences are: section 7 now says (a student read,
    2026-11-28, found it said nowhere in the copy)."""
    cells = student_cells(NOTEBOOK)
    asked = next(i for i, text in enumerate(cells) if "**Question 5.2" in text)
    told = [i for i, text in enumerate(cells[:asked]) if "inputs some latent reads" in text or "reach[" in text]
    assert not told, f"cells {told} count the inputs some latent reads before Question 5.2"
    section = " ".join(next(text for text in cells if "## 7. Span-corruption pretraining" in text).split())
    # what they are, not the inference the question asks for (a student read, 2026-12-08: "the pair count limits only the
    # translation phase" was half the answer)
    assert "every training pair" in section and "limits only the translation" not in section
