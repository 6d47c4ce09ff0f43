"""Test sets that measure what a user meets, and the word facts every evaluation needs.

A run has two test sets of its own (why one is not enough is notebook 07's Question 7.2), and takes public ones by
name or path:

* **new sentences** (``test_new.tsv``): whole groups held out *before* the split, chosen to resemble newly
  written sentences: a quarter of them contain a French word that never occurs in training (every group
  holding that word is held out), 7 % are longer than 15 words, the rest are drawn at random;
* **in-distribution** (``test.tsv``): today's random, leak-free split of what is left;
* **out-of-domain**: any ``French<TAB>English`` file by path (TICO-19, newer Tatoeba sentences), or a
  public set by name (:data:`PUBLIC_TEST_SETS`, downloaded through ``datasets`` where there is network).

:class:`WordTable` holds the French words of the training pairs: it says which words of a test sentence
were never seen in training (a slice of every evaluation), and gives the word-by-word baseline.
"""

from __future__ import annotations

import random
import re
import statistics
import urllib.error
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..runtime import atomic_write_text
from .sources import (
    DataError,
    DownloadError,
    LoadReport,
    default_cache_dir,
    fetch,
    find_local_file,
    load_parallel,
    load_tsv,
)

WORD = re.compile(r"[^\W\d_]+")  # a run of letters: "l'homme" -> "l", "homme"; digits and punctuation are not words
LONG_WORDS = 15  # "long" source: more than this many words


def words(text: str) -> list[str]:
    """The lower-cased words of ``text`` (runs of letters), as every count in this module sees them."""
    return WORD.findall(text.lower())


# ============================================================================ the new-sentence set


@dataclass(frozen=True)
class NewSentenceDesign:
    """How the new-sentence set is drawn. Shares are of the set; ``share`` is of all pairs."""

    share: float = 0.02
    unseen_share: float = 0.25  # sentences holding a French word that training never sees
    long_share: float = 0.07  # sentences of more than LONG_WORDS words (newer Tatoeba: 7 %; the file: 1 %)
    rare_count: int = 2  # a word is "rare" when at most this many pairs of the file hold it
    max_group: int = 4  # never hold out a group of more pairs than this (paraphrase families stay in training)


@dataclass
class NewSentenceReport:
    design: dict = field(default_factory=dict)
    pairs: int = 0
    held_for_unseen_word: int = 0  # pairs holding the rare word they were taken for (all its groups taken)
    held_for_length: int = 0
    held_at_random: int = 0

    def pretty(self) -> str:
        return (
            f"New-sentence set: {self.pairs:,} pairs held out before the split ({self.held_for_unseen_word:,} for a "
            f"rare word, every group holding it; {self.held_for_length:,} for length > {LONG_WORDS} words; "
            f"{self.held_at_random:,} at random)"
        )

    __str__ = pretty


def _groups_holding(word: str, group: int, groups_of: dict[str, list[int]]) -> list[int]:
    """Every group holding ``word`` (``group`` among them): all go to the new set, or the word is not unseen."""
    return groups_of[word]


def select_new_sentences(
    pairs: Sequence[tuple[str, str]],
    groups: Sequence[Sequence[int]],
    design: NewSentenceDesign,
    seed: int = 0,
) -> tuple[set[int], NewSentenceReport]:
    """Indices of whole ``groups`` (lists of pair indices, as :func:`helpers.text.data.split_pairs` builds them) to
    hold out as new sentences.

    Three passes over the groups in a seeded order: (1) a group with a rare French word is taken together with
    every other group holding that word, so the word is truly unseen in training, until ``unseen_share`` of the
    set is reached; (2) groups with a source longer than ``LONG_WORDS`` words, until ``long_share``; (3) any
    group, until the set has ``share`` of all pairs. Groups larger than ``max_group`` are never taken.
    """
    n_new = round(design.share * len(pairs))
    report = NewSentenceReport(design=asdict(design))
    if n_new == 0:
        return set(), report
    rng = random.Random(f"new-sentences-{seed}")
    counts = Counter(w for fr, _ in pairs for w in set(words(fr)))
    rare_of = [{w for i in idx for w in words(pairs[i][0]) if counts[w] <= design.rare_count} for idx in groups]
    groups_of: dict[str, list[int]] = {}
    for g, ws in enumerate(rare_of):
        for w in ws:
            groups_of.setdefault(w, []).append(g)
    order = list(range(len(groups)))
    rng.shuffle(order)
    small = [len(idx) <= design.max_group for idx in groups]
    taken: set[int] = set()

    def size(gs) -> int:
        return sum(len(groups[g]) for g in gs)

    for g in order:  # (1) rare words, held out everywhere they occur
        if report.held_for_unseen_word >= design.unseen_share * n_new:
            break
        if g in taken or not rare_of[g] or not small[g]:
            continue
        word = rng.choice(sorted(rare_of[g]))
        family = [h for h in _groups_holding(word, g, groups_of) if h not in taken]
        if not all(small[h] for h in family):
            continue
        taken.update(family)
        report.held_for_unseen_word += sum(word in words(pairs[i][0]) for h in family for i in groups[h])
    long_target = design.long_share * n_new
    for g in order:  # (2) long sentences
        if report.held_for_length >= long_target:
            break
        if g not in taken and small[g] and max(len(pairs[i][0].split()) for i in groups[g]) > LONG_WORDS:
            taken.add(g)
            report.held_for_length += len(groups[g])
    for g in order:  # (3) the rest at random
        if size(taken) >= n_new:
            break
        if g not in taken and small[g]:
            taken.add(g)
            report.held_at_random += len(groups[g])
    report.pairs = size(taken)
    report.held_at_random += report.pairs - report.held_at_random - report.held_for_unseen_word - report.held_for_length
    return taken, report


def describe_test_set(pairs: Sequence[tuple[str, str]], words_table: WordTable | None = None, tokenizer=None,
                      max_src: int | None = None) -> dict:  # fmt: skip
    """What a test set looks like: size, source length in words (median, share above ``LONG_WORDS``), the share
    holding a French word unseen in training (needs ``words_table``), and how many sources do not fit the model's
    ``max_src`` tokens (needs ``tokenizer``)."""
    lengths = [len(fr.split()) for fr, _ in pairs]
    out = {
        "pairs": len(pairs),
        "median_words": statistics.median(lengths) if lengths else 0,
        "share_long": round(sum(n > LONG_WORDS for n in lengths) / max(len(pairs), 1), 4),
    }
    if words_table is not None:
        out["share_unseen_word"] = round(sum(bool(words_table.unseen(fr)) for fr, _ in pairs) / max(len(pairs), 1), 4)
    if tokenizer is not None and max_src is not None:
        too_long = sum(len(tokenizer.encode(fr)) > max_src for fr, _ in pairs)
        out["max_src_tokens"] = max_src
        out["sources_too_long"] = too_long
        out["share_too_long"] = round(too_long / max(len(pairs), 1), 4)
    return out


# ============================================================================ training words and the word-by-word baseline


_CLOSE_UP = re.compile(r" ([.,!?;:)»])")
_TOKEN = re.compile(r"[^\W\d_]+|\d+|[^\w\s']")  # words, numbers, punctuation (apostrophes dropped: "l'" -> "l")


class WordTable:
    """The French words of the training pairs, each with its count and the English word it goes with best.

    "Goes with best" is the English word with the highest Dice score, 2·c(f, e) / (c(f) + c(e)), over the
    training pairs: raw co-occurrence would pair almost every French word with "I", "the" or "you", which
    occur in most sentences. This is the dictionary of the word-by-word baseline.
    """

    def __init__(self, counts: dict[str, int], english: dict[str, str]):
        self.counts = counts
        self.english = english

    @classmethod
    def from_pairs(cls, pairs: Sequence[tuple[str, str]]) -> WordTable:
        fr_vocab: dict[str, int] = {}
        en_vocab: dict[str, int] = {}
        f_ids, e_ids = [], []
        for fr, en in pairs:
            fs = {fr_vocab.setdefault(w, len(fr_vocab)) for w in words(fr)}
            es = {en_vocab.setdefault(w, len(en_vocab)) for w in _TOKEN.findall(en) if w[0].isalpha()}
            for f in fs:
                f_ids.extend([f] * len(es))
                e_ids.extend(es)
        fr_words = list(fr_vocab)
        en_words = list(en_vocab)
        c_f = np.zeros(len(fr_words), dtype=np.int64)
        c_e = np.zeros(max(len(en_words), 1), dtype=np.int64)
        for fr, en in pairs:
            for w in set(words(fr)):
                c_f[fr_vocab[w]] += 1
            for w in {w for w in _TOKEN.findall(en) if w[0].isalpha()}:
                c_e[en_vocab[w]] += 1
        english: dict[str, str] = {}
        if f_ids:
            key = np.asarray(f_ids, dtype=np.int64) * len(en_words) + np.asarray(e_ids, dtype=np.int64)
            uniq, together = np.unique(key, return_counts=True)
            f, e = uniq // len(en_words), uniq % len(en_words)
            dice = 2 * together / (c_f[f] + c_e[e])
            order = np.lexsort((-together, -dice, f))  # per French word: best Dice first, ties by count
            first = np.ones(len(order), dtype=bool)
            first[1:] = f[order][1:] != f[order][:-1]
            for k in order[first]:
                english[fr_words[f[k]]] = en_words[e[k]]
        return cls({w: int(c_f[i]) for w, i in fr_vocab.items()}, english)

    def __len__(self) -> int:
        return len(self.counts)

    def __contains__(self, word: str) -> bool:
        return word in self.counts

    def unseen(self, text: str) -> list[str]:
        """The words of a French ``text`` that no training pair holds."""
        return [w for w in words(text) if w not in self.counts]

    def word_by_word(self, text: str) -> str:
        """Each French word replaced by its English word; numbers, punctuation and unseen words copied."""
        out = []
        for tok in _TOKEN.findall(text):
            low = tok.lower()
            out.append(self.english.get(low, tok) if tok[0].isalpha() else tok)
        return _CLOSE_UP.sub(r"\1", " ".join(out))  # "sleeps ." -> "sleeps.": written, not tokenized, English

    def save(self, path: str | Path) -> Path:
        rows = sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))
        text = "".join(f"{w}\t{n}\t{self.english.get(w, '')}\n" for w, n in rows)
        return atomic_write_text("french_word\ttraining_pairs\tenglish_word\n" + text, path)

    @classmethod
    def load(cls, path: str | Path) -> WordTable:
        counts, english = {}, {}
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        if not lines or lines[0] != "french_word\ttraining_pairs\tenglish_word":
            raise DataError(f"{path} is not a word table written by WordTable.save (its header is missing).")
        for line in lines[1:]:
            w, n, e = line.split("\t")
            counts[w] = int(n)
            if e:
                english[w] = e
        return cls(counts, english)


def word_by_word_baseline(words_table: WordTable, sources: Sequence[str]) -> list[str]:
    return [words_table.word_by_word(s) for s in sources]


# ============================================================================ public test sets


# name -> (Hugging Face dataset, configuration, split, what it is). Out of domain for a Tatoeba model.
PUBLIC_TEST_SETS = {
    "wmt14": ("wmt/wmt14", "fr-en", "test", "newstest2014, news text (out of domain)"),
    "wmt14-dev": ("wmt/wmt14", "fr-en", "validation", "newstest2013, news text (out of domain)"),
}


def load_public(name: str, *, data_files: str | Path | None = None):
    """``(pairs, LoadReport)`` of the public test set ``name``, through ``datasets`` (network, or its cache).

    ``data_files`` reads a local Parquet file of the same layout instead (a ``translation`` column of
    ``{"fr": ..., "en": ...}``), which is how the tests run this code offline. Rows with an empty side are
    skipped and counted in the report, like a loader's bad lines.
    """
    if name not in PUBLIC_TEST_SETS:
        raise DataError(f"Unknown public test set {name!r}; known: {sorted(PUBLIC_TEST_SETS)}, or give a file path.")
    import datasets  # slow start-up (0.6 s)

    repo, config, split, what = PUBLIC_TEST_SETS[name]
    try:
        if data_files is not None:
            ds = datasets.load_dataset("parquet", data_files=str(data_files), split="train")
        else:
            ds = datasets.load_dataset(repo, config, split=split)
    except (ConnectionError, OSError) as err:
        raise DataError(
            f"Could not load {name} ({repo}, {config}, {split}): {err}. It needs the network the first time; "
            "offline, pass a French<TAB>English file by path instead."
        ) from err
    if "translation" not in ds.column_names:
        raise DataError(f"{name}: expected a 'translation' column, found {ds.column_names}.")
    report = LoadReport(source=name, path=str(data_files) if data_files is not None else f"{repo} {config} {split}")
    report.notes.append(what)
    pairs = []
    for row_no, row in enumerate(ds["translation"], start=1):
        report.lines_read += 1
        fr, en = (row.get("fr") or "").strip(), (row.get("en") or "").strip()
        if not fr or not en:
            report.skip("empty French or English side", row_no)
            continue
        pairs.append((fr, en))
    report.kept = len(pairs)
    return pairs, report


# ============================================================================ newer Tatoeba sentences

# Sentences people typed into Tatoeba after the training file was made: the closest thing to what a user types.
# The Tatoeba Translation Challenge's fra-eng test set (v2021-08-07, as packaged by Helsinki-NLP/OPUS-MT-testsets,
# pinned to one commit), keeping the pairs whose French and English both never occur in the training file.
NEWER = "tatoeba-newer-dev"
NEWER_LABEL = "newer Tatoeba sentences (people typed; not in the training file)"
NEWER_DEV_RELATIVE = "tatoeba-newer-fr-en/dev.fr-en.tsv"  # the development half, beside the repository
CHALLENGE_BASE_URL = (
    "https://raw.githubusercontent.com/Helsinki-NLP/OPUS-MT-testsets/"
    "c0247d60f9221255bdb11fbfe73d5b33336278ea/testsets/fra-eng/tatoeba-test-v2021-08-07"
)  # + ".fra" and ".eng": line i of one translates line i of the other


def find_newer_dev() -> Path | None:
    """The development half of the newer sentences on this machine (``$TATOEBA_NEWER_DEV``, or
    ``../shared/data/tatoeba-newer-fr-en/dev.fr-en.tsv`` beside the repository), or None."""
    return find_local_file("TATOEBA_NEWER_DEV", NEWER_DEV_RELATIVE)


def newer_pairs(candidates: Sequence[tuple[str, str]], training_pairs: Sequence[tuple[str, str]]):
    """``(kept, counts)``: the candidate pairs whose French and whose English both never occur in ``training_pairs``.

    Compared after stripping spaces, as whole sentences; a pair given twice is kept once. ``counts`` says how
    many were dropped for each reason, so nothing leaves silently.
    """
    fr_seen = {fr.strip() for fr, _ in training_pairs}
    en_seen = {en.strip() for _, en in training_pairs}
    kept, seen, counts = [], set(), Counter()
    for fr, en in candidates:
        fr, en = fr.strip(), en.strip()
        if fr in fr_seen:
            counts["French sentence in the training file"] += 1
        elif en in en_seen:
            counts["English sentence in the training file"] += 1
        elif (fr, en) in seen:
            counts["the same pair again"] += 1
        else:
            seen.add((fr, en))
            kept.append((fr, en))
    return kept, dict(counts)


def fetch_newer_sentences(
    training_pairs: Sequence[tuple[str, str]],
    cache_dir: str | Path | None = None,
    base_url: str = CHALLENGE_BASE_URL,
    *,
    force: bool = False,
):
    """``(pairs, LoadReport)``: the newer Tatoeba sentences, downloaded (once, into the cache) and filtered
    against ``training_pairs`` with :func:`newer_pairs`, as the development file was built.

    Use it where the development file is not on the machine (Colab): it holds both halves, the one we tune on and
    the one kept to score the project's models, so a learner's score on it is an honest test, never a choice.
    ``base_url`` may be a ``file://`` address (the tests use one). Network errors say what to do.
    """
    folder = (Path(cache_dir).expanduser() if cache_dir else default_cache_dir()) / "tatoeba-newer-fr-en"
    files = {side: folder / f"tatoeba-test-v2021-08-07.{side}" for side in ("fra", "eng")}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for side, path in files.items():
            if force or not path.is_file():
                part = path.with_suffix(path.suffix + ".part")
                fetch(f"{base_url}.{side}", part)
                part.replace(path)
    except (OSError, urllib.error.URLError, ValueError) as err:
        raise DownloadError(
            f"Could not download the Tatoeba Challenge test set ({base_url}.fra/.eng): {err}. It needs the network once "
            f"(then it is cached in {folder}). Offline, pass a French<TAB>English file by path instead, e.g. "
            f"../shared/data/{NEWER_DEV_RELATIVE}."
        ) from err
    candidates, report = load_parallel(files["fra"], files["eng"])
    kept, counts = newer_pairs(candidates, training_pairs)
    for reason, n in counts.items():
        report.skipped[reason] = report.skipped.get(reason, 0) + n
    report.kept = len(kept)
    report.source = NEWER
    report.notes.append(f"{NEWER_LABEL}: both halves (a test: never choose anything on it)")
    if not kept:
        raise DataError(
            f"None of the {len(candidates):,} downloaded pairs is new to the training file: was the training file itself "
            "built from the same test set? Pass another test file by path."
        )
    return kept, report


def load_newer_sentences(training_pairs: Sequence[tuple[str, str]] | None = None, cache_dir=None):
    """``(pairs, LoadReport, label)``: the development file when it is on this machine, else the download.

    The download needs ``training_pairs`` (the pairs the model was trained on: what "newer" is measured against);
    without them and without the file, a :class:`DataError` says what to do.
    """
    path = find_newer_dev()
    if path is not None:
        pairs, report = load_tsv(path, ("fr", "en"))
        return pairs, report, f"{NEWER} ({NEWER_LABEL}, the development half)"
    if training_pairs is None:
        raise DataError(
            f"The newer-sentence development file is not on this machine (looked for $TATOEBA_NEWER_DEV and "
            f"../shared/data/{NEWER_DEV_RELATIVE}); downloading it needs the training pairs to filter against. "
            "Pass the file by path, or call fetch_newer_sentences(training_pairs)."
        )
    pairs, report = fetch_newer_sentences(training_pairs, cache_dir)
    return pairs, report, f"{NEWER} ({NEWER_LABEL}, downloaded: both halves)"


def newer_sentences_for(data: str, training_pairs, *, cache_dir=None, download: bool = True, limit: int | None = None):
    """``(pairs or None, label, note)`` for a notebook: the newer sentences when they can be had, else None and a
    note saying why and what would give them. ``data`` is what the model trains on (``"builtin"`` has no newer
    sentences to download against); ``download=False`` (quick mode) never touches the network; ``limit`` keeps
    the first pairs only (quick mode scores a sample)."""
    path = find_newer_dev()
    if path is None and (data == "builtin" or not download):
        why = "the model trains on the built-in corpus" if data == "builtin" else "quick mode does not download"
        return (
            None,
            NEWER_LABEL,
            (
                f"Newer sentences: not scored ({why}, and the development file is not on this machine: set "
                f"TATOEBA_NEWER_DEV to it, or run in full mode on the Tatoeba file to download them)."
            ),
        )
    try:
        pairs, report, label = load_newer_sentences(None if path else training_pairs, cache_dir)
    except (DownloadError, DataError) as err:
        return None, NEWER_LABEL, f"Newer sentences: not scored: {err}"
    shown = pairs if limit is None else pairs[:limit]
    sample = "" if len(shown) == len(pairs) else f", the first {len(shown):,} scored here"
    return shown, label, f"Newer sentences: {len(pairs):,} pairs from {report.path}{sample}."
