"""Notebook 07, notebook 03's appendix: it finds notebook 03's run (or trains a stand-in and says so), scores the
same model on the same test sets with the same numbers, races three sizes, and its printed conclusions follow the
numbers. The notebook runs once in-process in quick mode; the finding of notebook 03's run is tested in
tests/test_scratch_run.py."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from helpers import runtime
from helpers.course import exercises
from helpers.course import notebooks as NB
from helpers.course.notebooks import code_cells
from helpers.evaluation import translation
from helpers.training import sizing
from tests.notebooks import student_cells
from tests.solved import reads_solved, solved

pytestmark = [pytest.mark.notebook, reads_solved("07")]  # every test here reads the solved notebook's run

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "solutions" / "07_translator_up_close.py"
FIGURES = ["07_model_size_budget", "07_attention_heatmaps", "07_slices", "07_your_sentence"]


@pytest.fixture(scope="module")
def nb():
    return code_cells(NOTEBOOK), solved("07").namespace  # every cell, and full marks for the solutions


@pytest.fixture(scope="module")
def ns(nb):
    return nb[1]


def cell_calling(cells, call):
    found = [c for c in cells if call in c.source]
    assert len(found) == 1, f"expected one notebook cell containing {call!r}, found {len(found)}: update this test"
    return found[0]


def test_every_figure_is_saved_as_pdf_and_png(ns):
    folder = runtime.figures_dir()
    for name in FIGURES:
        assert (folder / f"{name}.pdf").read_bytes()[:4] == b"%PDF", name
        assert (folder / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name


def test_the_questions_are_7_1_to_7_3():
    assert [q.number for q in exercises.find_questions(NB.read_py(NOTEBOOK))] == ["7.1", "7.2", "7.3"]


def test_the_test_sets_are_notebook_03s_splits_translated_by_the_model_found(ns):
    """The splits come from notebook 03's data, seed and limit; each set was translated by the model found."""
    found, splits, data = ns["found"], ns["splits"], ns["data"]
    assert (found.data, found.limit, found.seed) == ("builtin", 6000, 0)  # quick mode: notebook 03's
    assert ns["TEST_SETS"][data.NEW_SENTENCES] == splits.new and ns["TEST_SETS"][data.IN_DISTRIBUTION] == splits.test
    for name, pairs in ns["TEST_SETS"].items():
        hyps = translation.translate(ns["model"], ns["tok"], [fr for fr, _ in pairs[:20]])
        assert hyps == ns["outputs"][name, 1][:20], f"{name}: the translations kept are not the model's"


BLEU_CHECK = "recorded_bleu = ("


def run_bleu_check(nb, scratch, record):
    """The notebook's score cell, executed again with another model found and another record."""
    cells, ns = nb
    env = {**ns, "scratch": scratch, "found": replace(ns["found"], record=record)}
    exec(compile(cell_calling(cells, BLEU_CHECK).source, "<07 scores>", "exec"), env)
    return env


def test_the_scores_are_held_to_notebook_03s_record_and_another_model_fails(nb):
    _, ns = nb
    scratch = replace(ns["scratch"], stand_in=False)
    evaluations = ns["evaluations"]
    record = {
        "evaluations": [{"test_set": name, "beams": 1, "bleu": ev["bleu"]} for (name, _), ev in evaluations.items()]
    }
    run_bleu_check(nb, scratch, record)  # the same model: the same scores
    trained = ns["scratch"].run.model
    other = trained.__class__(trained.config)
    torch.manual_seed(1)
    other.load_state_dict({k: v + 0.3 * torch.randn_like(v) for k, v in trained.state_dict().items()})
    run = replace(ns["scratch"].run, model=other.eval(), translator=None)
    with pytest.raises(AssertionError, match="in notebook 03's record"):
        run_bleu_check(nb, replace(scratch, run=run), record)
    run_bleu_check(nb, replace(scratch, run=run, stand_in=True), record)  # a stand-in is not held to those numbers


def test_the_size_race_trains_each_size_from_scratch_and_keeps_its_curves_for_a_reconnect(ns):
    rows = ns["size_curves"]
    assert [(r["n_layer"], r["d_model"]) for r in rows] == [tuple(s) for s in ns["SIZE_SHAPES"]]
    assert [r["parameters"] for r in rows] == sorted({r["parameters"] for r in rows}), "sizes in increasing order"
    for r in rows:
        first, last = r["curve"][0], r["curve"][-1]
        assert first["minutes"] == 0 and abs(first["val_loss"] - math.log(ns["tok"].vocab_size)) < 1.0, first
        assert last["val_loss"] < first["val_loss"] - 0.5, f"width {r['d_model']} did not learn in its seconds: {r}"
        assert r["peak_lr"] > 0.9 * ns["cfg"].lr, f"width {r['d_model']} never left its warm-up"
    # the curves are kept in this notebook's run folder with what they were measured on (a reconnect reads them)
    assert sizing.read_curves(Path(ns["RUN_DIR"]) / "size_curves.json", ns["SIZE_KEY"]) == rows
    assert Path(ns["RUN_DIR"]) != ns["scratch"].run.path, "the race writes beside notebook 03's run, not into it"


def test_the_test_set_comparison_follows_the_numbers(ns):
    compare = ns["compare_test_sets"]
    assert compare(20.0, 30.0, quick=False).startswith("The in-distribution score is the higher (30.00 against 20.00")
    assert compare(30.0, 20.0, quick=False).startswith("The new-sentence score is the higher here (30.00 against 20.00")
    assert compare(9.02, 8.70, quick=False).startswith("The new-sentence score")  # the quick run the issue quotes
    assert "noise" in compare(9.02, 8.70, quick=True) and "noise" not in compare(9.02, 8.70, quick=False)


def test_the_gap_sentence_follows_the_three_numbers(ns):
    gap = ns["the_gap"]
    usual = gap(20.5, 29.9, 40.0, quick=False)  # the model: the held-out split reads about 10 higher
    assert usual.startswith("Newer sentences 20.50, our new-sentence split 29.90, random split 40.00")
    assert "reads 9.40 BLEU above the newer sentences" in usual and "near-paraphrases" in usual
    flipped = gap(30.0, 25.0, 40.0, quick=False)  # arguments swapped by mistake would read as this
    assert "reads 5.00 BLEU below" in flipped and "above" not in flipped
    assert "not measured" in gap(None, 25.0, 40.0, quick=False)
    assert "noise" in gap(20.5, 29.9, 40.0, quick=True)


def _curve(width, params, points):
    return {"d_model": width, "parameters": params, "curve": [{"tokens": t, "val_loss": v} for t, v in points]}


def test_the_model_size_reading_follows_the_curves(ns):
    read = ns["read_size_curves"]
    small, large = 1000, 4000
    # the small model sees more tokens in the same time; the large one learns more per token
    usual = [_curve(16, small, [(0, 6.0), (100, 4.0), (200, 3.0)]), _curve(64, large, [(0, 6.0), (100, 3.5)])]
    text = read(usual, quick=False)
    assert "Per minute, at the end of the same time: width 16 (0.00 M parameters) is lowest" in text
    assert "Per token, at 0.1k target tokens seen: width 64 (0.00 M parameters) is lowest" in text
    assert "The lead changes" in text
    # the quick run of the issue: the largest ahead at every point
    ahead = [_curve(16, small, [(0, 6.0), (100, 5.0), (200, 4.5)]), _curve(64, large, [(0, 6.0), (100, 3.5)])]
    text = read(ahead, quick=True)
    assert "same time: width 64" in text and "seen: width 64" in text and "The same size leads both ways" in text
    assert "noise" in text


def test_the_several_gpu_cell_is_skipped_with_its_reason_in_quick_mode(ns):
    # a cell that launched anyway, or skipped without saying why, fails here
    assert ns["N_GPUS"] == 0 and "quick mode" in ns["SKIP"] and "no GPU" in ns["SKIP"]
    assert "several" not in ns  # it did not launch


def test_the_several_gpu_cell_launches_notebook_03s_training_on_every_gpu(nb, monkeypatch):
    """On a machine with 2 GPUs the cell hands torchrun notebook 03's data, preset, budget and seed, and reads its result
    (launch is recorded here, not run: tests/training/test_distributed.py runs the command itself under torchrun)."""
    from helpers import cli
    from helpers.training import distributed

    cells, ns = nb
    calls = []

    def fake_launch(nproc, args, out=None):
        calls.append((nproc, args))
        out = Path(args[args.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_summary.json").write_text(json.dumps({"steps": 9, "tokens_per_s": 1.0, "minutes": 0.1}))
        return 0

    monkeypatch.setattr(distributed, "several_gpus", lambda quick: (2, None))
    monkeypatch.setattr(distributed, "launch", fake_launch)
    env = dict(ns)
    exec(compile(cell_calling(cells, "distributed.several_gpus(QUICK)").source, "<several GPUs>", "exec"), env)
    ((nproc, args),) = calls
    parsed = cli.build_parser().parse_args(args)
    assert nproc == 2 and parsed.func is cli._train
    assert (parsed.data, parsed.preset, parsed.minutes, parsed.seed) == (
        ns["found"].data,
        ns["TRAINED"]["preset"],
        ns["TRAINED"]["config"]["minutes"],
        ns["found"].seed,
    )
    assert Path(parsed.out) != ns["scratch"].run.path  # a run folder of its own: notebook 03's is not resumed
    assert env["several"]["steps"] == 9


def test_the_static_view_is_the_explanation_of_the_fixed_sentence(ns):
    # a view drawn for another sentence, or a translation that is not the model's, fails here
    e = ns["explained"]
    assert (
        e.source == ns["MY_SENTENCE"]
        and e.translation == translation.translate(ns["model"], ns["tok"], [e.source], beams=ns["BEAMS"])[0]
    )
    assert ns["box"] is None  # headless: the static view only


def test_the_text_box_drives_the_explanation_with_the_chosen_layer_and_head(ns, monkeypatch):
    from helpers.course.plotting import text_box

    seen = []

    def recording(text, layer, head):
        e, fig = ns["show_explanation"](text, layer, head)
        seen.append((text, layer, head, e.translation, fig.axes[0].get_title()))

    monkeypatch.setattr("matplotlib.pyplot.show", lambda *a, **k: None)
    box = text_box(recording, "Il dort.", live=True, layer=[1, 0], head=["mean", 0, 1])
    text, layer, head, button, _ = box.children
    text.value, layer.value, head.value = "Elle mange une pomme.", 0, 1  # the text's change runs it too
    button.click()
    assert seen[-1][:3] == ("Elle mange une pomme.", 0, 1)
    assert seen[-1][3] == translation.translate(ns["model"], ns["tok"], ["Elle mange une pomme."], beams=ns["BEAMS"])[0]
    assert "layer 0 of" in seen[-1][4] and "head 1" in seen[-1][4]


def test_the_size_race_asks_and_tokens_per_parameter_come_after_question_7_1():
    """Question 7.1 asks what the race says about choosing a size for a fixed time: the prose before it asks whether
    one size would suit every budget and machine (it said "shows why a size must be chosen", the conclusion, in 07
    and in 03), and the tokens per non-embedding parameter (the quantity that explains the race) are printed in the
    question's support cell, not before it."""
    root = Path(__file__).resolve().parents[2] / "notebooks" / "solutions"
    for name in ("03_translate_fr_en.py", "07_translator_up_close.py"):
        copy = "\n".join(student_cells(root / name))
        assert "must be chosen" not in copy, f"{name} states Question 7.1's conclusion"
    cells = student_cells(root / "07_translator_up_close.py")
    asked = next(i for i, text in enumerate(cells) if "**Question 7.1" in text)
    early = [i for i, text in enumerate(cells[:asked]) if "per non-embedding parameter" in text]
    assert not early, f"cells {early} print the tokens per parameter before Question 7.1"
    assert any("per non-embedding parameter" in text for text in cells[asked:]), "the support cell lost its numbers"
