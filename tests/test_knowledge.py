"""helpers.knowledge: the invented people, what the model may see of them, the scoring, the verdicts, the
knowledge-access run at a tiny size, and the BLEU and paired bootstrap the embedding comparison uses (the
embeddings themselves: tests/test_embeddings.py).

The reference cases of notebook 06's exercises (data/reference/06_*.json) are written from the package here:
``python tests/test_knowledge.py --write`` rewrites them; a test checks the saved files still agree.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from helpers import knowledge as K
from helpers.evaluation import evaluate as E

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "data" / "reference"

# ---------------------------------------------------------------------------------------------------------------
# reference cases for Exercises 6.1 and 6.2, each about one rule (the check names the rule when it fails)

EXACT_MATCH_CASES = [
    ("case is ignored", ["dunmere", "KELBY"], ["Dunmere", "Kelby"]),
    ("spaces and punctuation at either end are ignored", [" Dunmere. ", "Kelby!", '"Lorne"'], ["Dunmere", "Kelby", "Lorne"]),
    ("runs of spaces inside a name count as one", ["Kestrel   Bay"], ["Kestrel Bay"]),
    ("an answer that contains the place is not a match", ["Dunmere Ostrava", "born in Kelby", "Kelby"], ["Dunmere", "Kelby", "Kelby"]),
    ("a longer word that starts with the place is not a match", ["Kestrel Bay", "Dunmereby"], ["Kestrel", "Dunmere"]),
    ("an empty answer is wrong", ["", "Kelby"], ["Dunmere", "Kelby"]),
    ("the result is a share, not a count", ["Dunmere", "Kelby", "Lorne", "Sablon"], ["Dunmere", "Kelby", "Lorne", "Hollin"]),
]  # fmt: skip
BASELINE_CASES = [
    ("the town comes from the training answers, never the test answers", ["Kelby"] * 3 + ["Dunmere"] * 2, ["Dunmere"] * 3 + ["Kelby"]),
    ("towns are counted after normalising, as exact_match_accuracy compares them", ["Kelby", "Kelby", "dunmere", "Dunmere", "Dunmere "], ["Dunmere", "Kelby", "Lorne"]),
    ("a tie goes to the town seen first", ["Lorne", "Kelby", "Lorne", "Kelby"], ["Kelby", "Kelby", "Lorne"]),
]  # fmt: skip


def reference_files() -> dict[str, dict]:
    """What data/reference/06_*.json must hold, computed by the package."""
    exact = [{"what": w, "predictions": p, "answers": a, "accuracy": K.accuracy(p, a)} for w, p, a in EXACT_MATCH_CASES]
    baseline = []
    for what, train, test in BASELINE_CASES:
        place = K.majority_answer(train)
        baseline.append({"what": what, "train": train, "test": test, "place": place, "accuracy": K.accuracy([place] * len(test), test)})  # fmt: skip
    note = "written by tests/test_knowledge.py from helpers.knowledge; do not edit by hand"
    return {
        "06_exact_match.json": {"note": note, "cases": exact},
        "06_baseline.json": {"note": note, "cases": baseline},
    }


def write_reference_files() -> None:
    for name, content in reference_files().items():
        (REFERENCE / name).write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n")


def test_saved_reference_cases_still_equal_what_the_package_computes():
    for name, content in reference_files().items():
        assert json.loads((REFERENCE / name).read_text()) == content, f"{name} drifted: run python {__file__} --write"


def test_reference_cases_pin_the_rules_down():
    """Each case separates the rule from a plausible mistake: the cases are not all trivially 1.0."""
    accs = {c[0]: K.accuracy(c[1], c[2]) for c in EXACT_MATCH_CASES}
    assert accs["an answer that contains the place is not a match"] == pytest.approx(1 / 3)
    assert accs["the result is a share, not a count"] == 0.75 and accs["an empty answer is wrong"] == 0.5
    places = [K.majority_answer(train) for _, train, _ in BASELINE_CASES]
    assert places == ["Kelby", "dunmere", "Lorne"]
    leak = Counter(BASELINE_CASES[0][2]).most_common(1)[0][0]
    assert leak != places[0], "the first baseline case must have a different most common town in its test answers"


# ---------------------------------------------------------------------------------------------------------------
# the people and what the model may see of them


def test_people_are_unique_seeded_and_moved_somewhere_else():
    people = K.make_people(500, seed=3)
    assert len({p.name for p in people}) == 500
    assert people == K.make_people(500, seed=3) and people != K.make_people(500, seed=4)
    assert all(p.moved_to != p.born for p in people), "the town moved to is a distractor, never the birthplace"
    assert {p.born for p in people} <= set(K.PLACES) and len({p.job for p in people}) > 5


def test_birthplaces_follow_the_skewed_law():
    people = K.make_people(3000, seed=0)
    counts = Counter(p.born for p in people)
    weights = K.place_weights()
    assert counts.most_common(1)[0][0] == K.PLACES[0]
    top = counts[K.PLACES[0]] / len(people)
    assert abs(top - weights[0]) < 3 * K.standard_error(weights[0], len(people))
    assert weights[0] > 0.2 and math.isclose(weights.sum(), 1.0), "the baseline must be non-trivial"
    assert counts[K.PLACES[0]] > 4 * counts[K.PLACES[10]]


def test_held_out_people_are_in_the_biographies_and_nowhere_else(monkeypatch):
    data = K.make_knowledge_data(60, 20, seed=1)
    assert len(data.finetune) == 40 and len(data.test) == 20
    assert not {p.name for p in data.test} & {p.name for p in data.finetune}
    questions = " ".join(q for q, _ in data.finetune_pairs)
    assert not any(p.name in questions for p in data.test), "a held-out person is asked about in fine-tuning"
    for person, bio in zip(data.people, data.biographies):
        assert bio.startswith(person.name) and f"in {person.born}" in bio and person.moved_to in bio
        assert str(person.year) in bio and person.job in bio
    seen = []
    monkeypatch.setattr(K.Tokenizer, "train", classmethod(lambda cls, texts, **kw: seen.extend(texts)))
    K.knowledge_tokenizer(data, 300)
    assert not any(K.question(p) in seen for p in data.test), "the tokenizer must not see held-out questions"
    assert set(data.biographies) <= set(seen)


def test_question_formats():
    person = K.make_people(1)[0]
    assert K.question(person) == f"Where was {person.name} born?"
    assert K.question(person, "biography") == f"{person.name} was born in"
    with pytest.raises(ValueError, match="biography"):
        K.question(person, "cloze")


# ---------------------------------------------------------------------------------------------------------------
# scoring and verdicts


def test_accuracy_is_exact_match_after_normalisation():
    assert K.normalise_answer("  Kestrel   Bay. ") == "kestrel bay"
    assert K.accuracy(["dunmere.", "Dunmere Ostrava", "Kel"], ["Dunmere", "Dunmere", "Kelby"]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="pair up"):
        K.accuracy(["a"], ["a", "b"])


def test_majority_answer_counts_normalised_and_breaks_ties_by_first_seen():
    assert K.majority_answer(["Kelby", "Kelby", "dunmere", "Dunmere", " Dunmere"]) == "dunmere"
    assert K.majority_answer(["Lorne", "Kelby", "Kelby", "Lorne"]) == "Lorne"


@pytest.mark.parametrize(
    "scratch, pretrained, baseline, n, starts",
    [
        (0.17, 0.69, 0.20, 100, "Yes:"),
        (0.17, 0.24, 0.20, 100, "Not shown:"),  # ahead, but within two standard errors
        (0.17, 0.14, 0.20, 100, "No:"),
        (0.30, 0.25, 0.20, 100, "No:"),  # the scratch model is the one to beat here
        (0.17, 0.24, 0.20, 10_000, "Yes:"),  # the same gap is real on many more questions
    ],
)
def test_the_verdict_flips_with_the_numbers(scratch, pretrained, baseline, n, starts):
    sentence = K.knowledge_verdict(scratch, pretrained, baseline, n)
    assert sentence.startswith(starts), sentence
    assert f"{pretrained:.1%}" in sentence and f"{baseline:.1%}" in sentence


def test_standard_error_is_never_zero():
    assert K.standard_error(0.0, 100) > 0 and K.standard_error(0.5, 100) == pytest.approx(0.05)


# ---------------------------------------------------------------------------------------------------------------
# the experiment at a tiny size


def tiny_configs():
    kcfg, model = K.knowledge_configs(quick=True)
    kcfg = replace(kcfg, n_people=40, n_test=10, pretrain_steps=12, finetune_steps=6, curve_points=2)
    return kcfg, replace(model, warmup_steps=2)


def test_cloze_prompts_hide_exactly_the_birthplace():
    kcfg, _ = tiny_configs()
    data = K.make_knowledge_data(kcfg.n_people, kcfg.n_test, 0)
    tok = K.knowledge_tokenizer(data, 400)
    for person, prompt in zip(data.test, K.cloze_prompts(tok, data, data.test)):
        bio = tok.encode(data.biographies[data.people.index(person)])
        m = prompt.index(K.MASK_ID)
        assert prompt[0] == tok.bos_id and prompt[-1] == tok.sep_id
        assert prompt[1:m] + tok.encode(person.born) + prompt[m + 1 : -1] == bio
        assert tok.decode(prompt[1:m]).endswith("in"), "the birthplace follows 'in', not 'to' (the town moved to)"


def test_run_knowledge_gives_every_model_the_same_start_and_budget(monkeypatch):
    torch.set_num_threads(1)
    kcfg, model_cfg = tiny_configs()
    budgets = []
    original = K.train

    def spy(model, batcher, valid, cfg, out, **kw):
        first = next(iter(model.parameters())).detach().clone()
        budgets.append((kw.get("extra_config", {}).get("phase"), cfg.steps, cfg.lr, first))
        return original(model, batcher, valid, cfg, out, **kw)

    monkeypatch.setattr(K, "train", spy)
    result, run = K.run_knowledge(kcfg, model_cfg)
    phases = [b[0] for b in budgets]
    assert phases == ["pretrain-span"] + ["finetune"] * (2 + kcfg.curve_points)  # scratch, snapshots, biography words
    assert budgets[0][1] == kcfg.pretrain_steps and {b[1] for b in budgets[1:]} == {kcfg.finetune_steps}
    assert {b[2] for b in budgets[1:]} == {kcfg.finetune_lr}
    assert torch.equal(budgets[0][3], budgets[1][3]), "scratch and pretraining must start from the same weights"
    assert not torch.equal(budgets[1][3], budgets[-1][3]), "the pretrained models start from pretrained weights"
    assert [c["pretrain_steps"] for c in result.curve] == [0, 6, 12]
    assert result.scratch == result.curve[0]["accuracy"] and result.pretrained == result.curve[-1]["accuracy"]
    assert result.n_test == 10 and result.n_finetune == 30 and len(run["answers"]["pretrained"]) == 10
    gold = [p.born for p in run["data"].test]
    assert result.pretrained == K.accuracy(run["answers"]["pretrained"], gold)
    assert result.baseline_answer == K.majority_answer([p.born for p in run["data"].finetune])
    assert result.verdict().split(":")[0] in ("Yes", "No", "Not shown")


# ---------------------------------------------------------------------------------------------------------------
# BLEU and the paired bootstrap the embedding comparison scores with (the comparison: tests/test_embeddings.py)


def test_bleu_from_stats_is_sacrebleu_corpus_bleu():
    from sacrebleu.metrics import BLEU

    hyps = ["the cat sat on the mat", "a dog", "hello there friend", ""]
    refs = ["the cat sat on a mat", "the dog", "hello friend", "nothing"]
    assert E.corpus_bleu_from_counts(E.sentence_bleu_counts(hyps, refs).sum(0)) == pytest.approx(
        BLEU().corpus_score(hyps, [refs]).score
    )


def test_paired_bootstrap_sees_a_real_gain_and_no_gain_between_equals():
    refs = [f"the cat number {i} sleeps on the mat" for i in range(60)]
    bad = [f"a dog {i}" for i in range(60)]
    better = E.bootstrap_bleu_difference(bad, refs, refs, resamples=200)
    assert better["delta"] > 50 and better["low"] > 0 and better["p"] == 0.0
    worse = E.bootstrap_bleu_difference(refs, bad, refs, resamples=200)
    assert worse["delta"] == -better["delta"] and worse["high"] < 0 and worse["p"] == 1.0
    half = [r if i % 2 else b for i, (r, b) in enumerate(zip(refs, bad))]
    same = E.bootstrap_bleu_difference(half, half, refs, resamples=200)  # paired: equal on every resample
    assert same["delta"] == 0 and same["low"] == same["high"] == 0 and same["p"] == 1.0, "a tie is no win"
    mixed = E.bootstrap_bleu_difference(bad, half, refs, resamples=200)
    assert 0 < mixed["low"] < mixed["delta"] < mixed["high"] < better["delta"]


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_reference_files()
        print(f"wrote {', '.join(reference_files())} in {REFERENCE}")


# ---------------------------------------------------------------------------------------------------------------
# the pipeline in pieces (the references of Exercises 6.3 to 6.6): the same examples, batches and weights as the
# package's own run


def test_finetune_examples_are_the_translation_format_with_the_loss_on_the_answer_only():
    from helpers.text.batches import IGNORE_INDEX, collate
    from helpers.text.encoding import encode_pairs

    kcfg, model_cfg = tiny_configs()
    data = K.make_knowledge_data(kcfg.n_people, kcfg.n_test, 0)
    tok = K.knowledge_tokenizer(data, 400)
    examples, _ = encode_pairs(tok, data.finetune_pairs, model_cfg.max_len)
    for (q, a), ex in zip(data.finetune_pairs, examples):
        ids, labels = K.finetune_example(tok, q, a, model_cfg.max_len)
        assert ids == ex.input_ids and labels == collate([ex]).labels[0].tolist()
        assert [y for y in labels if y != IGNORE_INDEX] == [*tok.encode(a), tok.eos_id]
    ids, _ = K.finetune_example(tok, *data.finetune_pairs[0], 64)
    assert K.finetune_example(tok, *data.finetune_pairs[0], len(ids) - 1) is None
    with pytest.raises(ValueError, match="labels"):
        K.as_example(ids, [IGNORE_INDEX] * len(ids))
    with pytest.raises(ValueError, match="labels"):
        K.as_example(ids, ids)  # not shifted: each position asked for its own token
    assert K.as_example(ids, ids[1:] + [IGNORE_INDEX]).prefix_len == 1  # a source of <bos> alone is a sequence too


def test_the_example_batcher_makes_the_span_corruption_batchers_batches():
    import random

    kcfg, model_cfg = tiny_configs()
    data = K.make_knowledge_data(kcfg.n_people, kcfg.n_test, 0)
    tok = K.knowledge_tokenizer(data, 400)
    bios = tok.encode_batch(data.biographies)
    theirs = K.SpanCorruptionBatcher(bios, model_cfg.max_len, model_cfg.max_tokens, seed=3)
    mine = K.ExampleBatcher(
        lambda e: K.pretraining_examples(bios, e, 3, model_cfg.max_len), model_cfg.max_tokens, seed=3
    )
    for epoch in range(3):
        theirs.set_epoch(epoch)
        mine.set_epoch(epoch)
        for a, b in zip(theirs, mine, strict=True):
            assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
            assert torch.equal(a.prefix_len, b.prefix_len)
    rng_a, rng_b = random.Random(1), random.Random(1)
    for ids in bios:
        ex = K.corrupt_span(ids, rng_a, 24)
        assert K.corrupt_biography(ids, rng_b, 24) == (ex.input_ids, K.labels_for(ex.input_ids, ex.prefix_len))


def test_knowledge_table_is_run_knowledges_experiment_weight_for_weight():
    torch.set_num_threads(1)
    kcfg, model_cfg = tiny_configs()
    data = K.make_knowledge_data(kcfg.n_people, kcfg.n_test, 0)
    tok = K.knowledge_tokenizer(data, 400)
    table = K.knowledge_table(data, tok, kcfg, model_cfg)
    result, run = K.run_knowledge(kcfg, model_cfg, data=data, tokenizer=tok)
    assert (table["scratch"], table["pretrained"], table["baseline"]) == (
        result.scratch,
        result.pretrained,
        result.baseline,
    )
    assert table["answers"] == run["answers"]
    for name in ("scratch", "pretrained"):
        mine, theirs = table["models"][name].state_dict(), run[name].state_dict()
        assert all(torch.equal(mine[k], theirs[k]) for k in theirs), name
    assert not torch.equal(table["models"]["scratch"].tok_emb.weight, table["models"]["pretrained"].tok_emb.weight)


# ---------------------------------------------------------------------------------------------------------------
# notebook 06's strangers (Question 6.5) and place-named strangers (Question 6.6)


def test_unseen_people_are_new_names_drawn_like_the_others():
    data = K.make_knowledge_data(60, 20, seed=0)
    strangers = K.unseen_people(data, 25, seed=1)
    assert len(strangers) == 25 and len({p.name for p in strangers}) == 25
    assert not {p.name for p in strangers} & {p.name for p in data.people}, "nobody wrote about them"
    assert not any(p.name in bio for p in strangers for bio in data.biographies)
    assert {p.born for p in strangers} <= set(K.PLACES)
    assert K.unseen_people(data, 25, seed=1) == strangers, "seeded"
    # a seed that redraws the data's own people would hand back people the model read about: they are left out
    again = K.unseen_people(data, 25, seed=0)
    assert not {p.name for p in again} & {p.name for p in data.people} and len(again) == 25


def test_named_after_places_puts_the_birthplace_in_the_name_and_nothing_else_changes():
    people = K.make_people(40, seed=3)
    named = K.named_after_places(people, seed=0)
    for before, after in zip(people, named):
        first, surname = after.name.split(" ", 1)
        assert first == before.name.split()[0] and surname == after.born and after.born in K.PLACES
        assert (after.year, after.job, after.she) == (before.year, before.job, before.she)
    assert len({p.born for p in named}) > 10, "towns drawn uniformly, not by the Zipf law"
    assert K.named_after_places(people, seed=0) == named and K.named_after_places(people, seed=1) != named


def test_answer_profile_counts_what_the_answers_are():
    profile = K.answer_profile(["Kelby", "kelby.", "Dunmere", "nowhere", "Kelby"], ["Kelby"] * 5, "Dunmere")
    assert profile["accuracy"] == pytest.approx(3 / 5) and profile["always the baseline's town would score"] == 0
    assert profile["the baseline's town"] == pytest.approx(1 / 5)
    assert profile["a town of the data set"] == pytest.approx(4 / 5)
    assert profile["the commonest answer ('kelby')"] == pytest.approx(3 / 5) and profile["distinct answers"] == 3
    with pytest.raises(ValueError, match="pair up"):
        K.answer_profile(["a"], ["a", "b"], "a")
