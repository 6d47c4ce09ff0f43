"""helpers.text.sources: every loader through local files (Tatoeba's file and release, TSV columns, parallel files,
the seeded sample), what each skipped and why, and downloads through file:// URLs or a fake fetch (no network).
Every sentence below is invented for these tests.
"""

from __future__ import annotations

import urllib.error
import warnings
import zipfile
from pathlib import Path

import pytest

from helpers.text import data as D
from helpers.text import sources as S

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
