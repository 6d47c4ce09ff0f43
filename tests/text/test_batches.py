"""helpers.text.batches: collation (right padding, labels only on the English and ``<eos>``, the loss their mean),
the bucketing batcher (token budget, every example once, less padding than random batches, deterministic per seed
and epoch, resumable mid-epoch) and the static-shape batcher of a compiled step."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from helpers.text.batches import BucketBatcher, StaticBucketBatcher, collate
from helpers.text.corpus import builtin_corpus
from helpers.text.encoding import Example, encode_pairs, make_example
from helpers.text.sources import DataError
from helpers.text.tokenizer import Tokenizer
from tests.text.test_sources import FR_EN

# ============================================================================ collation and the loss mask


def test_labels_are_ignored_everywhere_but_the_english_and_eos(tok):
    pairs = [("J'ai froid.", "I'm cold."), ("Où est la gare ?", "Where is the station?"), ("Oui.", "Yes.")]
    examples = [make_example(tok, fr, en, 64) for fr, en in pairs]
    batch = collate(examples)
    B, T = batch.input_ids.shape
    assert B == 3 and T == max(len(e.input_ids) for e in examples)
    for b, ((_, en), ex) in enumerate(zip(pairs, examples)):
        L = len(ex.input_ids)
        # positions whose NEXT token is English or <eos>, worked out independently of collate
        target_positions = [t for t in range(T - 1) if ex.prefix_len <= t + 1 < L]
        for t in range(T):
            if t in target_positions:
                assert batch.labels[b, t] == batch.input_ids[b, t + 1]
            else:
                assert batch.labels[b, t] == -100
        targets = batch.labels[b][batch.labels[b] != -100].tolist()
        assert targets[-1] == tok.eos_id and tok.decode(targets) == en  # exactly the English, then <eos>
        assert batch.input_ids[b, L:].eq(tok.pad_id).all()  # padding on the right
    assert batch.n_target_tokens == sum(len(tok.encode(en)) + 1 for _, en in pairs)
    assert batch.prefix_len.tolist() == [e.prefix_len for e in examples]


def test_the_masked_cross_entropy_is_the_mean_over_target_tokens_only(tok):
    batch = collate([make_example(tok, fr, en, 64) for fr, en in FR_EN])
    V = tok.vocab_size
    torch.manual_seed(0)
    logits = torch.randn(*batch.input_ids.shape, V)
    loss = F.cross_entropy(logits.view(-1, V), batch.labels.view(-1), ignore_index=-100)
    logp = logits.log_softmax(-1)
    picked = []
    for b, ex in enumerate(batch.input_ids):
        p = int(batch.prefix_len[b])
        L = int((ex != tok.pad_id).sum())
        picked += [-logp[b, t, ex[t + 1]] for t in range(p - 1, L - 1)]
    assert len(picked) == batch.n_target_tokens
    assert torch.allclose(loss, torch.stack(picked).mean())


# ============================================================================ bucketing


def length_examples(n: int, seed: int = 0, lo: int = 4, hi: int = 60) -> list[Example]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        L = rng.randrange(lo, hi)
        p = rng.randrange(2, L - 1)
        ids = (
            [1]
            + [rng.randrange(5, 100) for _ in range(p - 2)]
            + [2]
            + [rng.randrange(5, 100) for _ in range(L - p - 1)]
            + [3]
        )
        out.append(Example(ids, p))
    return out


def all_batches(batcher) -> list[list[list[int]]]:
    return [b.input_ids.tolist() for b in batcher]


def test_batches_respect_the_token_budget_and_cover_every_example_once():
    examples = length_examples(500)
    batcher = BucketBatcher(examples, max_tokens=300, seed=0)
    seen = []
    for batch in batcher:
        B, T = batch.input_ids.shape
        assert B * T <= 300
        for row in batch.input_ids.tolist():
            seen.append(tuple(x for x in row if x != 0))
    assert sorted(seen) == sorted(tuple(e.input_ids) for e in examples)


def test_bucketing_pads_less_than_random_batching():
    examples = length_examples(800, seed=1)
    bucketed = BucketBatcher(examples, max_tokens=512, seed=0)
    random_ = BucketBatcher(examples, max_tokens=512, seed=0, bucket=False)
    assert bucketed.padding_fraction < 0.5 * random_.padding_fraction
    # measured on the batches themselves, not only on the batcher's own accounting
    real = sum(len(e.input_ids) for e in examples)
    padded = sum(b.input_ids.numel() for b in bucketed)
    assert 1 - real / padded == pytest.approx(bucketed.stats(epoch=0)["padding_fraction"])


def test_batching_is_deterministic_per_seed_and_epoch():
    examples = length_examples(300, seed=2)
    a, b, c = (BucketBatcher(examples, 256, seed=s) for s in (5, 5, 6))
    ea, eb, ec = all_batches(a), all_batches(b), all_batches(c)
    assert ea == eb and ea != ec
    a.set_epoch(0)
    assert all_batches(a) == ea
    next_epoch = all_batches(a)  # finishing an epoch moves on to the next one
    assert next_epoch != ea and a.epoch == 2
    b.set_epoch(1)
    assert all_batches(b) == next_epoch
    fixed = BucketBatcher(examples, 256, shuffle=False)
    assert all_batches(fixed) == all_batches(fixed)


def test_state_dict_resumes_mid_epoch_with_exactly_the_remaining_batches():
    examples = length_examples(300, seed=3)
    reference = BucketBatcher(examples, 256, seed=7)
    reference.set_epoch(2)
    expected = all_batches(reference) + all_batches(reference)  # epochs 2 and 3

    run = BucketBatcher(examples, 256, seed=7)
    run.set_epoch(2)
    it = iter(run)
    got = [next(it).input_ids.tolist() for _ in range(5)]
    state = run.state_dict()
    assert state["epoch"] == 2 and state["position"] == 5

    resumed = BucketBatcher(examples, 256, seed=7)  # a fresh process after a crash
    resumed.load_state_dict(state)
    got += all_batches(resumed) + all_batches(resumed)
    assert got == expected


def test_loading_a_state_from_other_data_or_settings_is_refused():
    examples = length_examples(100)
    state = BucketBatcher(examples, 256, seed=1).state_dict()
    with pytest.raises(DataError, match="seed"):
        BucketBatcher(examples, 256, seed=2).load_state_dict(state)
    with pytest.raises(DataError, match="n_examples"):
        BucketBatcher(examples[:-1], 256, seed=1).load_state_dict(state)
    other = length_examples(100, seed=9)
    with pytest.raises(DataError, match="fingerprint"):
        BucketBatcher(other, 256, seed=1).load_state_dict(state)


def test_batcher_bad_inputs():
    with pytest.raises(DataError, match="no examples"):
        BucketBatcher([], 100)
    with pytest.raises(DataError, match="longest example"):
        BucketBatcher(length_examples(10, lo=50, hi=60), max_tokens=40)
    capped = BucketBatcher(length_examples(200, lo=4, hi=6), max_tokens=4096, max_batch_size=16)
    assert max(b.input_ids.shape[0] for b in capped) == 16


def test_batch_to_device_keeps_everything():
    batch = collate(length_examples(4))
    moved = batch.to("cpu")
    assert torch.equal(moved.labels, batch.labels) and moved.n_target_tokens == batch.n_target_tokens
    assert moved.shape == batch.shape


@pytest.fixture(scope="module")
def built_in_examples():
    pairs = builtin_corpus(600, seed=5, difficulty=2)
    tok = Tokenizer.train(pairs, vocab_size=500)
    return encode_pairs(tok, pairs, 48)[0]


def test_static_batches_have_few_shapes_and_keep_every_example_once(built_in_examples):
    # padding to the wrong length, losing the last partial batch of a length, or rows with targets, fails here
    ex = built_in_examples
    static = StaticBucketBatcher(ex, 512, step=16, max_len=48, seed=1)
    shapes = static.shapes()
    assert [T for _, T in shapes] == sorted({T for _, T in shapes}) and all(T % 16 == 0 for _, T in shapes)
    assert all(rows == 512 // T for rows, T in shapes)
    batches = list(static)
    assert {tuple(b.input_ids.shape) for b in batches} <= set(shapes)
    assert sum(b.n_target_tokens for b in batches) == sum(len(e.input_ids) - e.prefix_len for e in ex)
    seen = sorted(tuple(row[row != 0].tolist()) for b in batches for row in b.input_ids if (row != 0).any())
    assert seen == sorted(tuple(e.input_ids) for e in ex)  # each example once per epoch
    for b in batches:
        empty = (b.input_ids == 0).all(1)
        assert (b.labels[empty] == -100).all()  # filler rows carry nothing to learn
    plain = BucketBatcher(ex, 512, seed=1)
    assert len({tuple(b.input_ids.shape) for b in plain}) > 3 * len(shapes)  # why the static batcher exists
    assert 0 < static.stats()["padding_fraction"] < 0.5


def test_static_batches_resume_mid_epoch(built_in_examples):
    ex = built_in_examples
    a = StaticBucketBatcher(ex, 512, step=16, max_len=48, seed=2)
    it = iter(a)
    next(it), next(it)
    state = a.state_dict()
    rest = [b.input_ids.tolist() for b in it]
    b = StaticBucketBatcher(ex, 512, step=16, max_len=48, seed=2)
    b.load_state_dict(state)
    assert [x.input_ids.tolist() for x in b] == rest


def test_static_batches_refuse_a_step_that_is_not_a_positive_number_of_tokens():
    with pytest.raises(DataError, match="step must be a positive number of tokens"):
        StaticBucketBatcher(length_examples(10), 512, step=0)
