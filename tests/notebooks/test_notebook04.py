"""Notebook 04: it writes the comparison and its figures; what the student writes is what the package does
(defined once, proven equal: the format of Exercise 4.1 and the padded batch of 4.2); the paired bootstrap of
4.3 is checked against a saved reference output that a reference implementation here writes and re-derives
(so it cannot drift); the fluent-but-wrong rule of 4.4 counts what it says; every sentence that compares this
run's numbers flips when the numbers do; and quick mode says its models are not pretrained.

The notebook runs once in-process in quick mode (tiny random Marian and Llama models, the built-in corpus).
``python tests/notebooks/test_notebook04.py`` rewrites ``data/reference/04_paired_bootstrap.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import runtime
from helpers.course.notebooks import code_cells
from helpers.evaluation import evaluate as E
from tests.notebooks import student_cells
from tests.solved import reads_solved, solved

QUESTIONS = ["4.1", "4.2", "4.3"]
pytestmark = [pytest.mark.notebook, reads_solved("04")]  # every test here reads the solved notebook's run

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "solutions" / "04_pretrained_comparison.py"
FIGURES = ["04_bleu_by_test_set", "04_bleu_vs_minutes", "04_your_sentence"]
BOOTSTRAP_REFERENCE = ROOT / "data" / "reference" / "04_paired_bootstrap.json"
# the check cells' calls (helpers.course.probes: each check is a probe and a verify); running such a cell in a copy of
# the notebook's namespace runs the probe on what the copy defines, then the verify
FORMAT_CHECK, BATCH_CHECK = "verify_format(probe_format(lm_example))", "verify_batch(probe_batch(pad_batch))"
BOOTSTRAP_CHECK = "verify_bootstrap(probe_bootstrap(paired_bootstrap,"


@pytest.fixture(scope="module")
def nb():
    return code_cells(NOTEBOOK), solved("04").namespace  # every cell, and full marks for the solutions


def _cell(cells, text):
    return next(c for c in cells if text in c.source)


def _run_with(cells, ns, cell_text, old, new):
    """Execute one notebook cell with `old` replaced by `new`, in a copy of the notebook's namespace."""
    cell = _cell(cells, cell_text)
    source = cell.source.replace(old, new)
    assert source != cell.source, f"{old!r} is no longer in the cell: update this test"
    env = dict(ns)
    exec(compile(source, "<notebook 04, changed>", "exec"), env)
    return env


# ---------------------------------------------------------------------------------------------
# the run's outputs


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
    # what trains is every weight but those the model never saves (Marian's sinusoidal positions, a large share of
    # a tiny stand-in: hf.loading.freeze_unsaved)
    for r in fine_tuned:
        assert r["minutes"] > 0 and r["tokens"] > 0 and 0 < r["trained"] <= r["parameters"], r
    boot = record["paired_bootstrap_new_sentences"]
    assert set(boot) == {"opus-mt fine-tuned", "SmolLM2 fine-tuned"}
    assert all(0 <= b["p_value"] <= 1 and b["difference"] >= 0 for b in boot.values())


def test_figures_are_written(nb):
    for name in FIGURES:
        for ext in ("pdf", "png"):
            assert (runtime.figures_dir() / f"{name}.{ext}").is_file(), f"{name}.{ext}"


def test_quick_mode_says_the_models_are_not_pretrained(nb):
    _, ns = nb
    assert not ns["marian"].pretrained and not ns["lm"].pretrained
    assert "NOT pretrained" in ns["marian"].describe()
    assert "numbers are noise" in ns["QUICK_NOTE"]


def test_the_same_split_as_helpers_data(nb, tmp_path):
    """The notebook's test sets are the files `train` and `finetune` write for the same data, seed and limit."""
    from helpers import pipeline
    from helpers.run_folder import TEST_FILES
    from helpers.text.data import test_sets_of

    _, ns = nb
    pipeline.prepare_pairs(ns["DATA"], tmp_path, columns=ns["COLUMNS"], seed=ns["SEED"], limit=ns["LIMIT"])
    ours = test_sets_of(ns["splits"])
    for name, file in TEST_FILES.items():
        written = [tuple(line.split("\t")) for line in (tmp_path / file).read_text().splitlines()]
        assert written and written == ours[name], f"{file} differs from the notebook's {name}"


def test_the_as_is_row_is_the_untouched_model(nb):
    """Fine-tuning changes the translator object in place: the table's "as it is" row must be a fresh copy."""
    _, ns = nb
    as_is = ns["evaluations"]["opus-mt as it is", ns["data"].NEW_SENTENCES, 1]
    assert as_is["bleu"] == ns["before"]["opus-mt as it is"]["bleu"]
    assert as_is["samples"] == ns["before"]["opus-mt as it is"]["samples"]


# ---------------------------------------------------------------------------------------------
# Exercises 4.1 and 4.2: defined once, proven equal to the package


def test_format_cell_is_the_package_format(nb):
    """Defined once: the notebook's lm_example equals HFTranslator.encode_pair."""
    cells, ns = nb
    lm = ns["lm"]
    for fr, en in ns["splits"].train[:20]:
        assert ns["lm_example"](lm.tokenizer, fr, en) == lm.encode_pair(fr, en)


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "[-100] * len(prompt) + target",
            "[-100] * (len(prompt) - 1) + prompt[-1:] + target",
            "the loss the model takes from your labels",
        ),
        (
            'ids("French: " + fr + "\\nEnglish:")',
            'ids("French: ") + ids(fr) + ids("\\nEnglish:")',
            "do not begin with the .* ids the model is given when it translates",
        ),
    ],
    ids=["the separator left out of the mask", "the prompt tokenized in pieces"],
)
def test_the_format_check_names_a_plausible_slip(nb, old, new, message):
    """A slip in the cell makes the notebook's own check fail, with the message that names it: the separator left
    out of the mask, by the loss it takes from the labels (the check's by-hand example holds the input ids only:
    spelling out the labels there gave the exercise away); "French: ", the sentence and "\\nEnglish:" tokenized one by
    one (a reading the text leaves to the student; found by a student read, 2026-11-28), by the ids translation gives
    the model, not by the loss message about shifted labels it gave before."""
    cells, ns = nb
    env = _run_with(cells, ns, "def lm_example(", old, new)
    check = _cell(cells, FORMAT_CHECK)
    with pytest.raises(AssertionError, match=message):
        exec(compile(check.source, "<notebook 04 format check>", "exec"), env)


def test_format_check_fails_on_labels_the_model_shifts_twice(nb):
    """The check's loss comparison: labels shifted by hand, as notebook 03 did, are shifted again by Hugging Face's
    model; it fails even when the character-level example is right (so only this assert can catch it)."""
    cells, ns = nb
    right = ns["lm_example"]

    def shifted(tokenizer, fr, en):
        example = right(tokenizer, fr, en)
        if tokenizer.__class__.__name__ == "CharTokenizer":
            return example
        return {"input_ids": example["input_ids"], "labels": example["labels"][1:] + [-100]}

    check = _cell(cells, FORMAT_CHECK)
    with pytest.raises(AssertionError, match="the loss the model takes from your labels"):
        exec(compile(check.source, "<notebook 04 format check>", "exec"), dict(ns, lm_example=shifted))
    exec(compile(check.source, "<notebook 04 format check>", "exec"), dict(ns))  # the control: the solution passes


def test_the_format_and_batch_checks_cannot_be_passed_by_calling_the_package(nb):
    """Solutions that only call helpers (HFTranslator.encode_pair, .collate) fail: the checks use a character
    tokenizer and a pad id the package objects were never given."""
    cells, ns = nb
    lm = ns["lm"]
    env = dict(ns, lm_example=lambda tokenizer, fr, en: lm.encode_pair(fr, en))
    with pytest.raises(AssertionError, match="one id per character"):
        exec(compile(_cell(cells, FORMAT_CHECK).source, "<notebook 04 format check>", "exec"), env)
    env = dict(ns, pad_batch=lambda examples, pad_id: lm.collate(examples))
    with pytest.raises(AssertionError, match="input_ids"):
        exec(compile(_cell(cells, BATCH_CHECK).source, "<pad_batch check>", "exec"), env)


def test_pad_batch_is_the_package_collate(nb):
    """Defined once: the student's pad_batch gives HFTranslator.collate's tensors, the ones fine-tuning trains on."""
    _, ns = nb
    lm = ns["lm"]
    for start in (0, 4, 9):
        examples = [lm.encode_pair(fr, en) for fr, en in ns["splits"].train[start : start + 5]]
        ours, package = ns["pad_batch"](examples, lm.pad_id), lm.collate(examples)
        assert set(ours) == set(package)
        for key in package:
            assert torch.equal(ours[key], package[key]), key


def test_pad_batch_check_fails_when_the_eos_label_is_masked_as_padding(nb):
    """The trap the exercise names: with <eos> as the pad, masking by `ids == pad_id` loses the <eos> label."""
    cells, ns = nb
    env = _run_with(
        cells,
        ns,
        "def pad_batch(",
        "    return batch\n",
        '    batch["labels"][batch["input_ids"] == pad_id] = -100\n    return batch\n',
    )
    check = _cell(cells, BATCH_CHECK)
    with pytest.raises(AssertionError, match="<eos> label"):
        exec(compile(check.source, "<notebook 04 pad_batch check>", "exec"), env)


# ---------------------------------------------------------------------------------------------
# Exercise 4.3: the paired bootstrap against its saved reference


def reference_paired_bootstrap(stats_a, stats_b, score, n_samples, seed, paired=True):
    """The reference: `n_samples` resamples of the sentence indices (numpy's default_rng(seed).integers), the same
    for both systems unless `paired` is False; p = share of resamples with score(B) - score(A) <= 0."""
    rng = np.random.default_rng(seed)
    n = len(stats_a)
    idx_b = rng.integers(0, n, size=(n_samples, n))
    idx_a = idx_b if paired else rng.integers(0, n, size=(n_samples, n))
    diffs = np.empty(n_samples)
    for k in range(n_samples):
        diffs[k] = score(stats_b[idx_b[k]].sum(axis=0)) - score(stats_a[idx_a[k]].sum(axis=0))
    return {
        "difference": score(stats_b.sum(axis=0)) - score(stats_a.sum(axis=0)),
        "p_value": float((diffs <= 0).mean()),
        "interval": [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))],
    }


def _sacrebleu_stats_and_score():
    """sacreBLEU's own sentence counts and corpus score from counts (its private API: the test's independent copy)."""
    from sacrebleu.metrics import BLEU

    bleu = BLEU()

    def stats(hyps, refs):
        return np.array(bleu._extract_corpus_statistics(hyps, [refs]), dtype=np.int64)

    return stats, lambda total: bleu._compute_score_from_stats(list(total)).score


def _bootstrap_case(n: int = 60, seed: int = 3) -> tuple[list[str], list[str], list[str]]:
    """Two systems whose outputs share most errors: B fixes 15 % of A's wrong words and breaks 2 % of its right
    ones. Sentences differ in difficulty (0 to 70 % of words wrong), so only a paired test resolves B's lead."""
    vocab = (
        "the a cat dog house tree river walks sees runs big small red green old new man woman child bird eats "
        "sleeps near under over with from"
    ).split()
    rng = np.random.default_rng(seed)
    refs, hyps_a, hyps_b = [], [], []
    for _ in range(n):
        ref = [str(w) for w in rng.choice(vocab, size=int(rng.integers(5, 13)))]
        hard = rng.uniform(0.0, 0.7)
        a = [w if rng.random() > hard else str(rng.choice(vocab)) for w in ref]
        b = []
        for x, r in zip(a, ref):
            if x != r and rng.random() < 0.15:
                b.append(r)
            elif rng.random() < 0.02:
                b.append(str(rng.choice(vocab)))
            else:
                b.append(x)
        refs.append(" ".join(ref)), hyps_a.append(" ".join(a)), hyps_b.append(" ".join(b))
    return refs, hyps_a, hyps_b


def write_bootstrap_reference(path: Path = BOOTSTRAP_REFERENCE, n_samples: int = 2000, seed: int = 0) -> dict:
    """Write the saved case of Exercise 4.3: inputs, the reference's outputs, and tolerances measured over 100
    other seeds (1.5 times the largest deviation seen, at least 0.03 for p and 0.5 BLEU for the interval)."""
    stats, score = _sacrebleu_stats_and_score()
    refs, hyps_a, hyps_b = _bootstrap_case()
    a, b = stats(hyps_a, refs), stats(hyps_b, refs)
    out = reference_paired_bootstrap(a, b, score, n_samples, seed)
    others = [reference_paired_bootstrap(a, b, score, n_samples, s) for s in range(1, 101)]
    p_dev = max(abs(o["p_value"] - out["p_value"]) for o in others)
    i_dev = max(abs(x - y) for o in others for x, y in zip(o["interval"], out["interval"]))
    record = {
        "_about": "Exercise 4.3 (notebook 04): a paired bootstrap of BLEU(B) - BLEU(A) over these sentences. "
        "Written by tests/notebooks/test_notebook04.py (write_bootstrap_reference); test_saved_bootstrap_reference_is_"
        "what_the_reference_computes re-derives it.",
        "n_samples": n_samples,
        "seed": seed,
        "refs": refs,
        "hyps_a": hyps_a,
        "hyps_b": hyps_b,
        "bleu_a": score(a.sum(axis=0)),
        "bleu_b": score(b.sum(axis=0)),
        **out,
        "p_tolerance": round(max(0.03, 1.5 * p_dev), 3),
        "interval_tolerance": round(max(0.5, 1.5 * i_dev), 2),
        "not_paired_p_value": reference_paired_bootstrap(a, b, score, n_samples, seed, paired=False)["p_value"],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return record


def test_saved_bootstrap_reference_is_what_the_reference_computes():
    """The saved file cannot drift: recomputed from its own inputs with sacreBLEU and the reference, it is equal;
    and it separates the mistakes the check is for (a test that is not paired lands far outside the tolerance)."""
    from sacrebleu.metrics import BLEU

    saved = json.loads(BOOTSTRAP_REFERENCE.read_text(encoding="utf-8"))
    stats, score = _sacrebleu_stats_and_score()
    a, b = stats(saved["hyps_a"], saved["refs"]), stats(saved["hyps_b"], saved["refs"])
    assert saved["bleu_a"] == pytest.approx(BLEU().corpus_score(saved["hyps_a"], [saved["refs"]]).score)
    assert saved["bleu_b"] == pytest.approx(BLEU().corpus_score(saved["hyps_b"], [saved["refs"]]).score)
    again = reference_paired_bootstrap(a, b, score, saved["n_samples"], saved["seed"])
    assert again["difference"] == pytest.approx(saved["difference"], abs=1e-9)
    assert again["p_value"] == saved["p_value"]
    assert again["interval"] == pytest.approx(saved["interval"], abs=1e-9)
    not_paired = reference_paired_bootstrap(a, b, score, saved["n_samples"], saved["seed"], paired=False)
    assert not_paired["p_value"] == saved["not_paired_p_value"]
    assert saved["not_paired_p_value"] - saved["p_value"] > 3 * saved["p_tolerance"]
    assert 0.02 < saved["p_value"] < 0.2 and saved["difference"] > 1, "the case should need a paired test"


def test_notebook_bootstrap_is_the_reference(nb):
    """Same seed, same numbers: the notebook's solution, its sentence counts and its BLEU are the reference's."""
    _, ns = nb
    saved = json.loads(BOOTSTRAP_REFERENCE.read_text(encoding="utf-8"))
    stats, score = _sacrebleu_stats_and_score()
    a, b = stats(saved["hyps_a"], saved["refs"]), stats(saved["hyps_b"], saved["refs"])
    assert np.array_equal(ns["sentence_stats"](saved["hyps_a"], saved["refs"]), a)
    assert ns["bleu_from_stats"](a.sum(axis=0)) == pytest.approx(score(a.sum(axis=0)))
    got = ns["paired_bootstrap"](a, b, n_samples=500, seed=7)
    ref = reference_paired_bootstrap(a, b, score, 500, 7)
    assert got["difference"] == pytest.approx(ref["difference"])
    assert got["p_value"] == pytest.approx(ref["p_value"])
    assert list(got["interval"]) == pytest.approx(ref["interval"])


def test_bootstrap_check_fails_on_a_test_that_is_not_paired(nb):
    cells, ns = nb
    env = _run_with(
        cells,
        ns,
        "def paired_bootstrap(",
        "score(stats_a[i].sum(axis=0)) for i in idx])",
        "score(stats_a[j].sum(axis=0)) for i, j in zip(idx, idx[::-1])])",
    )
    check = _cell(cells, BOOTSTRAP_CHECK)
    with pytest.raises(AssertionError, match="the same indices"):
        exec(compile(check.source, "<notebook 04 bootstrap check>", "exec"), env)


# ---------------------------------------------------------------------------------------------
# Exercise 4.4: the fluent-but-wrong rule


def test_fluent_but_wrong_check_counts_what_it_says(nb):
    """Planted cases: a changed number, a dropped name, a sentence-initial word (never counted)."""
    _, ns = nb
    test = [("Tom a 97 ans.", "Tom is 97."), ("Je parle à Marie.", "I speak to Marie."), ("Il dort.", "He sleeps.")]
    hyps = ["Tom is 19.", "I speak to her.", "He sleeps, I think."]
    dropped, invented = ns["flag_fluent_but_wrong"](test, hyps)
    assert [d[3] for d in dropped] == [["97"], ["Marie"]]
    assert [v[3] for v in invented] == [["19"]]
    assert ns["checkable_tokens"]("« Bonjour », dit Émilie à 9 h 30.") == {"Émilie", "9", "30"}


def test_fluent_but_wrong_counts_in_the_json_are_the_checker_on_the_outputs(nb):
    _, ns = nb
    label, name = "SmolLM2 fine-tuned", ns["data"].NEW_SENTENCES
    dropped, invented = ns["flag_fluent_but_wrong"](ns["TEST_SETS"][name], ns["hypotheses"][label, name])
    record = json.loads((runtime.metrics_dir() / "04_comparison.json").read_text())
    assert record["fluent_but_wrong"][f"{label} | {name}"] == {
        "dropped": len(dropped),
        "invented": len(invented),
        "n": len(ns["TEST_SETS"][name]),
    }


# ---------------------------------------------------------------------------------------------
# the probes and verifies of the four checks (helpers.course.probes)

PROBES = {
    "format": ["lm_example"],
    "batch": ["pad_batch"],
    "bootstrap": ["paired_bootstrap", "sentence_stats", "bleu_from_stats"],
    "fluent": ["checkable_tokens", "flag_fluent_but_wrong"],
}


def test_every_exercise_check_is_a_probe_and_a_verify():
    """Each exercise's check ends in verify_X(probe_X(...)) on the student's functions, as the grader finds it."""
    from helpers.course import exercises, notebooks, probes

    nb = notebooks.read_py(NOTEBOOK)
    found = {}
    for ex in exercises.find_exercises(nb):
        calls = [
            c
            for i in ex.cells
            if "check" in nb.cells[i].metadata.get("tags", [])
            for c in probes.probe_calls(nb.cells[i].source)
        ]
        found[ex.number] = [(c.name, c.probe) for c in calls]
    assert found == {
        number: [(name, f"probe_{name}({', '.join(args)})")]
        for number, (name, args) in zip(["4.1", "4.2", "4.3", "4.4"], PROBES.items())
    }


@pytest.mark.parametrize("name", list(PROBES))
def test_a_verify_passes_its_own_seeds_values_and_fails_another_seeds(nb, name, tmp_path):
    """The solution's values, saved and read back as the grader does, pass the verify of the seed they were drawn
    with and fail that of another seed: the inputs come from the seed, so values for other inputs cannot pass."""
    from helpers.course import probes

    _, ns = nb
    values = ns[f"probe_{name}"](*(ns[arg] for arg in PROBES[name]), seed=321)
    probes.save(tmp_path / "values.json", values)
    again = probes.load(tmp_path / "values.json")
    ns[f"verify_{name}"](again, seed=321)
    with pytest.raises(AssertionError):
        ns[f"verify_{name}"](again, seed=322)


# ---------------------------------------------------------------------------------------------
# conclusions computed from the run: each sentence flips when its numbers do


def test_minutes_are_formatted_honestly(nb):
    _, ns = nb
    fmt = ns["format_minutes"]
    assert fmt(0.25) == "15 s" and fmt(0.0) == "0 s" and fmt(2.54) == "2.5 min" and fmt(45.2) == "45 min"
    cells, _ = nb
    sources = "\n".join(c.source for c in cells)
    assert "min of training)" not in sources.replace("format_minutes(SCRATCH_MINUTES)} of training", "")


def test_passing_sentence_flips(nb):
    _, ns = nb
    say = ns["passing_sentence"]
    curve = [{"minutes": 0.0, "bleu": 0.5}, {"minutes": 0.4, "bleu": 9.0}, {"minutes": 2.0, "bleu": 20.0}]
    assert "passes ours (10.0) after 2.0 min" in say("LM", curve, 10.0, "ours")
    assert "passes ours (5.0) after 24 s" in say("LM", curve, 5.0, "ours")
    assert "stays below ours (25.0)" in say("LM", curve, 25.0, "ours")
    assert "above ours (0.1) before any fine-tuning" in say("LM", curve, 0.1, "ours")


def test_unseen_word_sentence_flips(nb):
    _, ns = nb
    say = ns["unseen_word_sentence"]
    helps = say("LM", {"unseen": 18.7, "seen": 30.0}, {"unseen": 12.2, "seen": 31.0}, "ours")
    assert "6.5 BLEU above ours on new sentences with an unseen word" in helps
    assert "1.0 BLEU below ours on the others" in helps and "gap moves 7.5 BLEU in its favour" in helps
    hurts = say("LM", {"unseen": 10.0, "seen": 30.0}, {"unseen": 12.0, "seen": 29.0}, "ours")
    assert "2.0 BLEU below ours on new sentences with an unseen word" in hurts
    assert "do not move the gap in its favour (-3.0 BLEU)" in hurts


def test_bootstrap_sentence_flips(nb):
    _, ns = nb
    say = ns["bootstrap_sentence"]
    sure = say("ours", "LM", {"difference": 1.3, "p_value": 0.008, "interval": (0.2, 2.4)})
    assert "LM against ours: +1.3 BLEU" in sure and "unlikely to be luck" in sure
    unsure = say("ours", "LM", {"difference": 0.4, "p_value": 0.31, "interval": (-0.9, 1.7)})
    assert "does not resolve the difference" in unsure and "31%" in unsure
    behind = say("ours", "LM", {"difference": -0.5, "p_value": 0.9, "interval": (-2.0, 1.0)})
    assert "LM is not ahead" in behind and "does not resolve" not in behind


def test_risk_sentence_flips(nb):
    _, ns = nb
    say = ns["risk_sentence"]
    more = say("LM", {"dropped": 19, "invented": 61, "n": 3337}, {"dropped": 71, "invented": 45, "n": 3337}, "ours")
    assert "in 61 of 3337 outputs, more than ours (45)" in more and "in 19, fewer than ours (71)" in more
    same = say("LM", {"dropped": 3, "invented": 2, "n": 100}, {"dropped": 3, "invented": 5, "n": 100}, "ours")
    assert "fewer than ours (5)" in same and "as many as ours (3)" in same


def test_no_fixed_comparison_sentence_is_left_outside_an_answer_cell():
    """The measured full-mode comparisons live in answer cells only (the student copy drops them)."""
    import jupytext

    nb = jupytext.read(NOTEBOOK, fmt="py:percent")
    outside = "\n".join(c.source for c in nb.cells if "answer" not in c.metadata.get("tags", []))
    for measured in ("27.7 against our 26.4", "18.7 against 12.2", "61 outputs (ours: 45)", "(0 min of training)"):
        assert measured not in outside, measured
    answers = [c for c in nb.cells if "answer" in c.metadata.get("tags", [])]
    model_answers = [c for c in answers if c.cell_type == "markdown" and "rubric" not in c.metadata["tags"]]
    rubrics = [c for c in answers if "rubric" in c.metadata["tags"]]
    assert len(model_answers) == len(rubrics) == 3
    assert all(c.source.startswith("**Model answer.**") for c in model_answers)
    verdicts = "\n".join(c.source for c in answers if c.cell_type == "code")
    assert "unseen_word_sentence(" in verdicts and "risk_sentence(" in verdicts  # the verdicts run in answers only
    assert "unseen_word_sentence(" not in outside and "risk_sentence(" not in outside
    assert "benchmarks/RESULTS.md" not in outside.split("## What we did, and what to try")[0]
    questions = [i for i, c in enumerate(nb.cells) if "question" in c.metadata.get("tags", [])]
    assert len(questions) == 3
    for i in questions:
        assert "your-answer" in nb.cells[i + 1].metadata.get("tags", [])


if __name__ == "__main__":
    written = write_bootstrap_reference()
    p, tol, not_paired = written["p_value"], written["p_tolerance"], written["not_paired_p_value"]
    print(f"wrote {BOOTSTRAP_REFERENCE}: p = {p} ± {tol} (not paired: {not_paired}), interval {written['interval']}")


def test_the_several_gpu_cell_is_skipped_in_quick_mode_and_launches_this_fine_tuning_elsewhere(nb, monkeypatch):
    # skipped without a reason, or launching another model, data or budget than the one-GPU run, fails here
    from helpers import cli
    from helpers.training import distributed

    cells, ns = nb
    assert "quick mode" in ns["SKIP"] and ns["N_GPUS"] == 0
    calls = []
    monkeypatch.setattr(distributed, "several_gpus", lambda quick: (2, None))
    monkeypatch.setattr(distributed, "launch", lambda n, args, out=None: calls.append((n, args)) or 0)
    monkeypatch.setattr(
        ns["finetune"], "load_finetuned_info", lambda out: {"result": {"steps": 3, "pairs": 48, "minutes": 0.1}}
    )
    (cell,) = [c for c in cells if "distributed.several_gpus(QUICK)" in c.source]
    exec(compile(cell.source, "<several GPUs>", "exec"), dict(ns))
    ((n, args),) = calls
    parsed = cli.build_parser().parse_args(args)
    assert n == 2 and parsed.func is cli._finetune
    assert (parsed.model, parsed.data, parsed.minutes, parsed.batch_size) == (
        ns["SEQ2SEQ_MODEL"], ns["DATA"], ns["MINUTES"]["seq2seq"], ns["BATCH_SIZE"])  # fmt: skip
    assert parsed.limit == ns["LIMIT"] and Path(parsed.out).name.endswith("2gpus")


def test_your_sentence_is_translated_by_every_model_side_by_side(nb):
    # a model missing from the rows, or no time measured, fails here (tests/evaluation/test_explain.py checks each row is its
    # own model's translation; the notebook's models change after this cell, so it is not re-translated here)
    _, ns = nb
    rows = ns["mine"]
    assert [r["model"] for r in rows] == list(ns["ROWS_OF"]) and all(r["seconds"] > 0 for r in rows)
    assert all(isinstance(r["translation"], str) for r in rows) and ns["box"] is None


def test_exercise_4_2s_check_does_not_show_4_1s_label_layout():
    """4.1 asks which positions of an example hold -100 and what the others hold; 4.2's check plants examples by hand,
    with made-up labels, so the student copy shows no labelled example of our format (the old planted ones did)."""
    from helpers.course import exercises
    from helpers.course.notebooks import read_py

    copy = "\n".join(cell.source for cell in exercises.student_notebook(read_py(NOTEBOOK)).cells)
    assert "def planted_examples" in copy  # the search has its target
    found = [s for s in ("[-100, -100, 7, 2]", "[-100, 8, 2]", "[-100, 8, 2, -100]") if s in copy]
    assert not found, f"the student copy of notebook 04 shows a labelled example of 4.1's format: {found}"


def test_the_table_under_exercise_4_1_shows_the_students_labels_without_saying_where_the_minus_100_go():
    """4.1 asks which positions hold -100 and what the others hold: the cell under its check prints the student's own
    labels beside the pieces. The old one cut the prompt at labels.count(-100) and said "the model shifts the labels
    by one" (the layout 4.1 asks for)."""
    copy = "\n".join(student_cells(NOTEBOOK))
    assert "label_pieces" in copy  # the search has its target
    found = [s for s in ("count(-100)", "shifts the labels by one", 'example["labels"][1:]') if s in copy]
    assert not found, f"the student copy of notebook 04 tells 4.1's layout: {found}"
