"""Notebook 03: its outputs for the report, its checks catch the mistakes they name, its cells are the stages of
``train`` (data cells == ``text.data.prepare_data``, sizing == ``training.sizing.size_for_run``, model ==
``pipeline.start_model``) and its training loop is helpers.training.train.train, which ``train`` runs (defined once,
proven equal).

The notebook runs once in-process in quick mode (tiny preset, built-in corpus). Each check is then
called with a deliberately broken input, or re-run with one piece of ``TrainingRun``'s resume replaced
by a plausible mistake (the optimizer not restored, the random state not restored, ...), and must raise
AssertionError; with the real code it passes. The parity tests (data cells == ``prepare_data``, model cell ==
``pipeline.start_model``, loop == ``helpers.training.train.train``) are shown to be sensitive by re-executing a
notebook cell with one line changed.
The resume check lives here, not in the notebook: it is test infrastructure, run on the notebook's loop.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import replace
from itertools import islice
from pathlib import Path

import pytest
import torch

from helpers import pipeline, runtime
from helpers.course import checks, exercises
from helpers.course.notebooks import code_cells
from helpers.evaluation import evaluate as E
from helpers.evaluation import translation
from helpers.nn import build_model
from helpers.nn.model import build_attention_mask, num_parameters
from helpers.text import data as D
from helpers.text.batches import BucketBatcher, collate
from helpers.text.tokenizer import PAD_ID, tokenizer_for
from helpers.training import checkpoint as ck
from helpers.training import config as C
from helpers.training import train as T
from tests.solved import reads_solved, solved
from tests.training.test_checkpoint import optimizer_tensors

QUESTIONS = [f"3.{k}" for k in range(1, 5)]  # notebook 07, its appendix, asks three more
pytestmark = [pytest.mark.notebook, reads_solved("03")]  # every test here reads the solved notebook's run

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "solutions" / "03_translate_fr_en.py"
FIGURES = [
    "03_example_format",
    "03_lengths",
    "03_lr_schedule",
    "03_loss",
]
SEED = 0


@pytest.fixture(scope="module")
def nb():
    return code_cells(NOTEBOOK), solved("03").namespace  # every cell, and full marks for the solutions


@pytest.fixture(scope="module")
def ns(nb):
    return nb[1]


def cell_defining(cells, name):
    found = [c for c in cells if f"def {name}(" in c.source]
    assert len(found) == 1, f"expected one cell defining {name}, found {len(found)}"
    return found[0]


def cell_calling(cells, call):
    found = [c for c in cells if call in c.source]
    assert len(found) == 1, f"expected one notebook cell containing {call!r}, found {len(found)}: update this test"
    return found[0]


def mutate(source: str, old: str, new: str) -> str:
    assert source.count(old) == 1, f"the notebook cell no longer contains {old!r} once: update this test"
    return source.replace(old, new)


def check(ns, name: str, student, *args) -> None:
    """The notebook's check ``name``, split into a probe and a verify (helpers.course.probes), run on ``student``:
    ``verify_<name>(probe_<name>(student, *args))``, as the check cell calls them (the verify sees only the values)."""
    ns[f"verify_{name}"](ns[f"probe_{name}"](student, *args))


def run_step_check(nb, loop) -> None:
    """The notebook's check cell of Exercise 3.3 (the call of its probe and verify), run on ``loop``."""
    cells, ns = nb
    cell = cell_calling(cells, "verify_training_step(probe_training_step(")
    exec(compile(cell.source, "<notebook 03 training-step check>", "exec"), dict(ns, train_loop=loop))


def mutated_loop(nb, old: str, new: str):
    """The notebook's train_loop, re-executed with one line of its source replaced (a plausible mistake)."""
    cells, ns = nb
    cell = cell_defining(cells, "train_loop")
    env = dict(ns)
    exec(compile(mutate(cell.source, old, new), "<notebook 03 train_loop, mutated>", "exec"), env)
    return env["train_loop"]


# ---------------------------------------------------------------------------------------------
# what the notebook writes for the report


def report_sets_described(report: dict, splits) -> bool:
    sets = report["test_sets"]
    return sets["new"]["pairs"] == len(splits.new) and sets["test"]["pairs"] == len(splits.test)


def test_metrics_json_has_the_shared_layout_with_sane_values(ns):
    """03_scratch.json is a metrics_record: model, training, data (with every drop), evaluate_pairs results."""
    import sacrebleu

    m = json.loads((runtime.metrics_dir() / "03_scratch.json").read_text())
    assert m["schema"] == E.METRICS_SCHEMA and m["notebook"] == "03_translate_fr_en" and m["quick"] is True
    test_pairs = ns["splits"].test
    sources, references = [fr for fr, _ in test_pairs], [en for _, en in test_pairs]

    evs = m["evaluations"]
    newer, new, indist = ns["NEWER"], D.NEW_SENTENCES, D.IN_DISTRIBUTION
    assert ns["newer_pairs"], "conftest provides a newer-sentence stand-in: the notebook must score it"
    assert [(ev["test_set"], ev["beams"]) for ev in evs] == [
        (newer, 1), (newer, 4), (new, 1), (new, 4), (indist, 1), (indist, 4)
    ], "the newer sentences lead, then our held-out new-sentence set, then the random split; greedy then beam"  # fmt: skip
    sizes = {newer: len(ns["newer_pairs"]), new: len(ns["splits"].new), indist: len(test_pairs)}
    for ev in evs:
        assert set(E.EVALUATION_KEYS) <= set(ev), f"missing {set(E.EVALUATION_KEYS) - set(ev)}"
        assert ev["n"] == sizes[ev["test_set"]] > 0
        for key in ("bleu", "chrf"):
            assert isinstance(ev[key], float) and 0 <= ev[key] <= 100
        assert ev["bleu_signature"].startswith("nrefs:1|") and "tok:13a" in ev["bleu_signature"]
        assert ev["chrf_signature"].startswith("nrefs:1|") and "nc:6" in ev["chrf_signature"]
        assert ev["chrf"] > ev["copy_baseline"]["chrf"] and ev["word_baseline"] is not None
        for kind in ("length", "unseen_word"):
            assert sum(r["n"] for r in ev["slices"][kind]) == ev["n"], f"the {kind} slices do not cover the test set"
        assert ev["sentences_per_s"] > 0 and len(ev["samples"]) == min(10, ev["n"])
    # recomputed here from the notebook's translations and the test split, not copied from the record
    assert evs[4]["bleu"] == round(sacrebleu.corpus_bleu(ns["greedy"], [references]).score, 2)
    assert evs[5]["bleu"] == round(sacrebleu.corpus_bleu(ns["beam"], [references]).score, 2)
    assert evs[4]["copy_baseline"]["bleu"] == round(sacrebleu.corpus_bleu(sources, [references]).score, 2)
    word_by_word = [ns["words"].word_by_word(fr) for fr in sources]
    assert evs[4]["word_baseline"]["bleu"] == round(sacrebleu.corpus_bleu(word_by_word, [references]).score, 2)
    assert evs[4]["bleu"] > evs[4]["copy_baseline"]["bleu"]

    model = m["model"]
    assert model["parameters"] == num_parameters(ns["model_cfg"]) == sum(p.numel() for p in ns["model"].parameters())
    assert model["step"] == ns["result"].steps and model["checkpoint"] == str(ns["RUN_DIR"])
    assert model["config"]["vocab_size"] == ns["tok"].vocab_size

    tr = m["training"]
    assert isinstance(tr["steps"], int) and tr["steps"] == ns["result"].steps and 0 < tr["steps"] <= ns["TRAIN_STEPS"]
    assert isinstance(tr["tokens"], int) and tr["tokens"] > tr["steps"]
    assert tr["minutes"] > 0 and tr["tokens_per_s"] > 0
    assert tr["val_loss"] > 0 and tr["val_ppl"] == pytest.approx(math.exp(tr["val_loss"]), rel=1e-6)
    assert tr["preset"] == "tiny" and tr["config"] == ns["cfg"].to_dict() and tr["precision"] == "fp32"

    data = m["data"]
    assert data["synthetic"] is True and data["source"] == "builtin" and data["limit"] == ns["DATA_LIMIT"]
    splits = ns["splits"]
    assert data["pairs"] == {
        "train": len(splits.train),
        "valid": len(splits.valid),
        "test": len(splits.test),
        "new": len(splits.new),
    }
    assert report_sets_described(data["report"], splits)
    report = data["report"]
    assert report["lines_read"] == ns["load_report"].lines_read and report["split"] == data["pairs"]
    assert report["too_long_for_max_len"] == {
        "train": ns["encode_train"].dropped_too_long,
        "valid": ns["encode_valid"].dropped_too_long,
    }
    assert report["too_long_for_max_len"]["train"] > 0, "quick mode drops pairs as too long: the count must show it"
    assert {"device", "name", "memory_gb", "fp16_native", "bf16_native", "torch_version"} <= set(m["hardware"])
    json.dumps(m)  # plain JSON all the way down


def test_every_figure_is_saved_as_pdf_and_png(ns):
    folder = runtime.figures_dir()
    for name in FIGURES:
        assert (folder / f"{name}.pdf").read_bytes()[:4] == b"%PDF", name
        assert (folder / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name


def test_off_the_cpu_the_rule_measures_the_sizes_around_the_preset_and_the_preset_keeps_its_size(ns):
    """Quick mode (and a GPU) keeps the preset's size and shows the rule's choice among three sizes around it, each
    measured for the run's own budget; the size race itself is notebook 07's (tests/notebooks/test_notebook07.py)."""
    choice = ns["SIZING"]
    chosen = choice["sizes"][choice["chosen"]]
    assert [(s["n_layer"], s["d_model"]) for s in choice["sizes"]] == [tuple(s) for s in ns["SIZES_AROUND"]]
    assert choice["budget_seconds"] == pytest.approx(ns["TRAIN_MINUTES"] * 60)
    assert chosen["tokens_per_s"] and chosen["tokens_per_s"] > 0
    assert ns["model_cfg"].d_model == C.PRESETS["tiny"].d_model, "quick mode trains the tiny preset's own size"


def test_the_run_folder_holds_checkpoint_tokenizer_and_readable_info(ns):
    run = Path(ns["RUN_DIR"])
    assert (run / "checkpoint.pt").is_file() and (run / "tokenizer" / "spm.model").is_file()
    info = json.loads((run / "checkpoint.json").read_text())
    assert info["step"] == ns["result"].steps and info["train_state"]["final"] is True


def test_the_lr_figure_plots_this_runs_recorded_schedule(ns):
    """The figure's rates are the ones the loop recorded (not a schedule computed for some other length)."""
    cfg, result = ns["cfg"], ns["result"]
    recorded = ns["recorded"]
    assert recorded == [(h["step"], h["lr"]) for h in result.history] and recorded[-1][0] == result.steps
    for step, lr in recorded:
        if step <= cfg.warmup_steps:  # the warm-up does not depend on the (estimated) length of the run
            assert lr == pytest.approx(cfg.lr * step / cfg.warmup_steps), f"step {step}"
        assert cfg.lr * cfg.min_lr_ratio - 1e-12 <= lr <= cfg.lr + 1e-12, f"step {step}: lr {lr} outside the schedule"


# ---------------------------------------------------------------------------------------------
# Exercise 3.1: groups of pairs that share a sentence (the notebook uses the student's groups to check the split)


def test_the_students_groups_are_the_groups_split_pairs_made(ns):
    """Defined once: split_pairs keeps its own grouping; the notebook's sentence_groups must find the same groups
    (their number, how many were joined through an English sentence, and how many pairs those hold)."""
    pairs, report = ns["pairs"], ns["splits"].report
    groups = ns["sentence_groups"](pairs)
    joined = [g for g in groups if len({pairs[i][0] for i in g}) > 1]
    assert (len(groups), len(joined), sum(map(len, joined))) == (
        report.n_groups,
        report.groups_joined_by_english,
        report.pairs_kept_together,
    )
    assert ns["straddling"] == [] and len(ns["groups"]) == report.n_groups


def test_group_check_fails_on_groups_that_are_too_large_or_miss_a_pair(ns):
    pairs, groups_fn = ns["pairs"], ns["sentence_groups"]
    check(ns, "sentence_groups", groups_fn, pairs)
    with pytest.raises(AssertionError, match="groups are"):
        check(ns, "sentence_groups", lambda pairs: [list(range(len(pairs)))], pairs)  # everything in one group
    with pytest.raises(AssertionError, match="exactly one group"):
        check(ns, "sentence_groups", lambda p: groups_fn(p)[:-1] if len(p) > 11 else groups_fn(p), pairs)


def test_group_check_keeps_french_and_english_apart(ns):
    """The drawn pairs hold the same text on both sides: a grouping keyed by the text alone joins what it must not."""

    def mixed(pairs):  # union-find over sentences, French and English in one key space
        parent = {}

        def root(x):
            parent.setdefault(x, x)
            while parent[x] != x:
                x = parent[x]
            return x

        for fr, en in pairs:
            parent[root(fr)] = root(en)
        groups = {}
        for i, (fr, _) in enumerate(pairs):
            groups.setdefault(root(fr), []).append(i)
        return list(groups.values())

    values = ns["probe_sentence_groups"](mixed, ns["pairs"], seed=3)
    with pytest.raises(AssertionError, match="groups, but split_pairs found"):
        ns["verify_sentence_groups"](values, seed=3)


PROBED = {  # each exercise's check: (its name, the student's function, the probe's other arguments)
    "3.1": ("sentence_groups", "sentence_groups", ["pairs"]),
    "3.2": ("batch_tensors", "batch_tensors", ["train_examples"]),
    "3.3": ("training_step", "train_loop", ["cfg", "train_examples"]),
    "3.4": ("greedy_decode", "greedy_decode", ["model", "tok", "sources"]),
    "3.5": ("bleu_by_hand", "bleu_by_hand", ["greedy", "references"]),
}


@pytest.mark.parametrize("exercise", list(PROBED))
def test_each_verify_draws_its_inputs_again_from_the_seed(ns, exercise):
    """The verify judges values alone, its inputs drawn again from the seed: the solution's values pass with the seed
    they were probed with, and fail with another (what the probe drew from that seed is not what the verify draws)."""
    name, student, names = PROBED[exercise]
    args = [ns[n] for n in names] + ([ns["tok"].vocab_size] if exercise == "3.3" else [])
    values = ns[f"probe_{name}"](ns[student], *args, seed=11)
    ns[f"verify_{name}"](values, seed=11)
    with pytest.raises(AssertionError):
        ns[f"verify_{name}"](values, seed=12)


# ---------------------------------------------------------------------------------------------
# Exercise 3.2: a bucketed batch as tensors (the example format)


def package_pieces(examples, pad_id=PAD_ID):
    """What the package gives without writing anything: collate's tensors and the model's own prefix mask."""
    batch = collate(examples, pad_id)
    mask = build_attention_mask(batch.shape[1], batch.prefix_len)[:, 0]
    return {"input_ids": batch.input_ids, "labels": batch.labels, "prefix_len": batch.prefix_len, "attention": mask}


def relabelled(ns, how):
    """The notebook's batch_tensors with one labelling mistake."""

    def batch_fn(examples, pad_id=PAD_ID):
        out = ns["batch_tensors"](examples, pad_id)
        ids, labels = out["input_ids"], out["labels"]
        for b, e in enumerate(examples):
            L, P = len(e.input_ids), e.prefix_len
            if how == "unshifted":  # label = the token itself, not the next one
                labels[b, P - 1 : L - 1] = ids[b, P - 1 : L - 1]
            elif how == "french scored":  # every next token scored, the French included
                labels[b, : L - 1] = ids[b, 1:L]
            elif how == "padding scored":  # predicting padding after <eos> counted as a target
                labels[b, L - 1 : -1] = ids[b, L:]
        return out

    return batch_fn


def test_batch_check_refuses_the_packages_collate_and_mask(ns):
    """Calling the package is not enough: its mask leaves padding readable, which the exercise asks to hide."""
    check(ns, "batch_tensors", ns["batch_tensors"], ns["train_examples"])
    with pytest.raises(AssertionError, match="padding"):
        check(ns, "batch_tensors", package_pieces, ns["train_examples"])


@pytest.mark.parametrize("how", ["unshifted", "french scored", "padding scored"])
def test_batch_check_fails_on_wrong_labels(ns, how):
    with pytest.raises(AssertionError, match="label"):
        check(ns, "batch_tensors", relabelled(ns, how), ns["train_examples"])


def test_batch_tensors_agree_with_the_batcher_on_every_batch(ns):
    """Defined once: the batcher keeps helpers.text.batches.collate; the student's tensors equal it on a whole epoch, and
    the student's mask is the model's prefix mask with padding keys hidden."""
    batcher, examples = ns["train_batcher"], ns["train_examples"]
    for idx in batcher._plan(0):
        batch = [examples[i] for i in idx]
        mine, package = ns["batch_tensors"](batch), collate(batch)
        for key in ("input_ids", "labels", "prefix_len"):
            assert torch.equal(mine[key], getattr(package, key)), key
        lengths = torch.tensor([len(e.input_ids) for e in batch])
        real_keys = torch.arange(package.shape[1])[None, None, :] < lengths[:, None, None]
        assert torch.equal(
            mine["attention"], build_attention_mask(package.shape[1], package.prefix_len)[:, 0] & real_keys
        )


def test_the_students_mask_gives_the_models_logits_at_every_scored_position(ns):
    """Question 3.1's answer, measured: through the model's blocks, the student's mask (padding hidden) and the
    model's own give the same logits wherever the loss looks."""
    model, batch = ns["model"], ns["small_batch"]
    ids, att, labels = batch["input_ids"], batch["attention"], batch["labels"]
    with torch.no_grad():
        x = model.embed(ids, torch.arange(ids.shape[1]))
        for block in model.blocks:
            x = block(x, att[:, None])
        mine = model.lm_head(model.ln_f(x))
        theirs = model(ids, batch["prefix_len"])
    scored = labels != -100
    torch.testing.assert_close(mine[scored], theirs[scored], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(mine[~scored], theirs[~scored]), "padding rows should differ: the masks differ there"


# ---------------------------------------------------------------------------------------------
# no leak


def test_leak_check_fails_when_a_training_pair_is_in_the_test_set(ns):
    splits, tok, train_examples = ns["splits"], ns["tok"], ns["train_examples"]
    ns["check_no_leak"](splits.report, train_examples, splits.test, tok)
    ex = train_examples[0]
    leaked = (tok.decode(ex.input_ids[1 : ex.prefix_len - 1]), tok.decode(ex.input_ids[ex.prefix_len : -1]))
    with pytest.raises(AssertionError, match="training sources"):
        ns["check_no_leak"](splits.report, train_examples, [*splits.test, leaked], tok)
    only_reference = ("Une phrase que personne n'a jamais écrite ici.", leaked[1])  # new French, a training target
    with pytest.raises(AssertionError, match="training targets"):
        ns["check_no_leak"](splits.report, train_examples, [*splits.test, only_reference], tok)


def test_leak_check_reads_the_split_report(ns):
    bad = D.SplitReport(french_in_two_splits=3)
    with pytest.raises(AssertionError, match="two splits"):
        ns["check_no_leak"](bad, ns["train_examples"], ns["splits"].test, ns["tok"])


# ---------------------------------------------------------------------------------------------
# defined once: the notebook's data cells are helpers.text.data.prepare_data

# one cell each; what each call string marks is run in order, in a copy of the notebook's namespace
PIPELINE_CALLS = (
    "text_sources.load_path(",
    "data.clean_pairs(",
    "splits = data.split_pairs(",  # (Exercise 3.1's verify calls it too)
    "tokenizer.tokenizer_for(",
    "testsets.WordTable.from_pairs(",
    "encoding.encode_pairs(",
    "train_batcher = batches.BucketBatcher(train_examples",
    "DATA_INFO = data.data_info(",
)
PIPELINE_OUTPUTS = (
    "pairs", "load_report", "clean_report", "splits", "tok", "words", "test_sets", "test_set_stats", "train_examples",
    "valid_examples", "encode_train", "encode_valid", "train_batcher", "valid_batches", "reports", "DATA_INFO",
)  # fmt: skip


def run_data_cells(nb, run_dir, old: str | None = None, new: str | None = None) -> dict:
    """The notebook's data cells, executed afresh with ``RUN_DIR = run_dir`` (one line replaced, if asked)."""
    cells, ns = nb
    env = {k: v for k, v in ns.items() if k not in PIPELINE_OUTPUTS}
    env["RUN_DIR"] = Path(run_dir)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    sources = [cell_calling(cells, call).source for call in PIPELINE_CALLS]
    if old is not None:
        hits = [i for i, src in enumerate(sources) if old in src]
        assert len(hits) == 1, f"{old!r} is in {len(hits)} data cells, expected 1: update this test"
        sources[hits[0]] = mutate(sources[hits[0]], old, new)
    for src in sources:
        exec(compile(src, "<notebook 03 data cell>", "exec"), env)
    return env


@pytest.fixture(scope="module")
def packaged(ns, tmp_path_factory):
    """What `python -m helpers train`'s data stage makes of the notebook's data, configuration, seed and limit
    (the same call, its report printed and its test sets written)."""
    return D.prepare_data(
        ns["DATA"],
        ns["cfg"],
        tmp_path_factory.mktemp("prepared"),
        seed=ns["SEED"],
        limit=ns["DATA_LIMIT"],
        progress=False,
        static_step=pipeline.static_step(ns["cfg"]),
        stderr=io.StringIO(),
        write_tests=True,
    )


def _first_batches(batcher, n=3):
    batcher.set_epoch(0)
    try:
        return list(islice(iter(batcher), n))
    finally:
        batcher.set_epoch(0)


def _same_batches(a, b):
    return len(a) == len(b) and all(
        torch.equal(x.input_ids, y.input_ids)
        and torch.equal(x.labels, y.labels)
        and torch.equal(x.prefix_len, y.prefix_len)
        for x, y in zip(a, b)
    )


def assert_same_data(env, prepared):
    """The notebook's step-by-step data equal prepare_data's, step by step; the message names the first that differs."""
    # each comparison is made before its assert: pytest would otherwise diff two lists of thousands of pairs to
    # explain a failure (100 s for the training examples), and the planted mistakes below fail on purpose
    mine = env["splits"]
    same_splits = (mine.train, mine.valid, mine.test, mine.new) == (
        prepared.splits.train,
        prepared.splits.valid,
        prepared.test_pairs,
        prepared.new_pairs,
    )
    assert same_splits, "the splits differ from prepare_data's"
    same_words = (env["words"].counts, env["words"].english) == (prepared.words.counts, prepared.words.english)
    assert same_words, "the word tables differ from prepare_data's"
    assert env["tok"].model_proto == prepared.tokenizer.model_proto, "the tokenizers differ from prepare_data's"
    pairs_of = lambda examples: [(e.input_ids, e.prefix_len) for e in examples]  # noqa: E731
    same_examples = pairs_of(env["train_examples"]) == pairs_of(prepared.train_batcher.examples)
    assert same_examples, "the training examples differ from prepare_data's"
    assert _same_batches(env["valid_batches"], prepared.valid_batches), (
        "the validation batches differ from prepare_data's"
    )
    assert _same_batches(_first_batches(env["train_batcher"]), _first_batches(prepared.train_batcher)), (
        "the first training batches differ from prepare_data's"
    )
    assert env["train_batcher"].state_dict() == prepared.train_batcher.state_dict(), "the batchers differ"
    assert env["DATA_INFO"] == prepared.info, "the data description (what a checkpoint records) differs"
    assert D.data_summary(env["reports"]) == prepared.summary(), "the summary of what was dropped differs"


def test_the_notebooks_data_cells_give_what_prepare_data_gives(nb, packaged, tmp_path):
    """Same data, cfg, seed and limit: the same splits, tokenizer, examples, batches, info and reports."""
    assert_same_data(run_data_cells(nb, tmp_path / "run"), packaged)
    _, ns = nb  # and the notebook's own run, which went on to train
    assert ns["tok"].model_proto == packaged.tokenizer.model_proto and ns["DATA_INFO"] == packaged.info


DATA_MISTAKES = {  # a plausible slip in one data cell -> the difference the comparison must report
    "sample drawn with another seed": ("limit=DATA_LIMIT, seed=SEED)", "limit=DATA_LIMIT, seed=SEED + 1)", "splits"),
    "split with another seed": ("data.split_pairs(pairs, seed=SEED)", "data.split_pairs(pairs, seed=SEED + 1)", "splits"),
    "no new-sentence set": ("data.split_pairs(pairs, seed=SEED)", "data.split_pairs(pairs, new=None, seed=SEED)", "splits"),
    "word table from every split": ("testsets.WordTable.from_pairs(splits.train)", "testsets.WordTable.from_pairs(pairs)", "word tables"),
    "tokenizer trained on every split": ("tokenizer.tokenizer_for(splits.train,", "tokenizer.tokenizer_for(pairs,", "tokenizers"),
    "another max_len": ("encoding.encode_pairs(tok, splits.train, cfg.max_len)", "encoding.encode_pairs(tok, splits.train, 64)", "training examples"),
    "validation not capped": ("splits.valid[: cfg.valid_sentences]", "splits.valid", "validation batches"),
    "batches shuffled with another seed": ("shuffle=True, seed=SEED)", "shuffle=True, seed=SEED + 1)", "first training batches"),
}  # fmt: skip


@pytest.mark.parametrize("mistake", list(DATA_MISTAKES))
def test_data_comparison_notices_a_changed_data_cell(nb, packaged, tmp_path, mistake):
    old, new, what = DATA_MISTAKES[mistake]
    env = run_data_cells(nb, tmp_path / "run", old, new)
    with pytest.raises(AssertionError, match=f"the {what} differ"):
        assert_same_data(env, packaged)


def test_a_resumed_notebook_reuses_the_run_folders_tokenizer_and_refuses_another_size(nb, tmp_path):
    env = run_data_cells(nb, tmp_path / "run")  # trains the tokenizer and saves it in the run folder
    again = run_data_cells(nb, tmp_path / "run")  # the notebook run again on the same folder: a resume
    assert again["tok"].model_proto == env["tok"].model_proto, "a resumed run must reuse the tokenizer"
    bigger = replace(env["cfg"], vocab_size=env["cfg"].vocab_size + 100)
    with pytest.raises(runtime.ConfigMismatchError, match="vocab_size=400"):
        tokenizer_for(env["splits"].train, bigger, tmp_path / "run")


# ---------------------------------------------------------------------------------------------
# the model stage: the notebook's sizing and model cells are the stages train runs (size_for_run, start_model)


def test_the_notebooks_sizing_cell_is_the_sizing_stage_of_train(nb, monkeypatch):
    """On a CPU the notebook sizes its model with training.sizing.size_for_run, the stage `train --preset cpu` runs,
    on its training examples and vocabulary, and keeps the configuration and the record that stage returns."""
    cells, ns = nb
    calls = []
    sized = replace(ns["cfg"], d_model=ns["cfg"].d_model * 2)
    monkeypatch.setattr(ns["sizing"], "size_for_run", lambda *a, **k: calls.append(a) or (sized, {"chosen": 3}))
    env = {**ns, "PRESET": "cpu"}
    exec(compile(cell_calling(cells, "SIZING = ").source, "<notebook 03 sizing cell>", "exec"), env)
    assert len(calls) == 1, "the notebook's sizing cell must call sizing.size_for_run once on a CPU"
    assert calls[0][1] is ns["train_examples"] and calls[0][2] == ns["tok"].vocab_size
    assert env["cfg"] is sized and env["SIZING"] == {"chosen": 3}


MODEL_CELL = "model = build_model(model_cfg)"


def run_model_cell(nb, tokenizer, old: str | None = None, new: str | None = None) -> dict:
    """The notebook's model cell, executed afresh for ``tokenizer`` (one line replaced, if asked)."""
    cells, ns = nb
    source = cell_calling(cells, MODEL_CELL).source
    if old is not None:
        source = mutate(source, old, new)
    env = {**ns, "tok": tokenizer}
    exec(compile(source, "<notebook 03 model cell>", "exec"), env)
    return env


def weights_differ(mine: torch.nn.Module, theirs: torch.nn.Module) -> list[str]:
    a, b = mine.state_dict(), theirs.state_dict()
    return [k for k in b if k not in a or not torch.equal(a[k], b[k])] + [k for k in a if k not in b]


def test_the_notebooks_model_cell_builds_the_weights_start_model_builds(nb, packaged):
    env = run_model_cell(nb, packaged.tokenizer)
    built = pipeline.start_model(env["cfg"], packaged, None, env["DEVICE"], resume=ck.FRESH)
    assert weights_differ(env["model"], built.model) == [], "the notebook's first weights differ from start_model's"
    assert env["N_PARAMS"] == num_parameters(built.model.config)


MODEL_MISTAKES = {  # a plausible slip in the model cell: the weights must then differ from start_model's
    "seeded with another seed": ("runtime.set_seed(SEED)", "runtime.set_seed(SEED + 1)"),
    "not seeded right before building": ("runtime.set_seed(SEED)", "pass"),
    "another vocabulary size": ("cfg.model_config(tok.vocab_size, DEVICE)", "cfg.model_config(tok.vocab_size + 1, DEVICE)"),
}  # fmt: skip


@pytest.mark.parametrize("mistake", list(MODEL_MISTAKES))
def test_model_comparison_notices_a_changed_model_cell(nb, packaged, mistake):
    env = run_model_cell(nb, packaged.tokenizer, *MODEL_MISTAKES[mistake])
    built = pipeline.start_model(env["cfg"], packaged, None, env["DEVICE"], resume=ck.FRESH)
    assert weights_differ(env["model"], built.model) != []


# ---------------------------------------------------------------------------------------------
# resuming: the check that used to be a notebook cell, run on the notebook's train_loop

RESUME_STEPS = 40  # length of the small runs that check resuming


class Disconnect(Exception):
    """Stands in for a Colab runtime that goes away in the middle of training."""


def cut_at(step):
    def callback(record, history):
        if record["step"] >= step:
            raise Disconnect()

    return callback


def check_resume(loop_fn, examples, vocab_size, workdir, steps=RESUME_STEPS):
    """Three short tiny-preset runs on the CPU (a step budget: exactly reproducible): one uninterrupted; one cut at
    step 25, after its checkpoint at step 20; and a fresh start with other initial weights in the cut run's folder,
    which must resume from step 20 and end with the uninterrupted run's weights, bit for bit. Then resuming that
    folder with another learning rate must be refused, naming the field."""
    rcfg = C.preset_config(
        "tiny",
        steps=steps,
        checkpoint_every_steps=10,
        checkpoint_minutes=1e6,
        log_interval=5,
        eval_interval=20,
        seed=SEED,
    )
    small = [ex for ex in examples if len(ex.input_ids) <= rcfg.max_len][:400]
    valid = list(BucketBatcher(small[-50:], max_tokens=rcfg.max_tokens, shuffle=False))
    workdir = Path(workdir)

    def fresh(seed=SEED):
        runtime.set_seed(seed)
        model = build_model(rcfg.model_config(vocab_size))
        return model, BucketBatcher(small, max_tokens=rcfg.max_tokens, seed=SEED)

    straight, batcher = fresh()
    loop_fn(straight, batcher, valid, rcfg, workdir / "straight", progress=False)

    cut, batcher = fresh()
    try:
        loop_fn(cut, batcher, valid, rcfg, workdir / "cut", progress=False, callback=cut_at(25))
        raise AssertionError("the simulated disconnect did not happen")
    except Disconnect:
        pass
    assert ck.load_checkpoint(workdir / "cut")["step"] == 20, "expected the checkpoint of step 20 to survive"
    resumed, batcher = fresh(seed=SEED + 1)  # a new runtime: other initial weights, a fresh optimizer
    result = loop_fn(resumed, batcher, valid, rcfg, workdir / "cut", progress=False)
    assert result.resumed_from == 20 and result.steps == steps, (
        f"resumed from {result.resumed_from}, ended at {result.steps}"
    )
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), (
            f"{name} differs between the uninterrupted and the resumed run (max {(a - b).abs().max():.2e}): the checkpoint "
            "misses part of the state (optimizer moments, scaler, RNG states or data position)"
        )
    other, batcher = fresh()
    try:
        loop_fn(other, batcher, valid, replace(rcfg, lr=2 * rcfg.lr), workdir / "cut", progress=False)
    except runtime.ConfigMismatchError as err:
        assert "train.lr" in str(err), f"the refusal does not name the field that differs: {err}"
    else:
        raise AssertionError("a checkpoint made with another learning rate was resumed")


def _check_resume(nb, loop, tmp_path):
    _, ns = nb
    check_resume(loop, ns["train_examples"], ns["tok"].vocab_size, tmp_path)


def test_an_interrupted_notebook_loop_resumes_to_the_same_weights(nb, tmp_path):
    _check_resume(nb, nb[1]["train_loop"], tmp_path)


def _restore_without_optimizer(run, saved):
    ck.restore(saved, model=run.model, scaler=run.scaler)


def _restore_without_rng(run, saved):
    ck.restore(saved, model=run.model, optimizer=run.optimizer, scaler=run.scaler, rng=False)


def _restore_data_from_the_start(run, saved):
    run.batcher.set_epoch(0)
    return T._epoch_stream(run.batcher, run.data_state)


def _restart_the_schedule(run, saved):
    ORIGINAL["_restore_counters"](run, saved)
    run.step = 0


ORIGINAL = {name: getattr(T.TrainingRun, name) for name in ("_restore_state", "_restore_counters", "_restore_data")}
# each replaces one piece of TrainingRun's resume with a plausible mistake
MISTAKES = {
    "optimizer state not restored": ("_restore_state", _restore_without_optimizer),
    "random state not restored": ("_restore_state", _restore_without_rng),
    "data position not restored": ("_restore_data", _restore_data_from_the_start),
    "schedule restarted": ("_restore_counters", _restart_the_schedule),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_resume_check_fails_when_the_checkpoint_misses_state(nb, tmp_path, monkeypatch, mistake):
    name, buggy = MISTAKES[mistake]
    monkeypatch.setattr(T.TrainingRun, name, buggy)
    with pytest.raises(AssertionError):
        _check_resume(nb, nb[1]["train_loop"], tmp_path)


def test_resume_check_fails_when_another_configuration_is_accepted(nb, tmp_path, monkeypatch):
    monkeypatch.setattr(T.ckpt_lib, "check_config", lambda *a, **k: None)
    with pytest.raises(AssertionError, match="another learning rate was resumed"):
        _check_resume(nb, nb[1]["train_loop"], tmp_path)


# ---------------------------------------------------------------------------------------------
# scores and the baseline


def test_score_check_fails_on_the_copy_baseline_and_on_misaligned_translations(ns):
    greedy, references, sources = ns["greedy"], ns["references"], ns["sources"]
    ns["check_scores"](greedy, references, sources)
    with pytest.raises(AssertionError, match="do not beat copying"):
        ns["check_scores"](list(sources), references, sources)  # the copy baseline itself
    with pytest.raises(AssertionError):
        ns["check_scores"](sorted(greedy, key=len), references, sources)  # sorted for batching, never put back
    # fluent English in the wrong order (each line is the next sentence's reference) beats copying the French,
    # so only the alignment test can catch it
    with pytest.raises(AssertionError, match="wrong references"):
        ns["check_scores"](references[1:] + references[:1], references, sources)
    with pytest.raises(AssertionError, match="one translation per source"):
        ns["check_scores"](greedy[:-1], references, sources)


def test_the_notebook_scores_are_sacrebleu_on_its_translations(ns):
    """What the notebook prints and saves is sacreBLEU on the decoded test set, recomputed here."""
    import sacrebleu

    greedy, references = ns["greedy"], ns["references"]
    assert references == [en for _, en in ns["splits"].test] and len(greedy) == len(references)
    assert ns["greedy_eval"]["bleu"] == round(sacrebleu.corpus_bleu(greedy, [references]).score, 2)
    assert ns["greedy_eval"]["chrf"] == round(sacrebleu.corpus_chrf(greedy, [references]).score, 2)
    again = translation.translate(ns["model"], ns["tok"], ns["sources"][:20], beams=1, use_cache=False)
    assert again == greedy[:20], "cached and uncached greedy decoding disagree"


def test_checkpoint_check_fails_on_other_weights_or_step(ns):
    model, run_dir, steps = ns["model"], ns["RUN_DIR"], ns["result"].steps
    ns["check_checkpoint_is_model"](model, run_dir, steps)
    other = build_model(ns["model_cfg"])
    other.load_state_dict(model.state_dict())
    with torch.no_grad():
        other.ln_f.weight.add_(1e-3)
    with pytest.raises(AssertionError, match="ln_f.weight"):
        ns["check_checkpoint_is_model"](other, run_dir, steps)
    with pytest.raises(AssertionError, match="step"):
        ns["check_checkpoint_is_model"](model, run_dir, steps + 1)


# ---------------------------------------------------------------------------------------------
# defined once: the notebook's loop is helpers.training.train.train


@pytest.fixture(scope="module")
def parity_data():
    cfg = C.preset_config(
        "tiny", steps=60, log_interval=10, eval_interval=20, checkpoint_every_steps=25, checkpoint_minutes=1e6, seed=0
    )
    prepared = D.prepare_data("builtin", cfg, None, seed=0, limit=1500, progress=False)
    return cfg, prepared


def _fresh(cfg, prepared, seed=0):
    runtime.set_seed(seed)
    model = build_model(cfg.model_config(prepared.tokenizer.vocab_size))
    batcher = BucketBatcher(prepared.train_batcher.examples, max_tokens=cfg.max_tokens, seed=0)
    return model, batcher


def _same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    return all(torch.equal(sa[k], sb[k]) for k in sa)


def test_notebook_loop_and_helpers_train_end_with_identical_weights(ns, parity_data, tmp_path):
    cfg, prepared = parity_data
    nb_model, batcher = _fresh(cfg, prepared)
    nb_result = ns["train_loop"](nb_model, batcher, prepared.valid_batches, cfg, tmp_path / "notebook", progress=False)
    pkg_model, batcher = _fresh(cfg, prepared)
    pkg_result = T.train(pkg_model, batcher, prepared.valid_batches, cfg, tmp_path / "package", progress=False)
    assert nb_result.steps == pkg_result.steps == 60 and nb_result.tokens == pkg_result.tokens
    assert _same_weights(nb_model, pkg_model), (
        "the notebook's loop and helpers.training.train.train end with different weights"
    )
    nb_ck, pkg_ck = ck.load_checkpoint(tmp_path / "notebook"), ck.load_checkpoint(tmp_path / "package")
    moments_nb, moments_pkg = optimizer_tensors(nb_ck["optimizer"]), optimizer_tensors(pkg_ck["optimizer"])
    assert moments_nb.keys() == moments_pkg.keys()
    assert all(torch.equal(moments_nb[k], moments_pkg[k]) for k in moments_pkg), "the optimisers' moments differ"
    assert nb_ck["data_state"] == pkg_ck["data_state"] and nb_ck["config"] == pkg_ck["config"]
    assert [(h["step"], h["val_loss"]) for h in nb_result.history if "val_loss" in h] == [
        (h["step"], h["val_loss"]) for h in pkg_result.history if "val_loss" in h
    ]


STEP_MISTAKES = {
    "no label smoothing": ("train.loss_fn(logits, labels, cfg.label_smoothing)", "train.loss_fn(logits, labels)"),
    "gradients never zeroed": ("run.optimizer.zero_grad(set_to_none=True)", "pass"),
}


@pytest.mark.parametrize("mistake", list(STEP_MISTAKES))
def test_parity_comparison_notices_a_changed_step(nb, parity_data, tmp_path, mistake):
    """The comparison above is sensitive: a notebook step with one plausible mistake ends with other weights."""
    cfg, prepared = parity_data
    loop = mutated_loop(nb, *STEP_MISTAKES[mistake])
    nb_model, batcher = _fresh(cfg, prepared)
    loop(nb_model, batcher, prepared.valid_batches, cfg, tmp_path / "notebook", progress=False)
    pkg_model, batcher = _fresh(cfg, prepared)
    T.train(pkg_model, batcher, prepared.valid_batches, cfg, tmp_path / "package", progress=False)
    assert not _same_weights(nb_model, pkg_model)


@pytest.mark.parametrize("first,second", [("notebook", "package"), ("package", "notebook")])
def test_a_run_cut_in_one_loop_resumes_in_the_other_to_the_same_weights(ns, parity_data, tmp_path, first, second):
    """The checkpoints are interchangeable: start in the notebook, finish with `python -m helpers train`, or the reverse."""
    cfg, prepared = parity_data
    loops = {"notebook": ns["train_loop"], "package": T.train}
    straight, batcher = _fresh(cfg, prepared)
    T.train(straight, batcher, prepared.valid_batches, cfg, tmp_path / "straight", progress=False)
    model, batcher = _fresh(cfg, prepared)
    with pytest.raises(Disconnect):
        loops[first](model, batcher, prepared.valid_batches, cfg, tmp_path / "cut", progress=False, callback=cut_at(40))
    assert ck.load_checkpoint(tmp_path / "cut")["step"] == 25
    model, batcher = _fresh(cfg, prepared, seed=1)
    result = loops[second](model, batcher, prepared.valid_batches, cfg, tmp_path / "cut", progress=False)
    assert result.resumed_from == 25 and result.steps == 60
    assert _same_weights(straight, model)


# ---------------------------------------------------------------------------------------------
# Exercise 3.3: the training step, checked with an enabled gradient scaler

SCALER_MISTAKES = {  # a mistake about the scaler -> what the check must say
    "no unscale_": (
        "run.scaler.unscale_(run.optimizer)  # true gradients again, before clipping",
        "pass",
        "never unscaled",
    ),
    "clipping before unscaling": (
        "run.scaler.unscale_(run.optimizer)  # true gradients again, before clipping\n"
        "        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)",
        "grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)\n"
        "        run.scaler.unscale_(run.optimizer)",
        "clipped before they were unscaled",
    ),
    "update forgotten": ("        run.scaler.update()\n", "", r"scaler.update\(\) was never called"),
    "optimizer.step() directly": (
        "run.scaler.step(run.optimizer)  # fp16: skipped when a gradient overflowed",
        "run.optimizer.step()",
        r"optimizer.step\(\) alone cannot skip",
    ),
    "gradients never zeroed": ("        run.optimizer.zero_grad(set_to_none=True)\n", "", "previous step's gradients"),
    "no clipping": (
        "cfg.grad_clip)\n        run.check_finite",
        'float("inf"))\n        run.check_finite',
        "not clipped",
    ),
    "no label smoothing": (
        "train.loss_fn(logits, labels, cfg.label_smoothing)",
        "train.loss_fn(logits, labels)",
        "loss",
    ),
}


@pytest.mark.parametrize("mistake", list(SCALER_MISTAKES))
def test_training_step_check_names_each_mistake(nb, mistake):
    old, new, message = SCALER_MISTAKES[mistake]
    with pytest.raises(AssertionError, match=message):
        run_step_check(nb, mutated_loop(nb, old, new))


CORRECT_VARIANTS = {  # other correct ways to write the step: the check must accept them
    "cross_entropy with ignore_index": (
        "loss = train.loss_fn(logits, labels, cfg.label_smoothing)",
        "loss = torch.nn.functional.cross_entropy(logits.float(), labels[labels != -100], "
        "ignore_index=-100, label_smoothing=cfg.label_smoothing)",
    ),
    "the output layer at every position": (  # slower (issue 51), the same loss and gradients
        "logits = model(ids, plen, logits_at=labels != -100)",
        "logits = model(ids, plen)",
    ),
    "every position's logits, cross_entropy skipping the others": (
        "logits = model(ids, plen, logits_at=labels != -100)  # (N, vocab): target positions only\n"
        "        loss = train.loss_fn(logits, labels, cfg.label_smoothing)",
        "logits = model(ids, plen)\n"
        "        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), "
        "ignore_index=-100, label_smoothing=cfg.label_smoothing)",
    ),
    "gradients cleared before the forward pass": (
        "        # BEGIN SOLUTION\n",
        "        # BEGIN SOLUTION\n        run.optimizer.zero_grad(set_to_none=True)\n",
    ),
}


@pytest.mark.parametrize("variant", list(CORRECT_VARIANTS))
def test_training_step_check_accepts_other_correct_steps(nb, variant):
    run_step_check(nb, mutated_loop(nb, *CORRECT_VARIANTS[variant]))


def test_the_recording_scaler_trains_like_torchs_grad_scaler(ns, parity_data, tmp_path, monkeypatch):
    """The check's stand-in is faithful: with no overflow injected, helpers.training.train.train ends with the same weights
    under it as under an enabled torch.amp.GradScaler with the same scale; and it really multiplies the loss."""
    cfg, prepared = parity_data
    cfg = replace(cfg, steps=8)
    stand_in = checks.RecordingScaler(overflow_at=None)
    assert float(stand_in.scale(torch.tensor(3.0))) == 3.0 * 2**10
    stand_in = checks.RecordingScaler(overflow_at=None)
    weights = []
    for scaler in (stand_in, torch.amp.GradScaler("cpu", init_scale=2.0**10)):
        monkeypatch.setattr(T, "make_scaler", lambda *args, s=scaler, **kwargs: s)
        model, batcher = _fresh(cfg, prepared)
        T.train(model, batcher, prepared.valid_batches, cfg, tmp_path / str(len(weights)), progress=False)
        weights.append(model.state_dict())
    assert stand_in.calls == ["scale", "unscale_", "step", "update"] * 8
    for name in weights[0]:
        torch.testing.assert_close(weights[0][name], weights[1][name], rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------------------------------------
# Exercise 3.4: greedy decoding with the cache (the notebook's evaluation decodes with it)


def test_the_students_greedy_decoding_is_the_packages_on_both_test_sets(ns):
    """Defined once: helpers.evaluation.translation.translate keeps the package's decoder; the notebook's evaluation went through
    the student's greedy_decode, and gave the same translations on every sentence of both test sets."""
    model, tok = ns["model"], ns["tok"]
    assert isinstance(ns["translator"].model, ns["GreedyWithYourDecoder"])
    for name, pairs in ns["TEST_SETS"].items():
        package = translation.translate(model, tok, [fr for fr, _ in pairs], beams=1)
        assert ns["outputs"][name, 1] == package, name


def test_greedy_check_refuses_the_package_and_a_decoder_without_cache(ns):
    def check_decoder(decode_fn):
        check(ns, "greedy_decode", decode_fn, ns["model"], ns["tok"], ns["sources"])

    with pytest.raises(AssertionError, match="called model"):
        check_decoder(lambda model, prefixes, budgets, eos_id: model.generate(prefixes, budgets, eos_id))

    def without_cache(model, prefixes, budgets, eos_id):  # right answer, but the whole sequence every step
        out, seqs = [[] for _ in prefixes], [list(p) for p in prefixes]
        for r in range(len(prefixes)):
            while len(out[r]) < budgets[r]:
                S = len(seqs[r])
                mask = torch.ones(1, 1, S, S, dtype=torch.bool).tril() | (torch.arange(S) < len(prefixes[r]))
                caches = [ns["LayerCache"]() for _ in model.blocks]
                token = int(
                    ns["run_cached"](model, torch.tensor([seqs[r]]), torch.arange(S)[None], mask, caches)[0].argmax()
                )
                if token == eos_id:
                    break
                out[r].append(token)
                seqs[r].append(token)
        return out

    with pytest.raises(AssertionError, match="one new position per call"):
        check_decoder(without_cache)


# ---------------------------------------------------------------------------------------------
# Exercise 3.5: BLEU by hand


def test_the_students_bleu_is_the_packages_score(ns):
    """Defined once: helpers.evaluation.evaluate.score keeps sacreBLEU; the student's BLEU of the notebook's translations is the
    same number (sacreBLEU's default smoothing only changes a score whose precisions include a 0)."""
    for name, pairs in ns["TEST_SETS"].items():
        hyps, refs = ns["outputs"][name, 1], [en for _, en in pairs]
        mine, package = ns["bleu_by_hand"](hyps, refs), E.score(hyps, refs)
        if min(mine["precisions"]) > 0:
            assert round(mine["bleu"], 2) == package["bleu"], name
        else:
            assert mine["bleu"] == 0 <= package["bleu"], name


# ---------------------------------------------------------------------------------------------
# conclusions computed from the run: the sentence flips when the numbers do


def test_the_baseline_sentence_follows_the_numbers(ns):
    say = ns["against_baselines"]
    above = say("set", 30.0, 1.0, 20.0, quick=False)
    assert "10.00 above the word-by-word dictionary" in above and "what context buys" in above
    below = say("set", 9.0, 0.4, 21.0, quick=False)
    assert "12.00 below the word-by-word dictionary" in below and "not yet learnt" in below
    assert "context buys" not in below
    assert "does not yet beat copying" in say("set", 0.2, 0.4, 21.0, quick=False)
    assert "noise" in say("set", 9.0, 0.4, 21.0, quick=True)


def test_the_questions_are_3_1_to_3_4():
    """Notebook 07, its appendix, asks the rest (tests/notebooks/test_notebook07.py)."""
    from helpers.course import notebooks as NB

    numbers = [q.number for q in exercises.find_questions(NB.read_py(NOTEBOOK))]
    assert numbers == QUESTIONS


def test_exercise_3_2_does_not_spell_exercise_2_5s_mask_rule():
    """3.2's mask is 2.5's with the padding hidden: its text names 2.5, and its check takes the rule from the package,
    so a student who reads notebook 03 first does not find 2.5's answer (the solution itself is stubbed)."""
    from helpers.course.notebooks import read_py

    copy = "\n".join(cell.source for cell in exercises.student_notebook(read_py(NOTEBOOK)).cells)
    found = [r for r in ("j < P or j <= i", "j <= i", "not after i", "j < P") if r in copy]
    assert not found, f"the student copy of notebook 03 spells the prefix-LM rule: {found}"
    assert "Exercise 2.5's prefix-LM mask" in copy  # the text the exercise now gives instead


def test_where_each_loss_is_lowest_is_measured_only_after_question_3_2():
    """Question 3.2 asks where the smoothed loss is lowest: the four-margin table that prints it (a student read,
    2026-11-28, found it printed before the question) is the experiment under the answer cell; and 5.3's growth of
    attention with the length is not stated in 03."""
    from tests.notebooks import student_cells

    cells = student_cells(NOTEBOOK)
    asked = next(i for i, text in enumerate(cells) if "**Question 3.2" in text)
    measured = [i for i, text in enumerate(cells) if "margins_seen = {}" in text]
    assert measured and min(measured) > asked, f"cells {measured} print where each loss is lowest before cell {asked}"
    assert not any("quadratically" in text for text in cells), "03 states Question 5.3's growth of attention"
