"""helpers.text.sources and helpers.text.data: loaders (every source through local files), cleaning, leak-free
splits, the batches of a run (``batches_for``) and the whole pipeline in one call. No network: downloads go through file:// URLs or a fake fetch,
Hugging Face data through a parquet file written here. Every sentence below is invented for these tests.
"""

from __future__ import annotations

import random
import urllib.error
import warnings
import zipfile
from pathlib import Path

import pytest

from helpers.text import corpus
from helpers.text import data as D
from helpers.text import sources as S
from helpers.text.batches import BucketBatcher, StaticBucketBatcher
from helpers.text.encoding import encode_pairs
from helpers.text.tokenizer import tokenizer_for
from helpers.training import checkpoint as ckpt
from helpers.training import config as C

FR_EN = [
    ("J'ai froid.", "I'm cold."),
    ("Il fait très beau aujourd'hui.", "The weather is very nice today."),
    ("Où est la gare ?", "Where is the station?"),
    ("Nous mangeons des pêches à midi.", "We eat peaches at noon."),
    ("Elle a vingt-trois ans.", "She is twenty-three."),
    ("Ce café coûte 2,50 €.", "This coffee costs 2.50 euros."),
]


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def tatoeba_lines(pairs, attribution=True) -> str:
    tail = "\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (someone) & #2 (someone else)" if attribution else ""
    return "".join(f"{en}\t{fr}{tail}\n" for fr, en in pairs)


# ============================================================================ Tatoeba


def test_tatoeba_file_is_english_first_and_we_return_french_first(tmp_path):
    f = write(
        tmp_path / "fra.txt",
        "I'm cold.\tJ'ai froid.\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 & #2\n"
        "Where is the station?\tOù est la gare ?\n",
    )  # old 2-column releases too
    pairs, report = S.load_pairs("tatoeba", f)
    assert pairs == [("J'ai froid.", "I'm cold."), ("Où est la gare ?", "Where is the station?")]
    assert report.kept == 2 and report.lines_read == 2 and report.n_skipped == 0
    assert "not a release this course knows" in report.pretty()  # our tiny file is no known release


def test_tatoeba_bad_lines_are_skipped_and_counted_with_reasons(tmp_path):
    good = tatoeba_lines(FR_EN[:3]).encode()
    bad = (
        b"No tab on this line at all.\n"
        b"\tIl manque l'anglais.\n"
        b"French is missing.\t\n"
        b"Too\tmany\tcolumns\there\n"
        b"\n"
        b"Bad bytes \xff\xfe here.\tDes octets invalides \xc3\x28.\n"
    )
    f = write(tmp_path / "fra.txt", good[:40] + good[40:] + bad)
    pairs, report = S.load_tatoeba(f)
    assert pairs == FR_EN[:3]
    assert report.lines_read == 9 and report.kept == 3
    assert report.skipped == {
        "missing tab (fewer than 2 columns)": 1,
        "empty English side": 1,
        "empty French side": 1,
        "stray columns (more than 3)": 1,
        "blank line": 1,
        "invalid UTF-8": 1,
    }
    assert sum(report.skipped.values()) + report.kept == report.lines_read  # nothing unaccounted for
    text = report.pretty()
    for reason in report.skipped:
        assert reason in text


def test_crlf_and_byte_order_mark_do_not_leak_into_sentences(tmp_path):
    f = write(
        tmp_path / "fra.txt",
        b"\xef\xbb\xbf" + tatoeba_lines(FR_EN[:2], attribution=False).replace("\n", "\r\n").encode(),
    )
    pairs, _ = S.load_tatoeba(f)
    assert pairs == FR_EN[:2]


def test_a_file_without_any_valid_pair_raises_saying_what_to_do(tmp_path):
    f = write(tmp_path / "fra.txt", "just one column\nand another\n")
    with pytest.raises(D.DataError, match="No valid") as err:
        S.load_tatoeba(f)
    assert "English<TAB>French" in str(err.value) and "missing tab" in str(err.value)
    empty = write(tmp_path / "empty.tsv", "")
    with pytest.raises(D.DataError, match="No valid"):
        S.load_tsv(empty)


def test_missing_file_and_unknown_source_raise_helpful_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist") as err:
        S.load_pairs("tatoeba", tmp_path / "nope.txt")
    assert "builtin" in str(err.value)
    with pytest.raises(D.DataError, match="not a file"):
        S.load_tsv(tmp_path)
    with pytest.raises(D.DataError, match="Unknown source 'tatoba'") as err:
        S.load_pairs("tatoba")
    assert all(s in str(err.value) for s in S.SOURCES)
    with pytest.raises(D.DataError, match="path="):
        S.load_pairs("tsv")
    with pytest.raises(D.DataError, match="path=\\(french_file, english_file\\)"):
        S.load_pairs("parallel", tmp_path / "one_file.txt")


# ============================================================================ download and cache


def make_zip(tmp_path: Path, content: str, inner: str = "fra-eng/fra.txt") -> Path:
    z = tmp_path / "fra-eng.zip"
    with zipfile.ZipFile(z, "w") as archive:
        archive.writestr(inner, content)
        archive.writestr("fra-eng/_about.txt", "about")
    return z


@pytest.fixture
def no_local_copy(monkeypatch):
    monkeypatch.setattr(S, "find_local_tatoeba", lambda: None)


def test_download_via_file_url_is_cached_and_checksummed(tmp_path, no_local_copy):
    content = tatoeba_lines(FR_EN)
    url = make_zip(tmp_path, content).as_uri()
    cache = tmp_path / "cache"
    with pytest.warns(S.ChecksumWarning, match="not a Tatoeba release this course knows"):
        pairs, report = S.load_tatoeba(cache_dir=cache, urls=url)
    assert pairs == FR_EN
    assert (cache / "tatoeba-fra-eng" / "fra.txt").read_text() == content
    assert (cache / "tatoeba-fra-eng" / "_about.txt").is_file()
    assert not list((cache / "tatoeba-fra-eng").glob("*.part"))


def test_a_known_checksum_passes_silently_and_the_cache_is_not_downloaded_again(tmp_path, no_local_copy, monkeypatch):
    content = tatoeba_lines(FR_EN)
    zip_path = make_zip(tmp_path, content)
    import hashlib

    monkeypatch.setitem(S.KNOWN_TATOEBA, hashlib.sha256(content.encode()).hexdigest(), "test release")
    calls = []

    def fake_fetch(url, dest, timeout=60.0):
        calls.append(url)
        dest.write_bytes(zip_path.read_bytes())

    monkeypatch.setattr(S, "fetch", fake_fetch)
    cache = tmp_path / "cache"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ChecksumWarning for a known release
        pairs, report = S.load_pairs("tatoeba", cache_dir=cache)
        again, _ = S.load_pairs("tatoeba", cache_dir=cache)
    assert pairs == again == FR_EN
    assert calls == [S.TATOEBA_URLS[0]]  # fetched once; the second load used the cache
    assert "test release" in report.pretty()


def test_the_first_mirror_failing_falls_back_to_the_next(tmp_path, no_local_copy, monkeypatch):
    zip_path = make_zip(tmp_path, tatoeba_lines(FR_EN))

    def fetch(url, dest, timeout=60.0):
        if "first" in url:
            raise urllib.error.URLError("no route to host")
        dest.write_bytes(zip_path.read_bytes())

    monkeypatch.setattr(S, "fetch", fetch)
    with pytest.warns(S.ChecksumWarning):
        pairs, _ = S.load_tatoeba(
            cache_dir=tmp_path / "c", urls=["http://first.invalid/x.zip", "http://second.invalid/x.zip"]
        )
    assert pairs == FR_EN


def test_a_failed_download_names_the_url_the_cache_and_the_alternatives(tmp_path, no_local_copy):
    url = (tmp_path / "missing" / "fra-eng.zip").as_uri()  # unreachable without any network
    cache = tmp_path / "cache"
    with pytest.raises(S.DownloadError) as err:
        S.load_pairs("tatoeba", cache_dir=cache, urls=url)
    msg = str(err.value)
    assert url in msg
    assert str(cache / "tatoeba-fra-eng" / "fra.txt") in msg
    assert "path=" in msg and "load_pairs('builtin')" in msg
    assert not (cache / "tatoeba-fra-eng" / "fra.txt").exists()  # no half-written cache


def test_a_zip_without_fra_txt_or_a_broken_zip_is_a_download_error(tmp_path, no_local_copy):
    wrong = make_zip(tmp_path, "x\ty\n", inner="deu.txt")
    with pytest.raises(S.DownloadError, match="no fra.txt inside"):
        S.fetch_tatoeba(tmp_path / "c1", urls=wrong.as_uri())
    broken = write(tmp_path / "broken.zip", b"this is not a zip")
    with pytest.raises(S.DownloadError, match="not a zip file|BadZip|File is not"):
        S.fetch_tatoeba(tmp_path / "c2", urls=broken.as_uri())


def test_no_download_and_no_copy_says_where_it_looked(tmp_path, no_local_copy):
    with pytest.raises(FileNotFoundError, match="download=False") as err:
        S.load_tatoeba(cache_dir=tmp_path, download=False)
    assert "builtin" in str(err.value)


def test_the_local_copy_next_to_the_repo_is_found_by_path_when_present():
    found = S.find_local_tatoeba()
    if found is None:
        pytest.skip("no shared Tatoeba copy on this machine")
    assert found.name == "fra.txt" and found.is_file()


# ============================================================================ TSV and parallel files


def test_tsv_columns_are_explicit_and_extra_columns_ignored_and_counted(tmp_path):
    f = write(tmp_path / "pairs.tsv", "".join(f"{fr}\t{en}\tsource-{i}\n" for i, (fr, en) in enumerate(FR_EN)))
    pairs, report = S.load_tsv(f)
    assert pairs == FR_EN
    assert any("extra columns were ignored" in n and "6 lines" in n for n in report.notes)
    g = write(tmp_path / "en_first.tsv", "".join(f"id{i}\t{en}\t{fr}\n" for i, (fr, en) in enumerate(FR_EN)))
    pairs, _ = S.load_pairs("tsv", g, columns=("id", "en", "fr"))
    assert pairs == FR_EN
    with pytest.raises(D.DataError, match="exactly one 'fr' and one 'en'"):
        S.load_tsv(g, columns=("fr", "fr"))
    with pytest.raises(
        D.DataError, match=r"names 4 columns, but no line of en_first.tsv has that many \(6 lines with 3"
    ):
        S.load_tsv(g, columns=("id", "en", "fr", "licence"))  # one name too many: refused, not read silently
    mixed = write(
        tmp_path / "mixed.tsv", "".join(f"{en}\t{fr}" + ("\tx" * (i % 2)) + "\n" for i, (fr, en) in enumerate(FR_EN))
    )
    pairs, report = S.load_tsv(mixed, columns=("en", "fr", "note"))  # some lines without the last column: noted
    assert pairs == FR_EN and any("3 lines had fewer than the 3 columns named" in n for n in report.notes), report.notes


def test_swapped_columns_are_detected_and_warned_about(tmp_path):
    swapped = write(tmp_path / "swapped.tsv", "".join(f"{en}\t{fr}\n" for fr, en in FR_EN))
    with pytest.warns(S.ColumnOrderWarning, match="look swapped"):
        pairs, report = S.load_tsv(swapped)  # default says French first: wrong for this file
    assert any("WARNING" in n for n in report.notes)
    right = write(tmp_path / "right.tsv", "".join(f"{fr}\t{en}\n" for fr, en in FR_EN))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        S.load_tsv(right)


def test_parallel_files_pair_line_by_line(tmp_path):
    fr = write(tmp_path / "a.fr", "".join(f + "\n" for f, _ in FR_EN) + "\n" + "Seulement en français.\n")
    en = write(tmp_path / "a.en", "".join(e + "\n" for _, e in FR_EN) + "\n" + "\n")
    pairs, report = S.load_pairs("parallel", (fr, en))
    assert pairs == FR_EN
    assert report.skipped == {"blank line": 1, "empty English side": 1}
    bad_en = write(tmp_path / "b.en", b"Fine.\n\xff\xfe\n")
    bad_fr = write(tmp_path / "b.fr", "Bien.\nAussi bien.\n")
    pairs, report = S.load_parallel(bad_fr, bad_en)
    assert pairs == [("Bien.", "Fine.")] and report.skipped == {"invalid UTF-8": 1}


def test_parallel_files_of_different_lengths_raise_with_both_counts(tmp_path):
    fr = write(tmp_path / "a.fr", "Un.\nDeux.\nTrois.\n")
    en = write(tmp_path / "a.en", "One.\nTwo.\n")
    with pytest.raises(D.DataError, match="not aligned") as err:
        S.load_parallel(fr, en)
    assert "3 lines" in str(err.value) and "2" in str(err.value)


def test_limit_takes_a_seeded_sample_in_file_order(tmp_path):
    many = [(f"Phrase numéro {i} en français.", f"Sentence number {i} in English.") for i in range(200)]
    f = write(tmp_path / "many.tsv", "".join(f"{fr}\t{en}\n" for fr, en in many))
    a, rep = S.load_pairs("tsv", f, limit=20, seed=1)
    b, _ = S.load_pairs("tsv", f, limit=20, seed=1)
    c, _ = S.load_pairs("tsv", f, limit=20, seed=2)
    assert a == b and a != c and len(a) == 20 and rep.kept == 20
    assert a != many[:20]  # a sample, not the head (Tatoeba is sorted by length)
    assert [many.index(p) for p in a] == sorted(many.index(p) for p in a)
    assert any("random sample of 20 of 200" in n for n in rep.notes)


# ============================================================================ cleaning


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
