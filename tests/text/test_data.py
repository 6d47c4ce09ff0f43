"""helpers.text.data: cleaning, leak-free splits, the batches of a run (``batches_for``) and the data stage in one
call (``prepare_data``). Every sentence below is invented for these tests.
"""

from __future__ import annotations

import random
import warnings

import pytest

from helpers.text import corpus
from helpers.text import data as D
from helpers.text import sources as S
from helpers.text.batches import BucketBatcher, StaticBucketBatcher
from helpers.text.encoding import encode_pairs
from helpers.text.tokenizer import tokenizer_for
from helpers.training import checkpoint as ckpt
from helpers.training import config as C


def test_clean_pairs_counts_every_step():
    pairs = [
        ("Bonjour !", "Hello!"),
        ("Bonjour\u202f!", "Hello!"),  # becomes a duplicate of the first once normalised
        ("\u200b", "Nothing."),  # empty after normalising
        ("Un deux trois quatre cinq six sept.", "One."),  # ratio 7
        (" ".join(["mot"] * 12), " ".join(["word"] * 12)),  # too long for max_tokens=10
        ("Oui.", "Yes."),
    ]
    out, report = D.clean_pairs(pairs, max_tokens=10, max_ratio=3)
    assert out == [("Bonjour !", "Hello!"), ("Oui.", "Yes.")]
    assert report.n_in == 6 and report.n_out == 2 and report.normalised == 2
    assert report.removed == {
        "empty after normalising": 1,
        "shorter than 1 words": 0,
        "longer than 10 words": 1,
        "length ratio above 3": 1,
        "exact duplicate": 1,
    }
    assert report.n_in - sum(report.removed.values()) == report.n_out
    out, report = D.clean_pairs([("Oui.", "Yes."), ("Non merci.", "No.")], min_tokens=2)
    assert out == [] and report.removed["shorter than 2 words"] == 2


# ============================================================================ splits


def random_corpus(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """Tatoeba-like pairs: French sources with several translations, English sentences shared by several
    French ones, some pairs linking two existing groups, and repeated pairs."""
    pairs: list[tuple[str, str]] = []
    while len(pairs) < n:
        r = rng.random()
        fr = rng.choice(pairs)[0] if pairs and (r < 0.3 or r > 0.9) else f"fr{len(pairs)}"
        en = rng.choice(pairs)[1] if pairs and (0.3 <= r < 0.6 or r > 0.9) else f"en{len(pairs)}"
        pairs.append((fr, en))
    return pairs


def r_target(splits, name):
    return splits.report.targets[name]


def leaks(train, valid, test, new=()) -> dict[str, int]:
    fr = [{f for f, _ in s} for s in (train, valid, test, new)]
    en_train = {e for _, e in train}
    return {
        "french": len(set().union(*(fr[a] & fr[b] for a in range(4) for b in range(a + 1, 4)))),
        "test_english": len({e for _, e in test} & en_train),
        "valid_english": len({e for _, e in valid} & en_train),
        "new_english": len({e for _, e in new} & en_train),
    }


@pytest.mark.parametrize("seed", range(8))
def test_splits_never_leak_a_sentence_across_splits(seed):
    rng = random.Random(seed)
    pairs = random_corpus(rng, rng.randrange(30, 400))
    splits = D.split_pairs(pairs, valid=0.1, test=0.1, seed=seed)
    train, valid, test = splits
    new = splits.new
    assert leaks(train, valid, test, new) == {"french": 0, "test_english": 0, "valid_english": 0, "new_english": 0}
    assert sorted(train + valid + test + new) == sorted(pairs)  # nothing lost, nothing doubled (duplicates kept)
    assert 0 < len(test) <= r_target(splits, "test") and 0 < len(valid) <= r_target(splits, "valid")
    assert len(train) > len(pairs) // 2
    r = splits.report
    assert (r.french_in_two_splits, r.test_english_in_train, r.valid_english_in_train, r.new_in_train) == (0, 0, 0, 0)
    assert r.sizes == {"train": len(train), "valid": len(valid), "test": len(test), "new": len(new)}


def test_the_leak_check_catches_a_naive_split():
    """The property above can fail: splitting pairs at random (not by group) leaks on the same corpora."""
    rng = random.Random(0)
    pairs = random_corpus(rng, 300)
    shuffled = pairs[:]
    rng.shuffle(shuffled)
    naive = leaks(shuffled[66:], shuffled[36:66], shuffled[6:36], shuffled[:6])
    assert naive["french"] > 0 and naive["test_english"] > 0 and naive["new_english"] > 0


def test_splits_are_deterministic_and_roughly_the_asked_sizes():
    pairs = corpus.builtin_corpus(n=2000, seed=0, difficulty=1)
    a, b, c = (D.split_pairs(pairs, seed=s) for s in (0, 0, 1))
    assert (a.train, a.valid, a.test) == (b.train, b.valid, b.test)
    assert a.test != c.test
    assert abs(len(a.test) - 100) <= 5 and abs(len(a.valid) - 100) <= 5
    with pytest.raises(D.DataError, match="fractions"):
        D.split_pairs(pairs, valid=0.6, test=0.5)


def test_english_shared_by_two_french_sentences_stays_in_one_split():
    pairs = [("Va !", "Go."), ("Bouge !", "Go."), ("Allez !", "Go.")] + [
        (f"Phrase {i}.", f"Sentence {i}.") for i in range(40)
    ]
    for seed in range(10):
        train, valid, test = D.split_pairs(pairs, valid=0.1, test=0.1, seed=seed)
        homes = [name for name, s in (("train", train), ("valid", valid), ("test", test)) if ("Va !", "Go.") in s]
        where = {name for name, s in (("train", train), ("valid", valid), ("test", test)) for _, e in s if e == "Go."}
        assert where == set(homes)
    assert D.split_pairs(pairs, seed=0).report.pairs_kept_together == 3


# ============================================================================ the batches of a run


@pytest.fixture(scope="module")
def stage():
    split = D.load_clean_split("builtin", limit=1500, seed=0)
    tokenizer = tokenizer_for(split.splits.train, C.preset_config("tiny"), None, seed=0)
    return tokenizer, split.splits


def batch_ids(batches) -> list[list[list[int]]]:
    return [b.input_ids.tolist() for b in batches]


def test_batches_for_pads_to_static_shapes_only_when_asked(stage):
    tokenizer, splits = stage
    plain = dict(max_len=48, max_tokens=600, valid_sentences=40, seed=3)
    bucketed, valid, encoded = D.batches_for(tokenizer, splits, **plain)
    static, valid_static, _ = D.batches_for(tokenizer, splits, **plain, static_step=16)
    assert type(bucketed) is BucketBatcher and isinstance(static, StaticBucketBatcher) and static.step == 16
    assert {T for _, T in static.shapes()} <= {16, 32, 48}  # lengths padded to multiples of 16, at most max_len
    # the same examples and the same validation batches either way: only the training batches' padding differs
    assert [e.input_ids for e in static.examples] == [e.input_ids for e in bucketed.examples]
    assert batch_ids(valid_static) == batch_ids(valid) and sum(len(b.input_ids) for b in valid) <= 40
    first = batch_ids(bucketed)  # epoch 0 (iterating to the end moves the batcher on to epoch 1)
    assert max(len(b) * len(b[0]) for b in first) <= 600 and static.seed == bucketed.seed == 3
    assert encoded["encode_train"].max_len == 48 and encoded["encode_train"].kept == len(bucketed.examples)
    # the same arguments give the same batches in the same order; another seed, another order
    again, _, _ = D.batches_for(tokenizer, splits, **plain)
    other, _, _ = D.batches_for(tokenizer, splits, **{**plain, "seed": 4})
    assert batch_ids(again) == first != batch_ids(other)


def test_batches_for_takes_the_first_parallel_pairs_of_the_seeded_order(stage):
    tokenizer, splits = stage
    some, _, encoded = D.batches_for(
        tokenizer, splits, max_len=64, max_tokens=2000, valid_sentences=10, parallel_pairs=200, seed=0
    )
    assert encoded["encode_train"].n_pairs == 200
    wanted = D.parallel_subset(splits.train, 200, seed=0)
    assert sorted(e.input_ids for e in some.examples) == sorted(
        e.input_ids for e in encode_pairs(tokenizer, wanted, 64)[0]
    )
    with pytest.raises(D.DataError, match="parallel_pairs="):
        D.batches_for(tokenizer, splits, max_len=64, max_tokens=2000, valid_sentences=10, parallel_pairs=10**6)


# ============================================================================ the whole pipeline


def test_prepare_data_trains_the_tokenizer_on_the_training_split_only_and_reuses_it(tmp_path):
    cfg = C.preset_config("tiny", steps=1)
    prepared = D.prepare_data("builtin", cfg, tmp_path, limit=3000, seed=0, progress=False)
    s = prepared.splits
    assert prepared.tokenizer.meta["trained_on_sentences"] == 2 * len(s.train)
    assert (tmp_path / "tokenizer" / "spm.model").is_file()
    assert len(prepared.train_batcher.examples) == prepared.reports["encode_train"].kept
    assert prepared.test_pairs == s.test and prepared.info["pairs"]["test"] == len(s.test)
    summary = prepared.summary()
    assert summary["pairs_kept"] == 3000 and summary["split"] == {
        **{k: len(v) for k, v in zip(("train", "valid", "test"), s)},
        "new": len(s.new),
    }
    assert len(s.new) > 0 and prepared.words is not None and (tmp_path / "train_words.tsv").is_file()
    assert set(summary["test_sets"]) == {"new", "test"} and "new-sentence test set" in prepared.describe()
    assert "pairs longer than the model's 48 tokens (left out)" in prepared.describe()
    # a second call reads the saved tokenizer instead of training another one
    again = D.prepare_data("builtin", cfg, tmp_path, limit=3000, seed=0, progress=False)
    assert again.tokenizer.model_proto == prepared.tokenizer.model_proto
    with pytest.raises(ckpt.ConfigMismatchError, match="vocab_size=400"):
        D.prepare_data("builtin", C.preset_config("tiny", vocab_size=500), tmp_path, limit=3000, progress=False)


@pytest.mark.slow
def test_the_real_tatoeba_release_loads_cleans_and_splits_as_documented():
    """On the shared 2019-04-07 copy (skipped where there is none): the counts data/README.md quotes."""
    path = S.find_local_tatoeba()
    if path is None:
        pytest.skip("no local Tatoeba copy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a known release, the right column order: no warning at all
        pairs, report = S.load_pairs("tatoeba", path)
    assert report.kept == report.lines_read == 167_130 and "2019-04-07" in report.pretty()
    pairs, cleaned = D.clean_pairs(pairs)
    assert cleaned.n_out == 166_837
    splits = D.split_pairs(pairs)
    assert splits.report.sizes == {"train": 146_816, "valid": 8_342, "test": 8_342, "new": 3_337}
    assert leaks(*splits, splits.new) == {"french": 0, "test_english": 0, "valid_english": 0, "new_english": 0}
