"""The new-sentence test set, the training word table and its baseline, public test sets read offline."""

from __future__ import annotations

import random
import statistics
import string
from pathlib import Path

import pytest

from helpers.text import data as D
from helpers.text import testsets
from helpers.text import testsets as TS
from helpers.text.sources import DownloadError
from helpers.text.testsets import LONG_WORDS, NewSentenceDesign, WordTable

SHARED_TATOEBA = Path(__file__).resolve().parents[3] / "shared" / "data" / "tatoeba-fra-eng" / "fra.txt"


def _invented_word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(9))


def invented_pairs(n: int = 20_000, seed: int = 0) -> list[tuple[str, str]]:
    """Pairs shaped like Tatoeba's: common words, 2 % long sentences, paraphrase families sharing one English
    sentence, and rare words that occur in exactly two unrelated pairs (the case a careless hold-out leaks)."""
    rng = random.Random(seed)
    common = [_invented_word(rng) for _ in range(300)]
    rare = [_invented_word(rng) for _ in range(n // 10)]
    rare_slots = [w for w in rare for _ in range(2)]  # each rare word goes into two pairs
    rng.shuffle(rare_slots)
    pairs = []
    for i in range(n):
        length = rng.randint(17, 30) if rng.random() < 0.02 else rng.randint(2, 9)
        fr = [rng.choice(common[: rng.choice([30, 300])]) for _ in range(length)]
        if rare_slots and rng.random() < 0.2:
            fr[rng.randrange(length)] = rare_slots.pop()
        english = f"english {i}"
        if i % 50 == 0:  # a family of 6 French paraphrases of one English sentence
            pairs += [(" ".join(fr + [common[k]]) + " .", english) for k in range(6)]
        pairs.append((" ".join(fr) + " .", english + " alone"))
    return pairs


@pytest.fixture(scope="module")
def split():
    pairs = invented_pairs()
    return pairs, D.split_pairs(pairs, seed=0)


def new_set_misses(pairs, splits, design: NewSentenceDesign) -> list[str]:
    """What the new-sentence set gets wrong against its design ([] when nothing)."""
    misses = []
    held = splits.new
    train_fr, train_en = {fr for fr, _ in splits.train}, {en for _, en in splits.train}
    other = {fr for fr, _ in splits.valid + splits.test}
    if any(fr in train_fr or en in train_en or fr in other for fr, en in held):
        misses.append("a new-sentence pair shares a side with another split")
    target = round(design.share * len(pairs))
    if not target <= len(held) <= target + design.max_group:
        misses.append(f"{len(held)} pairs held out, asked for {target}")
    words = WordTable.from_pairs(splits.train)
    unseen = sum(bool(words.unseen(fr)) for fr, _ in held) / len(held)
    if unseen < design.unseen_share:
        misses.append(
            f"only {unseen:.1%} of the set has a word unseen in training (designed: {design.unseen_share:.0%})"
        )
    long = sum(len(fr.split()) > LONG_WORDS for fr, _ in held) / len(held)
    if long < design.long_share:
        misses.append(f"only {long:.1%} of the set is longer than {LONG_WORDS} words")
    family_held = {en for fr, en in held if en.endswith(("0", "50")) and not en.endswith("alone")}
    if family_held:
        misses.append(f"paraphrase families (6 pairs > max_group) were held out: {sorted(family_held)[:3]}")
    return misses


def test_the_new_sentence_set_is_as_designed_and_shares_nothing_with_training(split):
    pairs, splits = split
    assert new_set_misses(pairs, splits, NewSentenceDesign()) == []
    report = splits.report
    assert report.new_in_train == 0 and report.french_in_two_splits == 0
    assert report.new.pairs == len(splits.new) == report.sizes["new"]
    assert report.sizes["train"] + report.sizes["valid"] + report.sizes["test"] + report.sizes["new"] == len(pairs)
    assert "new sentences" in splits.report.pretty()


def test_the_new_sentence_check_fails_when_a_rare_word_is_held_out_in_one_pair_only(split, monkeypatch):
    """The plausible bug: hold out the group holding the rare word, but not the other group with the same word.
    The word is then in training and the set has no unseen words left to measure."""
    pairs, _ = split
    monkeypatch.setattr(TS, "_groups_holding", lambda word, group, groups_of: [group])
    misses = new_set_misses(pairs, D.split_pairs(pairs, seed=0), NewSentenceDesign())
    assert any("unseen in training" in m for m in misses), misses


def test_the_new_sentence_set_follows_the_seed_and_can_be_switched_off():
    pairs = invented_pairs(4000, seed=1)
    a, b, c = (D.split_pairs(pairs, seed=s) for s in (0, 0, 1))
    assert a.new == b.new and a.new != c.new
    off = D.split_pairs(pairs, new=None, seed=0)
    assert off.new == [] and off.report.new is None
    assert len(off.train) == len(pairs) - len(off.valid) - len(off.test)


@pytest.mark.training
@pytest.mark.skipif(not SHARED_TATOEBA.is_file(), reason="needs ../shared/data/tatoeba-fra-eng/fra.txt")
def test_on_tatoeba_the_new_sentence_set_looks_like_newer_sentences():
    """Newer Tatoeba sentences (issue 10): median 7 words, 7 % above 15 words, a quarter with a word the file lacks.
    The random test split is the contrast: shorter, and almost every word seen."""
    from helpers.text.sources import load_path

    pairs, _ = load_path(SHARED_TATOEBA)
    pairs, _ = D.clean_pairs(pairs)
    splits = D.split_pairs(pairs, seed=0)
    words = WordTable.from_pairs(splits.train)
    new = TS.describe_test_set(splits.new, words)
    test = TS.describe_test_set(splits.test, words)
    assert splits.report.new_in_train == 0 and 3000 <= new["pairs"] <= 3400
    assert 0.25 <= new["share_unseen_word"] <= 0.35 and test["share_unseen_word"] < 0.1
    assert 0.07 <= new["share_long"] <= 0.10 and test["share_long"] < 0.02
    assert new["median_words"] >= 6 and statistics.median(len(fr.split()) for fr, _ in splits.train) <= 6


# ----------------------------------------------------------------------------------------------
# the word table: training vocabulary and the word-by-word baseline

PAIRS = [
    ("le chat dort", "the cat sleeps"),
    ("le chat mange", "the cat eats"),
    ("le chat joue", "the kitty plays"),  # "chat" appears with "the" 3 times, with "cat" only twice
    ("le chien dort", "the dog sleeps"),
    ("le chien mange", "the dog eats"),
    ("le pain", "the bread"),
    ("le vin", "the wine"),
    ("le lait", "the milk"),
    ("il dort", "he sleeps"),
    ("il mange", "he eats"),
]


def test_each_french_word_goes_with_its_translation_not_with_the_commonest_english_word():
    words = WordTable.from_pairs(PAIRS)
    assert words.english["chat"] == "cat" and words.english["chien"] == "dog" and words.english["dort"] == "sleeps"
    assert words.english["le"] == "the"
    assert words.counts["chat"] == 3 and words.counts["le"] == 8 and len(words) == 10


def test_the_word_table_check_catches_raw_co_occurrence(monkeypatch):
    """The plausible bug: rank English words by how often they co-occur, not by Dice. "chat" becomes "the"."""
    import numpy as np

    real = np.lexsort
    monkeypatch.setattr(np, "lexsort", lambda keys: real((keys[1], keys[0], keys[2])))  # count first, then Dice
    assert WordTable.from_pairs(PAIRS).english["chat"] == "the"


def test_unseen_words_and_the_word_by_word_translation():
    words = WordTable.from_pairs(PAIRS)
    assert words.unseen("Le zèbre dort, 3 fois.") == ["zèbre", "fois"]
    assert words.unseen("LE CHAT") == []  # case does not make a word new
    assert words.word_by_word("Le chat dort.") == "the cat sleeps."
    assert words.word_by_word("Le zèbre mange 3 pains !") == "the zèbre eats 3 pains!"  # unseen: copied


def test_the_word_table_survives_a_round_trip_and_refuses_other_files(tmp_path):
    words = WordTable.from_pairs(PAIRS)
    back = WordTable.load(words.save(tmp_path / "train_words.tsv"))
    assert back.counts == words.counts and back.english == words.english
    (tmp_path / "other.tsv").write_text("chat\tcat\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a word table"):
        WordTable.load(tmp_path / "other.tsv")


def test_describe_test_set_counts_sources_the_model_cannot_read_whole():
    class CharTokenizer:  # one token per character: lengths are easy to work out by hand
        def encode(self, text):
            return list(text)

    pairs = [("abc", "x"), ("abcdefghij", "y"), ("a b c d e f g h i j k l m n o p", "z")]
    seen = WordTable.from_pairs([(pairs[2][0], "q")])
    got = TS.describe_test_set(pairs, seen, CharTokenizer(), max_src=9)
    assert got["sources_too_long"] == 2 and got["share_too_long"] == round(2 / 3, 4)
    assert got["share_long"] == round(1 / 3, 4) and got["median_words"] == 1
    assert got["share_unseen_word"] == round(2 / 3, 4)  # "abc" and "abcdefghij" are unseen words


# ----------------------------------------------------------------------------------------------
# public test sets: the download path, run on a local Parquet file of the same layout


def test_a_public_test_set_is_read_from_parquet_and_its_empty_rows_are_counted(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {"fr": "Le chat dort.", "en": "The cat sleeps."},
        {"fr": "Bonjour.", "en": ""},
        {"fr": "Oui.", "en": "Yes."},
    ]
    path = tmp_path / "test.parquet"
    pq.write_table(pa.table({"translation": rows}), path)
    pairs, report = TS.load_public("wmt14", data_files=path)
    assert pairs == [("Le chat dort.", "The cat sleeps."), ("Oui.", "Yes.")]
    assert report.lines_read == 3 and report.kept == 2
    assert report.skipped == {"empty French or English side": 1} and report.first_line == {
        "empty French or English side": 2
    }
    assert "out of domain" in report.notes[0]


def test_an_unknown_public_test_set_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match="wmt14"):
        TS.load_public("newstest2099")


# ----------------------------------------------------------------------------------- the newer-sentence test set

TRAINING = [("Je mange.", "I eat."), ("Il dort.", "He sleeps."), ("Tu lis.", "You read.")]
CHALLENGE = [
    ("Je mange.", "I am eating."),  # French seen in training: out
    ("Elle mange.", "He sleeps."),  # English seen in training: out
    ("Nous chantons.", "We sing."),  # new on both sides: kept
    ("Nous chantons.", "We sing."),  # the same pair again: kept once
    ("  Vous dansez. ", "You dance."),  # new; spaces stripped
]


# ---------------------------------------------------------------------------------------------- the newer sentences


def test_newer_pairs_keeps_only_pairs_new_on_both_sides_and_counts_the_rest():
    # a filter on the French side only would keep ("Elle mange.", "He sleeps."); one without dedup would keep 3
    kept, counts = testsets.newer_pairs(CHALLENGE, TRAINING)
    assert kept == [("Nous chantons.", "We sing."), ("Vous dansez.", "You dance.")]
    assert counts == {
        "French sentence in the training file": 1,
        "English sentence in the training file": 1,
        "the same pair again": 1,
    }
    assert len(kept) + sum(counts.values()) == len(CHALLENGE)  # nothing leaves without a reason


def _challenge_files(folder):
    (folder / "t.fra").write_text("".join(fr + "\n" for fr, _ in CHALLENGE), encoding="utf-8")
    (folder / "t.eng").write_text("".join(en + "\n" for _, en in CHALLENGE), encoding="utf-8")
    return (folder / "t").as_uri()


def test_fetch_newer_sentences_downloads_once_filters_and_reports(tmp_path):
    # the real download code, through file:// addresses: a second call must read the cache, not the network
    base = _challenge_files(tmp_path)
    pairs, report = testsets.fetch_newer_sentences(TRAINING, tmp_path / "cache", base_url=base)
    assert pairs == [("Nous chantons.", "We sing."), ("Vous dansez.", "You dance.")]
    assert report.kept == 2 and report.lines_read == 5 and sum(report.skipped.values()) == 3
    (tmp_path / "t.fra").unlink()  # gone from the "network": the cached copy must serve
    again, _ = testsets.fetch_newer_sentences(TRAINING, tmp_path / "cache", base_url=base)
    assert again == pairs


def test_fetch_newer_sentences_says_what_to_do_offline(tmp_path):
    with pytest.raises(DownloadError, match="needs the network once.*by path"):
        testsets.fetch_newer_sentences(TRAINING, tmp_path, base_url=(tmp_path / "missing").as_uri())


def test_load_newer_prefers_the_local_development_file(tmp_path, monkeypatch):
    dev = tmp_path / "dev.tsv"
    dev.write_text("Nous chantons.\tWe sing.\nVous dansez.\tYou dance.\n", encoding="utf-8")
    monkeypatch.setenv("TATOEBA_NEWER_DEV", str(dev))
    pairs, report, label = testsets.load_newer_sentences()
    assert pairs == [("Nous chantons.", "We sing."), ("Vous dansez.", "You dance.")] and "development" in label
    # without the file (and no shared copy beside the repository), no training pairs: a message, not a guess
    monkeypatch.setattr(testsets, "find_newer_dev", lambda: None)
    with pytest.raises(testsets.DataError, match="training pairs"):
        testsets.load_newer_sentences()


@pytest.mark.slow
def test_the_shared_development_file_passes_our_filter_against_the_training_file():
    """The download's filter is the one the shared file was built with: every development pair is new to fra.txt
    (run where the shared data is beside the repository; skipped elsewhere)."""
    from helpers.text.sources import find_local_file, find_local_tatoeba, load_path, load_tsv

    # beside the repository only: conftest points $TATOEBA_NEWER_DEV at a stand-in
    dev_path, train_path = find_local_file("NO_SUCH_VARIABLE", testsets.NEWER_DEV_RELATIVE), find_local_tatoeba()
    if dev_path is None or train_path is None:
        pytest.skip("the shared Tatoeba file and development set are not beside the repository")
    dev, _ = load_tsv(dev_path)
    kept, counts = testsets.newer_pairs(dev, load_path(train_path)[0])
    assert len(kept) == len(dev) and counts == {}


# ---------------------------------------------------------------------------------------------- long sources
