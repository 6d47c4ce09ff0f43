"""helpers.training.pretrain (span corruption), the parallel-pair cap, and train's variant switches end to end."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import random
import statistics

import pytest
import torch

from helpers import cli
from helpers.cli import build_parser, train_command
from helpers.text.batches import IGNORE_INDEX, collate
from helpers.text.data import parallel_subset
from helpers.text.sources import DataError
from helpers.text.tokenizer import BOS_ID, EOS_ID, SEP_ID
from helpers.training.config import TrainConfig, preset_config
from helpers.training.pretrain import MASK_ID, SpanCorruptionBatcher, corrupt_span, split_budget


def _parts(ex):
    ids = ex.input_ids
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID and ids.count(MASK_ID) == 1 and ids.count(SEP_ID) == 1
    m, s = ids.index(MASK_ID), ids.index(SEP_ID)
    assert ex.prefix_len == s + 1, "the source is everything up to and including <sep>"
    return ids[1:m], ids[s + 1 : -1], ids[m + 1 : s]  # prefix, span, suffix


def test_corrupt_span_cuts_one_span_out_and_asks_for_it_back():
    rng = random.Random(0)
    sentence = list(range(10, 40))  # 30 tokens, ids clear of the special ones
    ratios, lengths = [], []
    for _ in range(2000):
        ex = corrupt_span(sentence, rng, max_len=24)
        prefix, span, suffix = _parts(ex)
        kept = prefix + span + suffix
        assert kept == sentence[: len(kept)], "prefix + span + suffix must be the sentence's beginning, in order"
        assert 4 <= len(kept) <= (24 - 4) * 7 // 8 and len(ex.input_ids) <= 24
        assert span and (prefix or suffix), "a span to predict, and something left to see"
        ratios.append(len(span) / len(kept))
        lengths.append(len(kept))
    assert 0.2 < statistics.mean(ratios) < 0.3, "the span is a quarter of the kept text on average"
    assert len(set(lengths)) > 10, "the kept length varies"


def test_corrupt_span_short_sentences():
    rng = random.Random(1)
    assert corrupt_span([7], rng, 24) is None  # nothing to cut and still see
    for _ in range(50):
        prefix, span, suffix = _parts(corrupt_span([7, 8], rng, 24))
        assert len(span) == 1 and len(prefix + suffix) == 1


def test_span_batcher_new_cuts_each_epoch_same_for_same_seed_and_labels_on_the_span():
    sentences = [list(range(10, 10 + n)) for n in range(1, 30)]
    a, b = (SpanCorruptionBatcher(sentences, 24, 200, seed=3) for _ in range(2))
    assert a.dropped == 1  # the one-token sentence, counted
    first = [bt.input_ids.tolist() for bt in a]  # epoch 0, then the batcher moves to epoch 1
    assert first == [bt.input_ids.tolist() for bt in b]
    second = [bt.input_ids.tolist() for bt in a]

    def rows(batches):  # the examples, whatever batches they fell into
        return sorted(tuple(t for t in row if t) for bt in batches for row in bt)

    assert rows(first) != rows(second), "epoch 1 must cut the sentences differently"
    # resuming mid-epoch continues with the very next batch
    c = SpanCorruptionBatcher(sentences, 24, 200, seed=3)
    c.set_epoch(1)
    it = iter(c)
    next(it)
    state = c.state_dict()
    d = SpanCorruptionBatcher(sentences, 24, 200, seed=3)
    d.load_state_dict(state)
    assert [bt.input_ids.tolist() for bt in d] == second[1:]
    with pytest.raises(DataError, match="cannot resume"):
        SpanCorruptionBatcher(sentences[:-1], 24, 200, seed=3).load_state_dict(state)
    ex = corrupt_span(list(range(10, 30)), random.Random(0), 24)
    batch = collate([ex])
    prefix, span, _ = _parts(ex)
    assert batch.labels[0][batch.labels[0] != IGNORE_INDEX].tolist() == span + [EOS_ID], "loss on the span only"


def test_split_budget_keeps_the_total():
    cfg = preset_config("tiny", minutes=10.0, pretrain="span")
    pre, fine = split_budget(cfg)
    assert pre.minutes == pytest.approx(3.0) and fine.minutes == pytest.approx(7.0)
    pre, fine = split_budget(preset_config("tiny", steps=101), 0.5)
    assert pre.steps + fine.steps == 101 and pre.steps >= 1
    for steps in (2, 3):  # a phase of one step (`train --pretrain span --steps 2` was refused)
        pre, fine = split_budget(preset_config("tiny", steps=steps, pretrain="span"))
        assert (pre.steps, fine.steps) == (1, steps - 1) and pre.pretrain == fine.pretrain == "span"
    with pytest.raises(ValueError, match="use at least 2"):
        preset_config("tiny", steps=1, pretrain="span")
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        preset_config("tiny", pretrain_fraction=1.0)
    with pytest.raises(ValueError, match="pretrain='mlm' is not known"):
        preset_config("tiny", pretrain="mlm")


def test_parallel_subset_is_nested_and_refuses_too_many():
    pairs = [(f"fr{i}", f"en{i}") for i in range(100)]
    small, large = parallel_subset(pairs, 10, seed=0), parallel_subset(pairs, 40, seed=0)
    assert len(small) == 10 and set(small) <= set(large) and len(set(large)) == 40
    assert parallel_subset(pairs, None) == pairs
    with pytest.raises(DataError, match="has only 100 pairs"):
        parallel_subset(pairs, 101)


def _train_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["train"]


# a value to pass for each option of `train` that has no choices (an option with choices gets its first choice that
# differs from the tiny preset's); "minutes" is left out: it excludes "steps"
SAMPLE = {
    "data": "builtin", "columns": "fr,en", "steps": "4", "preset": "tiny", "seed": "1", "max_tokens": "300",
    "bottleneck_dim": "8", "pretrain_fraction": "0.5", "parallel_pairs": "100", "cooldown": "0.3", "lr": "0.002", "label_smoothing": "0.05", "muon_lr_scale": "1.5",
    "vocab_size": "500", "max_len": "40", "checkpoint_every": "2", "dropout": "0.05",
}  # fmt: skip
# qk_norm=1 with --attention synthesizer is refused (tests/nn/test_variants.py); 0 still has to arrive as an override
CHOICES = {
    "qk_norm": 0,
    "compile": 0,
}  # compile=1 would build C++ kernels for minutes: tests/training/test_distributed.py


def train_flag_problems(out, lm_folder, monkeypatch) -> list[str]:
    """Every option of the `train` parser, given a value unlike the preset's, must reach train_command: as the
    argument of its name, or (cli.TRAIN_FLAGS) as the override of its TrainConfig field, which the saved
    checkpoint's configuration then holds; every TRAIN_FLAGS entry must be an option shown in `train --help`.
    Returns what fails ([] when nothing does); runs a 4-step training with every option set."""
    parser, problems = _train_parser(), []
    options = {a.dest: a for a in parser._actions if a.dest not in ("help", "minutes")}
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    params = set(inspect.signature(cli.train_command).parameters)
    tiny, text = preset_config("tiny"), parser.format_help()
    for flag, field in cli.TRAIN_FLAGS.items():
        option = "--" + flag.replace("_", "-")
        if flag not in options or option not in options[flag].option_strings or option not in text:
            problems.append(f"TRAIN_FLAGS names {flag!r} but `train --help` shows no {option}")
        if field not in fields:
            problems.append(f"TRAIN_FLAGS sends {option} to {field!r}, which is no TrainConfig field")
    argv = ["train", "--out", str(out)]
    for dest, action in options.items():
        if dest not in cli.TRAIN_FLAGS and dest not in params:
            problems.append(f"--{dest} is parsed but is neither a train_command argument nor in cli.TRAIN_FLAGS")
        if dest in CHOICES:
            value = CHOICES[dest]
        elif action.choices:
            value = next(c for c in action.choices if c != getattr(tiny, cli.TRAIN_FLAGS.get(dest, dest), None))
        else:
            value = str(lm_folder) if dest == "init_embeddings" else SAMPLE.get(dest)
        if dest != "out" and value is None:
            problems.append(f"no sample value for --{dest}: add one to SAMPLE")
        elif dest != "out":
            argv += [action.option_strings[-1], str(value)]
    if problems:
        return problems
    args = build_parser().parse_args(argv)
    given = {dest: getattr(args, dest) for dest in options}
    calls = []
    real = cli.train_command
    monkeypatch.setattr(cli, "train_command", lambda **kw: calls.append(kw) or real(**kw, progress=False))
    try:
        rc = cli.main(argv)  # a user error is a message and status 2
    except Exception as err:  # a broken wiring may fail here: say how, as one more problem
        return [f"train {' '.join(argv)} failed: {type(err).__name__}: {err}"]
    if rc != 0:
        return [f"train {' '.join(argv)} stopped with status {rc}"]
    if not calls:
        return [f"train {' '.join(argv)} did not call train_command"]
    kw, overrides = calls[0], calls[0].get("overrides") or {}
    saved = json.loads((out / "checkpoint.json").read_text())["config"]["train"]
    for dest, value in given.items():
        if dest in cli.TRAIN_FLAGS:
            field = cli.TRAIN_FLAGS[dest]
            if overrides.get(field) != value or saved.get(field) != value:
                problems.append(
                    f"--{dest} {value!r}: override {field}={overrides.get(field)!r}, checkpoint {saved.get(field)!r}"
                )
        elif kw.get(dest) != (cli._columns(value) if dest == "columns" else value):
            problems.append(f"--{dest} {value!r} reached train_command as {dest}={kw.get(dest)!r}")
    return problems


@pytest.fixture(scope="module")
def lm_folder(tmp_path_factory):
    from helpers.hf.tiny import tiny_causal_lm
    from helpers.text.corpus import builtin_corpus

    return tiny_causal_lm(builtin_corpus(500, seed=0), tmp_path_factory.mktemp("lm"), hidden=48, seed=0)


@pytest.mark.training
def test_every_train_flag_reaches_the_checkpoints_config(tmp_path, lm_folder, monkeypatch):
    assert train_flag_problems(tmp_path / "run", lm_folder, monkeypatch) == []
    assert cli._train_overrides(build_parser().parse_args("train --data builtin --steps 3 --out x".split())) == {}


def _unmapped_flag(monkeypatch):  # a flag added to the parser, not to TRAIN_FLAGS: parsed, then dropped
    monkeypatch.setattr(cli, "TRAIN_FLAGS", {k: v for k, v in cli.TRAIN_FLAGS.items() if k != "parallel_pairs"})


def _flag_without_option(monkeypatch):  # TRAIN_FLAGS names a switch the parser never got
    monkeypatch.setattr(cli, "TRAIN_FLAGS", {**cli.TRAIN_FLAGS, "weight_decay": "weight_decay"})


def _override_dropped(monkeypatch):  # the mapping is right but one override never reaches the configuration
    real = cli._train_overrides
    monkeypatch.setattr(cli, "_train_overrides", lambda a: {k: v for k, v in real(a).items() if k != "init_embeddings"})


def _seed_not_passed(monkeypatch):  # _train calls train_command without the parsed seed
    real = cli._train
    monkeypatch.setattr(cli, "_train", lambda a: real(argparse.Namespace(**{**vars(a), "seed": 0})))


@pytest.mark.training
@pytest.mark.parametrize(
    "mutant", [_unmapped_flag, _flag_without_option, _override_dropped, _seed_not_passed], ids=lambda f: f.__name__[1:]
)
def test_the_train_flag_check_fails_on_a_flag_that_is_not_wired(tmp_path, lm_folder, monkeypatch, mutant):
    mutant(monkeypatch)
    assert train_flag_problems(tmp_path / "run", lm_folder, monkeypatch) != []


@pytest.mark.training
@pytest.mark.parametrize(
    "overrides, model_fields",
    [
        (
            {"attention": "synthesizer", "positional": "learned", "pretrain": "span", "parallel_pairs": 300},
            {"attention": "synthesizer"},
        ),
        ({"bottleneck_dim": 6, "positional": "sinusoidal"}, {"bottleneck_dim": 6}),
        ({"positional": "alibi"}, {"positional": "alibi"}),
        ({}, {"positional": "rotary"}),  # the default
    ],
)
def test_train_command_with_a_variant(tmp_path, overrides, model_fields):
    out = tmp_path / "run"
    result = train_command("builtin", steps=20, out=out, preset="tiny", overrides=overrides, progress=False)
    summary = json.loads((out / "train_summary.json").read_text())
    for key, value in model_fields.items():
        assert summary["model"][key] == value
    if overrides.get("pretrain"):
        pre = torch.load(out / "pretrain" / "checkpoint.pt", weights_only=True, map_location="cpu")
        assert pre["step"] == 6 and result.steps == 14, "20 steps shared 30/70 between pretraining and translation"
        assert summary["pretraining"]["steps"] == 6
        assert summary["data"]["pairs"]["train"] > 300  # the cap is on pairs trained on, not on the split
    else:
        assert result.steps == 20 and summary["pretraining"] is None
