"""Where sentence pairs come from: files, the Tatoeba release, the built-in corpus.

Every loader returns ``(pairs, report)``: the (French, English) pairs and a :class:`LoadReport` of what
was read, kept and skipped, with the reason and the first line number of each kind of skipped line::

    pairs, report = load_pairs("tatoeba")            # or "tsv", "parallel", "builtin"
    print(report)

Pairs are always (French, English): we translate French into English.
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
import shutil
import urllib.error
import urllib.request
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime import repo_root
from .corpus import DEFAULT_N, builtin_corpus

SOURCES = ("tatoeba", "tsv", "parallel", "builtin")


class DataError(ValueError):
    """Input the text layer cannot use (a file, pairs, a setting); the message says what was wrong and what to do."""


class DownloadError(RuntimeError):
    """A download failed; the message names the URL, the cache path and the offline alternatives."""


class ChecksumWarning(UserWarning):
    """A data file is not a release we know: results will differ from the ones the course reports."""


class ColumnOrderWarning(UserWarning):
    """The "French" column looks English: the columns are probably swapped."""


@dataclass
class LoadReport:
    """What a loader read, kept and skipped (with the reason for each skipped line)."""

    source: str
    lines_read: int = 0
    kept: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    first_line: dict[str, int] = field(default_factory=dict)  # reason -> line number (from 1) of its first case
    notes: list[str] = field(default_factory=list)
    path: str | None = None

    def skip(self, reason: str, line: int | None = None) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if line is not None:
            self.first_line.setdefault(reason, line)

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "path": self.path,
            "lines_read": self.lines_read,
            "kept": self.kept,
            "skipped": dict(self.skipped),
            "first_line": dict(self.first_line),
            "notes": list(self.notes),
        }

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())

    def pretty(self) -> str:
        lines = [f"Loaded {self.source}" + (f" from {self.path}" if self.path else "")]
        lines.append(f"  lines read : {self.lines_read:>9,}")
        lines.append(f"  pairs kept : {self.kept:>9,}")
        lines.append(f"  skipped    : {self.n_skipped:>9,}")
        for reason, n in sorted(self.skipped.items(), key=lambda kv: -kv[1]):
            where = f" (first at line {self.first_line[reason]:,})" if reason in self.first_line else ""
            lines.append(f"    {n:>9,}  {reason}{where}")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    __str__ = pretty


# ============================================================================ reading files


def _require_file(path: str | os.PathLike, what: str) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(
            f"{what} {p} does not exist. Check the path (relative paths start from {Path.cwd()}), "
            f"or use the built-in corpus: load_pairs('builtin')."
        )
    if not p.is_file():
        raise DataError(f"{what} {p} is not a file (a folder?). Pass the path of the text file itself.")
    return p


def _lines(path: Path) -> Iterator[str | None]:
    """The file's lines without line ends; None for a line that is not valid UTF-8."""
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # a UTF-8 byte-order mark is not part of the first sentence
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()  # the newline that ends the last line does not start a new one
    for raw in parts:
        try:
            yield raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError:
            yield None


def _parse_columns(path: Path, columns: Sequence[str], report: LoadReport, *, strict: bool) -> list[tuple[str, str]]:
    """Split tab-separated lines; ``columns`` names them in order ("fr", "en", anything else ignored).

    ``strict``: a line with more columns than named is skipped (Tatoeba's format is fixed; its last column, the
    attribution, may be missing); otherwise the extra columns are ignored and counted in a note, and names that no
    line fills are refused, saying how many columns the lines have.
    """
    cols = list(columns)
    if cols.count("fr") != 1 or cols.count("en") != 1:
        raise DataError(
            f"columns={tuple(columns)!r} must name exactly one 'fr' and one 'en' column, in file order, "
            f"e.g. ('fr', 'en') or ('en', 'fr', 'attribution')."
        )
    i_fr, i_en = cols.index("fr"), cols.index("en")
    need = max(i_fr, i_en) + 1
    pairs: list[tuple[str, str]] = []
    extra = 0
    widths: dict[int, int] = {}  # how many lines had each number of columns (the lines that held a pair's columns)
    example = ""  # the first such line, to show what the file holds
    for number, line in enumerate(_lines(path), 1):
        report.lines_read += 1
        if line is None:
            report.skip("invalid UTF-8", number)
            continue
        if not line.strip():
            report.skip("blank line", number)
            continue
        fields = line.split("\t")
        if len(fields) < need:
            report.skip(f"missing tab (fewer than {need} columns)", number)
            continue
        widths[len(fields)] = widths.get(len(fields), 0) + 1
        example = example or line.rstrip("\n")
        if len(fields) > len(cols):
            if strict:
                report.skip(f"stray columns (more than {len(cols)})", number)
                continue
            extra += 1
        fr, en = fields[i_fr].strip(), fields[i_en].strip()
        if not fr:
            report.skip("empty French side", number)
            continue
        if not en:
            report.skip("empty English side", number)
            continue
        pairs.append((fr, en))
    if not strict and widths and max(widths) < len(cols):  # every line narrower than the names given: wrong names
        found = ", ".join(f"{n:,} lines with {w}" for w, n in sorted(widths.items()))
        raise DataError(
            f"columns={tuple(columns)!r} names {len(cols)} columns, but no line of {path.name} has that many "
            f"({found}; the first: {example[:80]!r}). Name each of the file's columns once, in file order, "
            f"e.g. {_example_names(max(widths), i_fr < i_en)}."
        )
    short = sum(n for w, n in widths.items() if w < len(cols))
    if short and not strict:
        report.notes.append(f"{short:,} lines had fewer than the {len(cols)} columns named; their pairs were kept")
    if extra:
        report.notes.append(f"{extra:,} lines had more than {len(cols)} columns; the extra columns were ignored")
    return pairs


def _example_names(width: int, french_first: bool) -> str:
    """A column list for a file of ``width`` columns: the pair first, then the rest named by position."""
    pair = ["fr", "en"] if french_first else ["en", "fr"]
    return ",".join(pair + [f"col{i}" for i in range(3, width + 1)])


def _no_pairs(report: LoadReport, hint: str) -> DataError:
    return DataError(f"No valid (French, English) pair was found.\n{report.pretty()}\nWhat to do: {hint}")


_FR_MARKS = set("éèêàçùâîôûœëï«»")
_FR_WORDS = {"le", "la", "les", "je", "tu", "est", "pas", "une", "des", "et", "vous", "nous", "il", "elle", "de", "que"}
_EN_WORDS = {"the", "i", "is", "you", "to", "a", "and", "it", "he", "she", "we", "are", "not", "my", "of", "do"}


def _frenchness(text: str) -> int:
    words = text.lower().replace("'", " ").split()
    score = sum(ch in _FR_MARKS for ch in text.lower()) + sum(w in _FR_WORDS for w in words)
    score -= sum(w in _EN_WORDS for w in words)
    return score + (1 if (" ?" in text or " !" in text) else 0)  # French puts a space before ? and !


def _check_direction(pairs: Sequence[tuple[str, str]], report: LoadReport, sample: int = 2000) -> None:
    """Warn when the French side reads more English than the English side: swapped columns."""
    if not pairs:
        return
    step = max(1, len(pairs) // sample)
    looked = pairs[::step]
    swapped = sum(_frenchness(en) > _frenchness(fr) for fr, en in looked)
    right = sum(_frenchness(fr) > _frenchness(en) for fr, en in looked)
    if swapped > right and swapped >= 0.5 * len(looked):
        msg = (
            f"{swapped} of {len(looked)} sampled pairs look swapped (the 'French' side reads as English). "
            f"Check the column order: Tatoeba's fra.txt is English<TAB>French; for a TSV pass columns=('en', 'fr')."
        )
        report.notes.append("WARNING: " + msg)
        warnings.warn(msg, ColumnOrderWarning, stacklevel=3)


def load_tsv(
    path: str | os.PathLike, columns: Sequence[str] = ("fr", "en"), *, source: str = "tsv"
) -> tuple[list[tuple[str, str]], LoadReport]:
    """Tab-separated pairs; ``columns`` names the columns in file order (default French first).

    Columns named neither "fr" nor "en" (and any beyond those named) are ignored.
    """
    p = _require_file(path, "The TSV file")
    report = LoadReport(source=source, path=str(p))
    pairs = _parse_columns(p, columns, report, strict=False)
    report.kept = len(pairs)
    if not pairs:
        raise _no_pairs(report, f"check that {p.name} is tab-separated with columns {tuple(columns)}.")
    _check_direction(pairs, report)
    return pairs, report


def load_parallel(fr_path: str | os.PathLike, en_path: str | os.PathLike) -> tuple[list[tuple[str, str]], LoadReport]:
    """Two aligned files: line i of the French file translates to line i of the English one."""
    fp, ep = _require_file(fr_path, "The French file"), _require_file(en_path, "The English file")
    fr_lines, en_lines = list(_lines(fp)), list(_lines(ep))
    if len(fr_lines) != len(en_lines):
        raise DataError(
            f"The files are not aligned: {fp} has {len(fr_lines):,} lines but {ep} has {len(en_lines):,}. "
            f"Line i of one must translate line i of the other; fix the shorter/longer file (a missing or "
            f"extra line, or a line break inside a sentence) before loading."
        )
    report = LoadReport(source="parallel", path=f"{fp} + {ep}")
    pairs = []
    for number, (fr, en) in enumerate(zip(fr_lines, en_lines), 1):
        report.lines_read += 1
        if fr is None or en is None:
            report.skip("invalid UTF-8", number)
            continue
        fr, en = fr.strip(), en.strip()
        if not fr and not en:
            report.skip("blank line", number)
        elif not fr:
            report.skip("empty French side", number)
        elif not en:
            report.skip("empty English side", number)
        else:
            pairs.append((fr, en))
    report.kept = len(pairs)
    if not pairs:
        raise _no_pairs(report, "check that both files hold one sentence per line, in UTF-8.")
    _check_direction(pairs, report)
    return pairs, report


# ============================================================================ Tatoeba

# The pairs of manythings.org/anki, from Tatoeba (CC-BY 2.0; attribution: www.manythings.org/anki and
# tatoeba.org). d2l's copy is tried first: manythings refuses many scripted downloads.
TATOEBA_URLS = (
    "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip",
    "https://www.manythings.org/anki/fra-eng.zip",
)
# sha256 of fra.txt -> what it is. Other releases load fine but warn: counts and scores will differ.
KNOWN_TATOEBA = {
    "0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104": "manythings.org/anki fra-eng release of 2019-04-07: 167,130 pairs, English<TAB>French",
}
TATOEBA_COLUMNS = ("en", "fr", "attribution")  # newer releases add a third, attribution column


def default_cache_dir() -> Path:
    """``$TBB_CACHE_DIR``, else ``~/.cache/transformers-by-building`` (on Colab, pass the Drive folder)."""
    return Path(os.environ.get("TBB_CACHE_DIR") or Path.home() / ".cache" / "transformers-by-building")


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file, read in 1 MiB chunks: how a data file is recognised and a run tied to it.

    Read once per file version: recognising the file and recording it in the run both ask, and a changed
    file (another size or modification time) is read again."""
    st = os.stat(path)
    return _sha256_of(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def find_local_file(env_var: str, relative: str) -> Path | None:
    """A data file already on this machine: ``$<env_var>``, or ``shared/data/<relative>`` beside the repository
    (or beside the current folder, or its parent)."""
    candidates = []
    if os.environ.get(env_var):
        candidates.append(Path(os.environ[env_var]).expanduser())

    root = repo_root()
    for base in ([root] if root else []) + [Path.cwd(), Path.cwd().parent]:
        candidates.append(base.parent / "shared" / "data" / relative)
    return next((c for c in candidates if c.is_file()), None)


def find_local_tatoeba() -> Path | None:
    """A copy of fra.txt already on this machine: ``$TATOEBA_PATH``, or ``../shared/data/...`` next to the repo."""
    return find_local_file("TATOEBA_PATH", "tatoeba-fra-eng/fra.txt")


def fetch(url: str, dest: Path, timeout: float = 60.0) -> None:
    """Download ``url`` (http, https or file) to ``dest``. Tests replace this function."""
    request = urllib.request.Request(url, headers={"User-Agent": "transformers-by-building (course notebooks)"})
    with urllib.request.urlopen(request, timeout=timeout) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out)


def _checksum_status(path: Path) -> tuple[str, str | None]:
    digest = file_sha256(path)
    return digest, KNOWN_TATOEBA.get(digest)


def fetch_tatoeba(
    cache_dir: str | os.PathLike | None = None, urls: Sequence[str] | str = TATOEBA_URLS, *, force: bool = False
) -> Path:
    """fra.txt in the cache, downloading and unzipping it the first time; its checksum is checked."""
    cache = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    folder = cache / "tatoeba-fra-eng"
    target = folder / "fra.txt"
    if target.is_file() and not force:
        _warn_if_unknown(target)
        return target
    urls = (urls,) if isinstance(urls, str) else tuple(urls)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DownloadError(
            f"Cannot create the cache folder {folder} ({err}). Pass cache_dir= a writable folder."
        ) from err
    errors = []
    for url in urls:
        part = folder / "fra-eng.zip.part"
        try:
            fetch(url, part)
            with zipfile.ZipFile(part) as archive:
                names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == "fra.txt"]
                if not names:
                    raise DownloadError(f"{url} has no fra.txt inside (it holds {archive.namelist()[:5]})")
                with archive.open(names[0]) as src, open(target.with_suffix(".txt.part"), "wb") as out:
                    shutil.copyfileobj(src, out)
                about = [n for n in archive.namelist() if n.endswith("_about.txt")]
                if about:
                    (folder / "_about.txt").write_bytes(archive.read(about[0]))
            os.replace(target.with_suffix(".txt.part"), target)
            (folder / "SOURCE").write_text(url + "\n", encoding="utf-8")
            _warn_if_unknown(target)
            return target
        except (OSError, urllib.error.URLError, zipfile.BadZipFile, DownloadError, ValueError) as err:
            errors.append(f"  {url}: {err}")
        finally:
            part.unlink(missing_ok=True)
    raise DownloadError(
        "Could not download the Tatoeba French-English pairs.\n" + "\n".join(errors) + "\n"
        f"The file would have been cached as {target}.\n"
        "What to do:\n"
        f"  * if you have fra.txt (from https://www.manythings.org/anki/fra-eng.zip), pass it: "
        f"load_pairs('tatoeba', path='/path/to/fra.txt'), or copy it to {target};\n"
        "  * or work offline with the built-in synthetic corpus: load_pairs('builtin')."
    )


def _warn_if_unknown(path: Path) -> str | None:
    digest, known = _checksum_status(path)
    if known is None:
        n = sum(1 for _ in open(path, "rb"))
        warnings.warn(
            f"{path} (sha256 {digest[:12]}..., {n:,} lines) is not a Tatoeba release this course knows. It will load, "
            f"but counts, splits and scores will differ from the ones the notebooks report, which used the "
            f"2019-04-07 release ({next(iter(KNOWN_TATOEBA))[:12]}...).",
            ChecksumWarning,
            stacklevel=3,
        )
    return known


def load_tatoeba(
    path: str | os.PathLike | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    download: bool = True,
    urls: Sequence[str] | str = TATOEBA_URLS,
) -> tuple[list[tuple[str, str]], LoadReport]:
    """Tatoeba pairs from manythings.org: the file is English<TAB>French[<TAB>attribution]; we return (fr, en).

    Without ``path``: a local copy (``$TATOEBA_PATH`` or the shared folder next to the repo), else the
    cache (``cache_dir``, e.g. the Drive folder from ``colab.mount_drive()``), else a download into it.
    """
    how = "given path"
    if path is None:
        cached = (Path(cache_dir).expanduser() if cache_dir else default_cache_dir()) / "tatoeba-fra-eng" / "fra.txt"
        local = find_local_tatoeba()
        if local is not None:
            path, how = local, "local copy"
        elif cached.is_file() or download:
            path, how = fetch_tatoeba(cache_dir, urls), "cache"
        else:
            raise FileNotFoundError(
                f"No Tatoeba file: none at $TATOEBA_PATH, next to the repository, or in the cache ({cached}), and "
                f"download=False. Pass path='/path/to/fra.txt', allow the download, or use load_pairs('builtin')."
            )
    p = _require_file(path, "The Tatoeba file")
    report = LoadReport(source="tatoeba", path=str(p))
    digest, known = _checksum_status(p)
    report.notes.append(f"{how}; sha256 {digest[:12]}...: " + (known or "not a release this course knows"))
    report.notes.append("licence CC-BY 2.0; attribution: www.manythings.org/anki and tatoeba.org")
    pairs = _parse_columns(p, TATOEBA_COLUMNS, report, strict=True)
    report.kept = len(pairs)
    if not pairs:
        raise _no_pairs(report, "a Tatoeba file has one pair per line: English<TAB>French[<TAB>attribution].")
    _check_direction(pairs, report)
    return pairs, report


# ============================================================================ one entry point


def _subsample(pairs: list, limit: int, seed: int, report: LoadReport) -> list:
    if limit is None or limit >= len(pairs):
        return pairs
    if limit < 1:
        raise DataError(f"limit={limit!r}: ask for at least one pair, or None for all.")
    keep = sorted(random.Random(seed).sample(range(len(pairs)), limit))  # keep file order
    report.notes.append(f"random sample of {limit:,} of {len(pairs):,} pairs (seed {seed})")
    report.kept = limit
    return [pairs[i] for i in keep]


def load_pairs(
    source: str,
    path: str | os.PathLike | Sequence | None = None,
    *,
    columns: Sequence[str] = ("fr", "en"),
    limit: int | None = None,
    seed: int = 0,
    cache_dir: str | os.PathLike | None = None,
    **kw,
) -> tuple[list[tuple[str, str]], LoadReport]:
    """(French, English) pairs from ``source`` and a report of what was read, kept and skipped.

    tatoeba   manythings/Tatoeba fra.txt (``path`` optional: local copy, cache or download)
    tsv       a tab-separated file, ``columns`` in file order (default ("fr", "en"))
    parallel  two aligned files: ``path=(fr_path, en_path)``
    builtin   the synthetic corpus: ``limit`` pairs (default 30,000), ``seed``, ``difficulty=1..3``
    ``limit`` keeps a seeded random sample (file order kept), not the first lines: Tatoeba is sorted by length.
    """
    if source == "tatoeba":
        pairs, report = load_tatoeba(path, cache_dir=cache_dir, **kw)
    elif source == "tsv":
        if path is None:
            raise DataError("source='tsv' needs path='file.tsv' (and columns=..., default ('fr', 'en')).")
        pairs, report = load_tsv(path, columns, **kw)
    elif source == "parallel":
        fr_path, en_path = kw.pop("fr_path", None), kw.pop("en_path", None)
        if path is not None:
            if isinstance(path, (str, os.PathLike)) or len(path) != 2:
                raise DataError("source='parallel' needs path=(french_file, english_file): two aligned files.")
            fr_path, en_path = path
        if fr_path is None or en_path is None:
            raise DataError("source='parallel' needs path=(french_file, english_file): two aligned files.")
        pairs, report = load_parallel(fr_path, en_path)
    elif source == "builtin":
        difficulty = kw.pop("difficulty", 2)
        if kw:
            raise DataError(f"source='builtin' takes limit=, seed= and difficulty=, not {sorted(kw)}.")
        n = DEFAULT_N if limit is None else limit
        pairs = builtin_corpus(n=n, seed=seed, difficulty=difficulty)
        report = LoadReport(
            source=f"builtin (SYNTHETIC, difficulty {difficulty}, seed {seed})", lines_read=len(pairs), kept=len(pairs)
        )
        report.notes.append("generated by the grammar in helpers/text/corpus.py, not real translations")
        return pairs, report
    else:
        raise DataError(f"Unknown source {source!r}: use one of {', '.join(SOURCES)}.")
    return _subsample(pairs, limit, seed, report), report


def load_path(
    data: str | os.PathLike, columns: Sequence[str] | None = None, *, limit: int | None = None, seed: int = 0
) -> tuple[list[tuple[str, str]], LoadReport]:
    """Pairs from what ``--data`` or ``--test`` names: "builtin", the Tatoeba file, or a tab-separated file.

    The Tatoeba file (English<TAB>French<TAB>attribution) is recognised by its checksum or its name
    ``fra.txt``; any other file is read as ``columns`` in file order (default French<TAB>English), so the
    raw Tatoeba format under another name works with ``columns=("en", "fr", "attribution")``.
    """
    if str(data) == "builtin":
        return load_pairs("builtin", limit=limit, seed=seed)
    path = Path(data).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"{data}: no such file. Pass a Tatoeba fra.txt, a French<TAB>English file (or another column order, "
            "e.g. --columns en,fr), or 'builtin' for the synthetic corpus."
        )
    if columns is None and (path.name == "fra.txt" or file_sha256(path) in KNOWN_TATOEBA):
        return load_pairs("tatoeba", path, limit=limit, seed=seed)
    return load_pairs("tsv", path, columns=tuple(columns or ("fr", "en")), limit=limit, seed=seed)
