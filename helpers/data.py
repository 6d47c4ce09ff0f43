"""Sentence pairs, cleaning, splits, the tokenizer and batches (notebook 03 and every later one).

The pipeline, each step reporting what it kept and what it dropped and why:

    pairs, report = load_pairs("tatoeba")            # or "tsv", "parallel", "hf", "builtin"
    pairs, cleaned = clean_pairs(pairs)              # normalise, filter, de-duplicate
    splits = split_pairs(pairs)                      # no sentence leaks between splits
    tok = Tokenizer.train(splits.train)              # sentencepiece, on the TRAIN split only
    examples, trunc = encode_pairs(tok, splits.train, max_len=64)
    for batch in BucketBatcher(examples, max_tokens=4096): ...

Pairs are always (French, English): we translate French into English. One training sequence is

    <bos> French <sep> English <eos>

and the loss is taken on the English tokens and <eos> only (``Batch.labels``).
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import shutil
import unicodedata
import urllib.error
import urllib.request
import warnings
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .corpus import DEFAULT_N, builtin_corpus, describe_corpus  # noqa: F401  (re-exported)

__all__ = [
    "PAD",
    "BOS",
    "SEP",
    "EOS",
    "UNK",
    "PAD_ID",
    "BOS_ID",
    "SEP_ID",
    "EOS_ID",
    "UNK_ID",
    "IGNORE_INDEX",
    "SOURCES",
    "LoadReport",
    "CleanReport",
    "SplitReport",
    "TruncationReport",
    "Splits",
    "Example",
    "Batch",
    "Tokenizer",
    "BucketBatcher",
    "DataError",
    "DownloadError",
    "ChecksumWarning",
    "ColumnOrderWarning",
    "load_pairs",
    "load_tatoeba",
    "load_tsv",
    "load_parallel",
    "load_hf",
    "builtin_corpus",
    "describe_corpus",
    "fetch_tatoeba",
    "find_local_tatoeba",
    "normalise_text",
    "clean_pairs",
    "split_pairs",
    "make_example",
    "encode_pairs",
    "prompt_ids",
    "collate",
    "pair_lengths",
    "default_cache_dir",
    "prepare",
    "Prepared",
]

PAD, BOS, SEP, EOS, UNK = "<pad>", "<bos>", "<sep>", "<eos>", "<unk>"
PAD_ID, BOS_ID, SEP_ID, EOS_ID, UNK_ID = 0, 1, 2, 3, 4
IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index

SOURCES = ("tatoeba", "tsv", "parallel", "hf", "builtin")


class DataError(ValueError):
    """Input we cannot use; the message says what was wrong and what to do."""


class DownloadError(RuntimeError):
    """A download failed; the message names the URL, the cache path and the offline alternatives."""


class ChecksumWarning(UserWarning):
    """A data file is not a release we know: results will differ from the ones the course reports."""


class ColumnOrderWarning(UserWarning):
    """The "French" column looks English: the columns are probably swapped."""


# ============================================================================ reports


@dataclass
class LoadReport:
    """What a loader read, kept and skipped (with the reason for each skipped line)."""

    source: str
    lines_read: int = 0
    kept: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    path: str | None = None

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())

    def pretty(self) -> str:
        lines = [f"Loaded {self.source}" + (f" from {self.path}" if self.path else "")]
        lines.append(f"  lines read : {self.lines_read:>9,}")
        lines.append(f"  pairs kept : {self.kept:>9,}")
        lines.append(f"  skipped    : {self.n_skipped:>9,}")
        for reason, n in sorted(self.skipped.items(), key=lambda kv: -kv[1]):
            lines.append(f"    {n:>9,}  {reason}")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    __str__ = pretty


@dataclass
class CleanReport:
    """Counts at each cleaning step: pairs in, pairs removed per step, pairs out."""

    n_in: int = 0
    normalised: int = 0  # pairs whose text changed (kept, not dropped)
    removed: dict[str, int] = field(default_factory=dict)  # step -> pairs removed, in order
    n_out: int = 0

    def pretty(self) -> str:
        lines = [
            "Cleaning",
            f"  pairs in                        {self.n_in:>9,}",
            f"  text normalised (kept)          {self.normalised:>9,}",
        ]
        for step, n in self.removed.items():
            lines.append(f"  - {step:<30}{n:>9,}")
        lines.append(f"  pairs out                       {self.n_out:>9,}")
        return "\n".join(lines)

    __str__ = pretty


@dataclass
class SplitReport:
    n_pairs: int = 0
    n_groups: int = 0
    groups_joined_by_english: int = 0  # groups holding several French sentences that share an English one
    pairs_kept_together: int = 0  # pairs in those groups: a French-only grouping could have split them
    sizes: dict[str, int] = field(default_factory=dict)
    targets: dict[str, int] = field(default_factory=dict)  # what valid/test fractions asked for
    french_in_two_splits: int = 0  # checked after splitting: must be 0
    test_english_in_train: int = 0  # checked after splitting: must be 0
    valid_english_in_train: int = 0

    def pretty(self) -> str:
        s = self.sizes
        return "\n".join(
            [
                "Split (grouped so that no French sentence and no English reference is in two splits)",
                f"  pairs {self.n_pairs:,} in {self.n_groups:,} groups; {self.groups_joined_by_english:,} groups "
                f"({self.pairs_kept_together:,} pairs) were kept together because French sentences share an English one",
                f"  train {s.get('train', 0):,} | valid {s.get('valid', 0):,} (asked {self.targets.get('valid', 0):,}) | "
                f"test {s.get('test', 0):,} (asked {self.targets.get('test', 0):,})",
                f"  checks: French sentences in two splits = {self.french_in_two_splits}, test references that are "
                f"training targets = {self.test_english_in_train}, valid references that are training targets = "
                f"{self.valid_english_in_train}",
            ]
        )

    __str__ = pretty


@dataclass
class TruncationReport:
    n_pairs: int = 0
    kept: int = 0
    truncated: int = 0  # kept, but cut at max_len (the end of the English and its <eos> are lost)
    dropped_too_long: int = 0
    dropped_empty: int = 0  # a side encoded to no token at all
    max_len: int = 0
    longest: int = 0  # longest sequence before truncation, in tokens
    tokens_lost: int = 0

    def pretty(self) -> str:
        return "\n".join(
            [
                f"Encoding to <bos> French <sep> English <eos>, max_len={self.max_len}",
                f"  pairs in {self.n_pairs:,}; kept {self.kept:,} (of which truncated {self.truncated:,}, "
                f"{self.tokens_lost:,} tokens lost)",
                f"  dropped: too long {self.dropped_too_long:,}, empty side {self.dropped_empty:,}; "
                f"longest sequence {self.longest} tokens",
            ]
        )

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

    ``strict``: a line with more columns than named is skipped (Tatoeba's format is fixed);
    otherwise the extra columns are ignored and counted in a note.
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
    for line in _lines(path):
        report.lines_read += 1
        if line is None:
            report.skip("invalid UTF-8")
            continue
        if not line.strip():
            report.skip("blank line")
            continue
        fields = line.split("\t")
        if len(fields) < need:
            report.skip(f"missing tab (fewer than {need} columns)")
            continue
        if len(fields) > len(cols):
            if strict:
                report.skip(f"stray columns (more than {len(cols)})")
                continue
            extra += 1
        fr, en = fields[i_fr].strip(), fields[i_en].strip()
        if not fr:
            report.skip("empty French side")
            continue
        if not en:
            report.skip("empty English side")
            continue
        pairs.append((fr, en))
    if extra:
        report.notes.append(f"{extra:,} lines had more than {len(cols)} columns; the extra columns were ignored")
    return pairs


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
    for fr, en in zip(fr_lines, en_lines):
        report.lines_read += 1
        if fr is None or en is None:
            report.skip("invalid UTF-8")
            continue
        fr, en = fr.strip(), en.strip()
        if not fr and not en:
            report.skip("blank line")
        elif not fr:
            report.skip("empty French side")
        elif not en:
            report.skip("empty English side")
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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def find_local_tatoeba() -> Path | None:
    """A copy of fra.txt already on this machine: ``$TATOEBA_PATH``, or ``../shared/data/...`` next to the repo."""
    candidates = []
    if os.environ.get("TATOEBA_PATH"):
        candidates.append(Path(os.environ["TATOEBA_PATH"]).expanduser())
    from .runtime import repo_root

    root = repo_root()
    for base in ([root] if root else []) + [Path.cwd(), Path.cwd().parent]:
        candidates.append(base.parent / "shared" / "data" / "tatoeba-fra-eng" / "fra.txt")
    return next((c for c in candidates if c.is_file()), None)


def _fetch(url: str, dest: Path, timeout: float = 60.0) -> None:
    """Download ``url`` (http, https or file) to ``dest``. Tests replace this function."""
    request = urllib.request.Request(url, headers={"User-Agent": "transformers-by-building (course notebooks)"})
    with urllib.request.urlopen(request, timeout=timeout) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out)


def _checksum_status(path: Path) -> tuple[str, str | None]:
    digest = _sha256(path)
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
            _fetch(url, part)
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
            (folder / "SOURCE").write_text(url + "\n")
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


# ============================================================================ Hugging Face (parquet)


@dataclass(frozen=True)
class HFSource:
    repo: str
    pattern: str  # parquet files inside the repo, by split
    default_split: str
    about: str


HF_SOURCES = {
    "opus100": HFSource(
        "Helsinki-NLP/opus-100",
        "en-fr/{split}-*.parquet",
        "train",
        "OPUS-100 en-fr (Zhang et al., 2020): 1M training pairs sampled from OPUS, 2,000 valid, 2,000 test",
    ),
    "wmt14": HFSource(
        "wmt/wmt14",
        "fr-en/{split}-*.parquet",
        "test",
        "WMT14 fr-en; its test split is newstest2014 (3,003 sentences of news)",
    ),
}


def _hf_pairs(rows: Iterable[dict], report: LoadReport) -> list[tuple[str, str]]:
    pairs = []
    for row in rows:
        report.lines_read += 1
        tr = row.get("translation") if "translation" in row else row
        fr, en = (tr or {}).get("fr"), (tr or {}).get("en")
        if not isinstance(fr, str) or not fr.strip():
            report.skip("empty French side")
        elif not isinstance(en, str) or not en.strip():
            report.skip("empty English side")
        else:
            pairs.append((fr.strip(), en.strip()))
    return pairs


def load_hf(
    name: str = "opus100",
    split: str | None = None,
    limit: int | None = None,
    *,
    data_files: str | Sequence[str] | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> tuple[list[tuple[str, str]], LoadReport]:
    """OPUS-100 en-fr or WMT14 fr-en from the Hugging Face Hub, read from the repos' parquet files.

    ``data_files`` replaces the Hub files (local parquet files: what the tests use), through the same code.
    """
    if name not in HF_SOURCES:
        raise DataError(f"Unknown Hugging Face source {name!r}: use one of {sorted(HF_SOURCES)}.")
    src = HF_SOURCES[name]
    split = split or src.default_split
    files = data_files or f"hf://datasets/{src.repo}/{src.pattern.format(split=split)}"
    import datasets

    try:
        ds = datasets.load_dataset(
            "parquet", data_files={split: files}, split=split, cache_dir=str(cache_dir) if cache_dir else None
        )
    except Exception as err:  # network, missing split, bad file: all end here with what to do
        raise DataError(
            f"Could not load {name} split {split!r} from {files}: {type(err).__name__}: {err}\n"
            f"What to do: check the split name (e.g. 'train', 'validation', 'test') and the network; "
            f"offline, use load_pairs('tatoeba', path=...) or load_pairs('builtin')."
        ) from err
    if limit is not None:
        ds = ds.select(range(min(int(limit), len(ds))))
    report = LoadReport(source=f"hf:{name}/{split}", path=str(files))
    report.notes.append(src.about)
    pairs = _hf_pairs(ds, report)
    report.kept = len(pairs)
    if not pairs:
        raise _no_pairs(
            report, "the parquet rows need a 'translation' column {'fr': ..., 'en': ...} or 'fr'/'en' columns."
        )
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
    hf        ``name="opus100"`` or ``"wmt14"``, ``split=``; ``path`` = local parquet file(s) instead of the Hub
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
    elif source == "hf":
        return load_hf(
            kw.pop("name", "opus100"), kw.pop("split", None), limit, data_files=path, cache_dir=cache_dir, **kw
        )
    elif source == "builtin":
        difficulty = kw.pop("difficulty", 2)
        if kw:
            raise DataError(f"source='builtin' takes limit=, seed= and difficulty=, not {sorted(kw)}.")
        n = DEFAULT_N if limit is None else limit
        pairs = builtin_corpus(n=n, seed=seed, difficulty=difficulty)
        report = LoadReport(
            source=f"builtin (SYNTHETIC, difficulty {difficulty}, seed {seed})", lines_read=len(pairs), kept=len(pairs)
        )
        report.notes.append("generated by the grammar in helpers/corpus.py, not real translations")
        return pairs, report
    else:
        raise DataError(f"Unknown source {source!r}: use one of {', '.join(SOURCES)}.")
    return _subsample(pairs, limit, seed, report), report


# ============================================================================ cleaning

# Tatoeba's French uses narrow and ordinary no-break spaces before ? ! : ; (over 10,000 of them):
# they would otherwise become separate, rare tokens. Zero-width and soft-hyphen characters are invisible.
_INVISIBLE = {0x200B, 0x200C, 0x200E, 0x200F, 0x2060, 0xFEFF, 0x00AD}


def _build_table() -> dict[int, str | None]:
    table: dict[int, str | None] = {}
    for cp in range(0x3000 + 1):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat == "Zs" or ch in "\t\n\r\x0b\x0c\x85\u2028\u2029":
            table[cp] = " "
        elif cat == "Cc" or cp in _INVISIBLE:
            table[cp] = None
    table[0xFEFF] = None
    return table


_TABLE = _build_table()


def normalise_text(text: str) -> str:
    """NFC, every kind of space to " ", control and invisible characters dropped, spaces collapsed."""
    return " ".join(unicodedata.normalize("NFC", text).translate(_TABLE).split())


def clean_pairs(
    pairs: Iterable[tuple[str, str]], *, min_tokens: int = 1, max_tokens: int = 50, max_ratio: float = 3.0
) -> tuple[list[tuple[str, str]], CleanReport]:
    """Normalise the text, then drop empty, too short, too long, badly balanced and duplicate pairs.

    Lengths here are words (whitespace-separated): the tokenizer does not exist yet. ``max_ratio`` is the
    largest allowed ratio of the longer side's word count to the shorter one's.
    """
    report = CleanReport()
    removed = {
        "empty after normalising": 0,
        f"shorter than {min_tokens} words": 0,
        f"longer than {max_tokens} words": 0,
        f"length ratio above {max_ratio:g}": 0,
        "exact duplicate": 0,
    }
    keys = list(removed)
    seen: set[tuple[str, str]] = set()
    out = []
    for fr0, en0 in pairs:
        report.n_in += 1
        fr, en = normalise_text(fr0), normalise_text(en0)
        if (fr, en) != (fr0, en0):
            report.normalised += 1
        if not fr or not en:
            removed[keys[0]] += 1
            continue
        nf, ne = len(fr.split()), len(en.split())
        if min(nf, ne) < min_tokens:
            removed[keys[1]] += 1
        elif max(nf, ne) > max_tokens:
            removed[keys[2]] += 1
        elif max(nf, ne) > max_ratio * min(nf, ne):
            removed[keys[3]] += 1
        elif (fr, en) in seen:
            removed[keys[4]] += 1
        else:
            seen.add((fr, en))
            out.append((fr, en))
    report.removed = removed
    report.n_out = len(out)
    return out, report


# ============================================================================ splits


@dataclass
class Splits:
    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]
    report: SplitReport | None = None

    def __iter__(self):  # train, valid, test = split_pairs(...)
        return iter((self.train, self.valid, self.test))


def split_pairs(pairs: Sequence[tuple[str, str]], *, valid: float = 0.05, test: float = 0.05, seed: int = 0) -> Splits:
    """Train/valid/test with no leak: pairs are grouped so that every French sentence, and every English
    one, lives in a single split.

    Tatoeba has many French variants of one English sentence ("Va !", "Bouge !" are both "Go."); grouping
    by French alone would put "Go." in test as a reference and in train as a target. So groups are the
    connected components of the graph linking each French sentence to its English ones; whole groups are
    dealt to test, then valid, then train in a seeded random order.
    """
    if not 0 <= valid < 1 or not 0 <= test < 1 or valid + test >= 1:
        raise DataError(f"valid={valid} and test={test} must be fractions in [0, 1) that leave room for training.")
    parent: dict = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for fr, en in pairs:
        a, b = find(("fr", fr)), find(("en", en))
        if a != b:
            parent[a] = b
    groups: dict = {}
    for i, (fr, _) in enumerate(pairs):
        groups.setdefault(find(("fr", fr)), []).append(i)
    members = list(groups.values())  # in order of first appearance: deterministic
    random.Random(seed).shuffle(members)

    n = len(pairs)
    targets = {"test": round(test * n), "valid": round(valid * n)}
    for name, frac in (("test", test), ("valid", valid)):
        if frac > 0 and targets[name] == 0 and n >= 3:
            targets[name] = 1
    out: dict[str, list[int]] = {"train": [], "valid": [], "test": []}
    for idx in members:
        # a group goes where it fits; one too big for what is left of test and valid trains
        dest = next((k for k in ("test", "valid") if len(out[k]) + len(idx) <= targets[k]), "train")
        out[dest].extend(idx)

    report = SplitReport(n_pairs=n, n_groups=len(members), targets=targets)
    for idx in members:
        if len({pairs[i][0] for i in idx}) > 1:
            report.groups_joined_by_english += 1
            report.pairs_kept_together += len(idx)
    result = {k: [pairs[i] for i in sorted(v)] for k, v in out.items()}
    report.sizes = {k: len(v) for k, v in result.items()}
    fr_sets = {k: {fr for fr, _ in v} for k, v in result.items()}
    en_train = {en for _, en in result["train"]}
    report.french_in_two_splits = len(
        (fr_sets["train"] & fr_sets["valid"])
        | (fr_sets["train"] & fr_sets["test"])
        | (fr_sets["valid"] & fr_sets["test"])
    )
    report.test_english_in_train = len({en for _, en in result["test"]} & en_train)
    report.valid_english_in_train = len({en for _, en in result["valid"]} & en_train)
    return Splits(result["train"], result["valid"], result["test"], report)


# ============================================================================ tokenizer


class Tokenizer:
    """A joint French+English sentencepiece model (unigram or BPE) with our four special tokens.

    ids: <pad>=0, <bos>=1, <sep>=2, <eos>=3, <unk>=4, then 256 byte pieces (byte fallback: any character
    the model never saw is spelt as UTF-8 bytes, so it round-trips instead of becoming <unk>), then pieces.
    Train it on the training split only: pieces learnt from test sentences would leak them.
    """

    pad_id, bos_id, sep_id, eos_id, unk_id = PAD_ID, BOS_ID, SEP_ID, EOS_ID, UNK_ID

    def __init__(self, model_proto: bytes, meta: dict | None = None):
        import sentencepiece as spm

        self.model_proto = bytes(model_proto)
        self.sp = spm.SentencePieceProcessor(model_proto=self.model_proto)
        self.meta = dict(meta or {})
        for name, want in (
            ("<pad>", PAD_ID),
            ("<bos>", BOS_ID),
            ("<sep>", SEP_ID),
            ("<eos>", EOS_ID),
            ("<unk>", UNK_ID),
        ):
            if self.sp.piece_to_id(name) != want:
                raise DataError(
                    f"This sentencepiece model puts {name} at id {self.sp.piece_to_id(name)}, not {want}: "
                    f"train it with Tokenizer.train so the special ids match."
                )

    @classmethod
    def train(
        cls,
        texts: Iterable[str] | Iterable[tuple[str, str]],
        vocab_size: int = 8000,
        model_type: str = "unigram",
        out_dir: str | os.PathLike | None = None,
        *,
        character_coverage: float = 0.9995,
        input_sentence_size: int = 400_000,
        num_threads: int | None = None,
        seed: int = 0,
    ) -> Tokenizer:
        """Train on ``texts`` (strings, or (fr, en) pairs: both sides are used). Saved to ``out_dir`` if given."""
        import sentencepiece as spm

        if model_type not in ("unigram", "bpe"):
            raise DataError(f"model_type={model_type!r}: use 'unigram' or 'bpe'.")
        lines = []
        for t in texts:
            lines.extend(t if isinstance(t, tuple) else (t,))
        lines = [s for s in (str(x).strip() for x in lines) if s]
        if not lines:
            raise DataError("No text to train the tokenizer on: pass the training pairs (or their sentences).")
        if vocab_size < 300:
            raise DataError(
                f"vocab_size={vocab_size} is too small: 261 ids are taken by special and byte pieces; "
                f"use at least 300 (8000 for Tatoeba)."
            )
        spm.set_random_generator_seed(seed)
        proto = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=proto,
            vocab_size=vocab_size,
            model_type=model_type,
            pad_id=PAD_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            unk_id=UNK_ID,
            pad_piece=PAD,
            bos_piece=BOS,
            eos_piece=EOS,
            unk_piece=UNK,
            control_symbols=[SEP],
            byte_fallback=True,
            character_coverage=character_coverage,
            split_digits=True,
            normalization_rule_name="identity",  # clean_pairs already normalised: keep « … » and ’ as they are
            hard_vocab_limit=False,  # a tiny corpus gets a smaller vocabulary instead of an error
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            num_threads=num_threads or max(1, min(4, os.cpu_count() or 1)),
            max_sentence_length=4192,
            minloglevel=2,
        )
        tok = cls(
            proto.getvalue(),
            {"model_type": model_type, "requested_vocab_size": vocab_size, "trained_on_sentences": len(lines)},
        )
        if out_dir is not None:
            tok.save(out_dir)
        return tok

    # -- persistence
    def save(self, out_dir: str | os.PathLike) -> Path:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "spm.model").write_bytes(self.model_proto)
        import json

        (d / "tokenizer.json").write_text(json.dumps({**self.meta, "vocab_size": self.vocab_size}, indent=2))
        return d

    @classmethod
    def load(cls, in_dir: str | os.PathLike) -> Tokenizer:
        d = Path(in_dir)
        model = d / "spm.model"
        if not model.is_file():
            raise FileNotFoundError(
                f"No tokenizer at {d} (expected {model}). Train one with Tokenizer.train(...) "
                f"and save it with tok.save({str(d)!r})."
            )
        import json

        meta = json.loads((d / "tokenizer.json").read_text()) if (d / "tokenizer.json").is_file() else {}
        return cls(model.read_bytes(), meta)

    # -- use
    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.sp.encode(list(texts))

    def decode(self, ids) -> str:
        """Text from ids; special tokens (<pad>, <bos>, <sep>, <eos>) are left out."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return self.sp.decode([int(i) for i in ids])

    def pieces(self, text: str) -> list[str]:
        return self.sp.encode(text, out_type=str)

    def id_to_piece(self, i: int) -> str:
        return self.sp.id_to_piece(int(i))

    def __repr__(self) -> str:
        return f"Tokenizer({self.meta.get('model_type', '?')}, vocab_size={self.vocab_size})"


# ============================================================================ examples and batches


@dataclass
class Example:
    input_ids: list[int]  # <bos> French <sep> English <eos>
    prefix_len: int  # len(<bos> French <sep>): positions from here on are the target


def prompt_ids(tok: Tokenizer, fr: str) -> list[int]:
    """What a translation starts from at inference: <bos> French <sep>."""
    return [tok.bos_id, *tok.encode(fr), tok.sep_id]


def _example(fr_ids: list[int], en_ids: list[int], max_len: int, truncate: bool, report: TruncationReport | None):
    if not fr_ids or not en_ids:
        if report:
            report.dropped_empty += 1
        return None
    ids = [BOS_ID, *fr_ids, SEP_ID, *en_ids, EOS_ID]
    prefix = len(fr_ids) + 2
    if report:
        report.longest = max(report.longest, len(ids))
    if len(ids) > max_len:
        if not truncate or prefix >= max_len:  # nothing of the English would be left to learn from
            if report:
                report.dropped_too_long += 1
            return None
        if report:
            report.truncated += 1
            report.tokens_lost += len(ids) - max_len
        ids = ids[:max_len]
    return Example(ids, prefix)


def make_example(tok: Tokenizer, fr: str, en: str, max_len: int, *, truncate: bool = False) -> Example | None:
    """One training sequence, or None if it is longer than ``max_len`` (or cut to it with ``truncate``)."""
    return _example(tok.encode(fr), tok.encode(en), max_len, truncate, None)


def encode_pairs(
    tok: Tokenizer, pairs: Sequence[tuple[str, str]], max_len: int, *, truncate: bool = False
) -> tuple[list[Example], TruncationReport]:
    """Examples for all pairs; over-long ones are dropped (or, with ``truncate``, cut) and counted."""
    if max_len < 4:
        raise DataError(f"max_len={max_len} cannot hold <bos> x <sep> y <eos>: use at least 4 (64 is typical).")
    report = TruncationReport(n_pairs=len(pairs), max_len=max_len)
    fr_ids = tok.encode_batch([fr for fr, _ in pairs])
    en_ids = tok.encode_batch([en for _, en in pairs])
    examples = []
    for f, e in zip(fr_ids, en_ids):
        ex = _example(f, e, max_len, truncate, report)
        if ex is not None:
            examples.append(ex)
    report.kept = len(examples)
    return examples, report


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T) long, right-padded with pad_id
    labels: torch.Tensor  # (B, T) long: the next token where it is English or <eos>, else -100
    prefix_len: torch.Tensor  # (B,) long
    n_target_tokens: int  # labels != -100: what the loss averages over

    def to(self, device, non_blocking: bool = False) -> Batch:
        return Batch(
            self.input_ids.to(device, non_blocking=non_blocking),
            self.labels.to(device, non_blocking=non_blocking),
            self.prefix_len.to(device, non_blocking=non_blocking),
            self.n_target_tokens,
        )

    def pin_memory(self) -> Batch:
        """Page-locked copies, so that ``to("cuda", non_blocking=True)`` overlaps the copy with compute."""
        return Batch(
            self.input_ids.pin_memory(), self.labels.pin_memory(), self.prefix_len.pin_memory(), self.n_target_tokens
        )

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.input_ids.shape)


def collate(examples: Sequence[Example], pad_id: int = PAD_ID) -> Batch:
    """Pad on the right and build the labels: position t predicts token t+1, scored only on the target."""
    B, T = len(examples), max(len(e.input_ids) for e in examples)
    input_ids = torch.full((B, T), pad_id, dtype=torch.long)
    labels = torch.full((B, T), IGNORE_INDEX, dtype=torch.long)
    for b, e in enumerate(examples):
        L = len(e.input_ids)
        input_ids[b, :L] = torch.tensor(e.input_ids, dtype=torch.long)
        # predicting from position prefix_len-1 (the <sep>) onwards yields English tokens, then <eos>
        labels[b, e.prefix_len - 1 : L - 1] = input_ids[b, e.prefix_len : L]
    prefix_len = torch.tensor([e.prefix_len for e in examples], dtype=torch.long)
    return Batch(input_ids, labels, prefix_len, int((labels != IGNORE_INDEX).sum()))


class BucketBatcher:
    """Batches of similar-length examples under a token budget: B * T_max <= max_tokens.

    Each epoch: shuffle (seed, epoch), sort by length (ties stay shuffled), cut greedily into batches
    under the budget, shuffle the batch order. Little padding, different batches every epoch, and
    exactly the same ones for the same seed and epoch. It is a cursor: ``state_dict()`` records the
    epoch and how many batches were handed out, so a resumed run continues with the very next batch.
    Iterating to the end of an epoch moves to the next one; ``bucket=False`` batches in random order
    (the baseline that bucketing beats).
    """

    def __init__(
        self,
        examples: Sequence[Example],
        max_tokens: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        bucket: bool = True,
        max_batch_size: int | None = None,
        pad_id: int = PAD_ID,
    ):
        self.examples = list(examples)
        if not self.examples:
            raise DataError("BucketBatcher got no examples: check encode_pairs' report (all dropped as too long?).")
        self.lengths = np.array([len(e.input_ids) for e in self.examples])
        if self.lengths.max() > max_tokens:
            raise DataError(
                f"max_tokens={max_tokens} is smaller than the longest example ({self.lengths.max()} tokens): "
                f"raise max_tokens or lower max_len in encode_pairs."
            )
        self.max_tokens, self.shuffle, self.seed, self.bucket = int(max_tokens), shuffle, int(seed), bucket
        self.max_batch_size, self.pad_id = max_batch_size, pad_id
        self.epoch, self.position = 0, 0
        self._plan_cache: tuple[int, list[list[int]]] | None = None

    # -- the plan of one epoch
    def _plan(self, epoch: int) -> list[list[int]]:
        if self._plan_cache and self._plan_cache[0] == epoch:
            return self._plan_cache[1]
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.examples)) if self.shuffle else np.arange(len(self.examples))
        if self.bucket:
            order = order[np.argsort(self.lengths[order], kind="stable")]
        batches, current, longest = [], [], 0
        for i in order.tolist():
            L = int(self.lengths[i])
            full = self.max_batch_size is not None and len(current) >= self.max_batch_size
            if current and (full or (len(current) + 1) * max(longest, L) > self.max_tokens):
                batches.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, L)
        if current:
            batches.append(current)
        if self.shuffle:
            batches = [batches[j] for j in rng.permutation(len(batches))]
        self._plan_cache = (epoch, batches)
        return batches

    def __len__(self) -> int:
        return len(self._plan(self.epoch))

    def __iter__(self) -> Iterator[Batch]:
        plan = self._plan(self.epoch)
        while self.position < len(plan):
            idx = plan[self.position]
            self.position += 1  # counted before yielding: a checkpoint taken now resumes after this batch
            yield collate([self.examples[i] for i in idx], self.pad_id)
        self.epoch, self.position = self.epoch + 1, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position = int(epoch), 0

    # -- resuming
    def _fingerprint(self) -> str:
        return hashlib.sha1(self.lengths.astype(np.int64).tobytes()).hexdigest()[:16]

    def state_dict(self) -> dict:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "shuffle": self.shuffle,
            "bucket": self.bucket,
            "max_batch_size": self.max_batch_size,
            "n_examples": len(self.examples),
            "fingerprint": self._fingerprint(),
        }

    def load_state_dict(self, state: dict) -> None:
        for key in ("seed", "max_tokens", "shuffle", "bucket", "max_batch_size", "n_examples", "fingerprint"):
            mine = (
                len(self.examples)
                if key == "n_examples"
                else (self._fingerprint() if key == "fingerprint" else getattr(self, key))
            )
            if state.get(key) != mine:
                raise DataError(
                    f"This batcher cannot resume that state: {key} was {state.get(key)!r} when it was saved and is "
                    f"{mine!r} now. Rebuild the batcher from the same examples, seed and max_tokens to resume exactly."
                )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])

    # -- how well it packs
    def stats(self, epoch: int | None = None) -> dict:
        plan = self._plan(self.epoch if epoch is None else epoch)
        real = sum(int(self.lengths[idx].sum()) for idx in plan)
        padded = sum(len(idx) * int(self.lengths[idx].max()) for idx in plan)
        sizes = [len(idx) for idx in plan]
        return {
            "batches": len(plan),
            "examples": len(self.examples),
            "mean_batch_size": float(np.mean(sizes)),
            "max_batch_size": max(sizes),
            "tokens": real,
            "padded_tokens": padded,
            "padding_fraction": 1 - real / padded,
            "budget_used": padded / (len(plan) * self.max_tokens),
        }

    @property
    def padding_fraction(self) -> float:
        return self.stats()["padding_fraction"]


# ============================================================================ for notebook 03 and later


def pair_lengths(pairs: Sequence[tuple[str, str]], tok: Tokenizer | None = None) -> dict[str, np.ndarray]:
    """Lengths of the French and English sides, in tokens with ``tok``, else in words (for histograms)."""
    if tok is None:
        return {
            "fr": np.array([len(fr.split()) for fr, _ in pairs]),
            "en": np.array([len(en.split()) for _, en in pairs]),
        }
    return {
        "fr": np.array([len(x) for x in tok.encode_batch([fr for fr, _ in pairs])]),
        "en": np.array([len(x) for x in tok.encode_batch([en for _, en in pairs])]),
    }


@dataclass
class Prepared:
    tokenizer: Tokenizer
    splits: Splits
    train: list[Example]
    valid: list[Example]
    test: list[Example]
    reports: dict

    def describe(self) -> str:
        return "\n\n".join(str(r) for r in self.reports.values())


def prepare(
    source: str = "builtin",
    path=None,
    *,
    vocab_size: int = 8000,
    max_len: int = 64,
    limit: int | None = None,
    seed: int = 0,
    model_type: str = "unigram",
    tokenizer_dir: str | os.PathLike | None = None,
    clean: dict | None = None,
    split: dict | None = None,
    **load_kw,
) -> Prepared:
    """The whole pipeline in one call (load, clean, split, tokenizer on train, encode), with every report.

    Later notebooks use this so the data steps of notebook 03 are defined once.
    """
    pairs, load_report = load_pairs(source, path, limit=limit, seed=seed, **load_kw)
    pairs, clean_report = clean_pairs(pairs, **(clean or {}))
    splits = split_pairs(pairs, seed=seed, **(split or {}))
    tok = Tokenizer.train(splits.train, vocab_size=vocab_size, model_type=model_type, out_dir=tokenizer_dir, seed=seed)
    reports = {"load": load_report, "clean": clean_report, "split": splits.report}
    encoded = {}
    for name in ("train", "valid", "test"):
        encoded[name], reports[f"encode_{name}"] = encode_pairs(tok, getattr(splits, name), max_len)
    return Prepared(tok, splits, encoded["train"], encoded["valid"], encoded["test"], reports)
