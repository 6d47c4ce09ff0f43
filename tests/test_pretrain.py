"""helpers.training.pretrain (span corruption), the parallel-pair cap, and train's variant switches end to end."""

from __future__ import annotations

import json
import random
import statistics

import pytest
import torch

from helpers.cli import build_parser, train_command
from helpers.text.data import parallel_subset
from helpers.text.tokens import BOS_ID, EOS_ID, IGNORE_INDEX, SEP_ID, DataError, collate
from helpers.training.config import preset_config
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


def test_train_flags_reach_the_config():
    args = build_parser().parse_args(
        "train --data builtin --steps 3 --out x --attention synthesizer --bottleneck-dim 8 --positions none "
        "--pretrain span --pretrain-fraction 0.5 --parallel-pairs 100 --precision fp16".split()
    )
    from helpers.cli import _train_overrides

    assert _train_overrides(args) == {
        "attention": "synthesizer",
        "bottleneck_dim": 8,
        "positional": "none",
        "pretrain": "span",
        "pretrain_fraction": 0.5,
        "parallel_pairs": 100,
        "precision": "fp16",
    }
    assert _train_overrides(build_parser().parse_args("train --data builtin --steps 3 --out x".split())) == {}


@pytest.mark.parametrize(
    "overrides, model_fields",
    [
        ({"attention": "synthesizer", "pretrain": "span", "parallel_pairs": 300}, {"attention": "synthesizer"}),
        ({"bottleneck_dim": 6, "positional": "sinusoidal"}, {"bottleneck_dim": 6}),
        ({"positional": "rotary"}, {"positional": "rotary"}),
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
