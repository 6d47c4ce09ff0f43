"""Cleaning, splitting, and the whole data pipeline in one call (notebook 03 teaches it step by step).

pairs, load_report = sources.load_pairs("tatoeba")
pairs, clean_report = clean_pairs(pairs)          # normalise, filter, de-duplicate
splits = split_pairs(pairs)                       # no sentence leaks between splits
tok = Tokenizer.train(splits.train)               # on the TRAIN split only
...
stage = load_clean_split("fra.txt")              # load, clean, split: the one data stage of every run
prepared = prepare_data("fra.txt", cfg)           # and the tokenizer and batches, as `python -m helpers train` runs it
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

from .. import runtime

# the run's two test sets: their labels (a record's test_set) and files, named with the run folder's other files
from ..run_folder import IN_DISTRIBUTION, NEW_SENTENCES, RunFolder
from .batches import BucketBatcher, StaticBucketBatcher
from .encoding import encode_pairs, max_source_tokens
from .sources import DataError, file_sha256, load_path
from .testsets import NewSentenceDesign, NewSentenceReport, WordTable, describe_test_set, select_new_sentences
from .tokenizer import Tokenizer, normalise_text, tokenizer_for


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
    new_in_train: int = 0  # new-sentence pairs whose French or English is in train: must be 0
    new: NewSentenceReport | None = None

    def pretty(self) -> str:
        s = self.sizes
        return "\n".join(
            [
                "Split (grouped so that no French sentence and no English reference is in two splits)",
                f"  pairs {self.n_pairs:,} in {self.n_groups:,} groups; {self.groups_joined_by_english:,} groups "
                f"({self.pairs_kept_together:,} pairs) were kept together because French sentences share an English one",
                f"  train {s.get('train', 0):,} | valid {s.get('valid', 0):,} (asked {self.targets.get('valid', 0):,}) | "
                f"test {s.get('test', 0):,} (asked {self.targets.get('test', 0):,}) | new sentences {s.get('new', 0):,}",
                f"  checks: French sentences in two splits = {self.french_in_two_splits}, test references that are "
                f"training targets = {self.test_english_in_train}, valid references that are training targets = "
                f"{self.valid_english_in_train}, new-sentence pairs sharing a side with training = {self.new_in_train}",
            ]
            + ([f"  {self.new}"] if self.new and self.new.pairs else [])
        )

    __str__ = pretty


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
    test: list[tuple[str, str]]  # in-distribution: a random draw of groups
    report: SplitReport | None = None
    new: list[tuple[str, str]] = field(default_factory=list)  # new sentences (helpers.text.testsets), held out first

    def __iter__(self):  # train, valid, test = split_pairs(...)
        return iter((self.train, self.valid, self.test))


def split_pairs(
    pairs: Sequence[tuple[str, str]],
    *,
    valid: float = 0.05,
    test: float = 0.05,
    new: NewSentenceDesign | None = NewSentenceDesign(),  # noqa: B008 (frozen: safe as a default)
    seed: int = 0,
) -> Splits:
    """Train/valid/test (and new sentences) with no leak: pairs are grouped so that every French sentence, and
    every English one, lives in a single split.

    Tatoeba has many French variants of one English sentence ("Va !", "Bouge !" are both "Go."); grouping
    by French alone would put "Go." in test as a reference and in train as a target. So groups are the
    connected components of the graph linking each French sentence to its English ones. First the
    new-sentence set takes its groups (:func:`helpers.text.testsets.select_new_sentences`: rare words, long
    sentences; ``new=None`` for none), then the other groups are dealt to test, then valid, then train in a
    seeded random order.
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
    new_report = None
    if new is not None and new.share > 0:
        held, new_report = select_new_sentences(pairs, members, new, seed=seed)
        new_idx = [i for g in sorted(held) for i in members[g]]
        members = [idx for g, idx in enumerate(members) if g not in held]
    else:
        new_idx = []

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

    out["new"] = new_idx
    report = SplitReport(n_pairs=n, n_groups=len(groups), targets=targets, new=new_report)
    for idx in groups.values():
        if len({pairs[i][0] for i in idx}) > 1:
            report.groups_joined_by_english += 1
            report.pairs_kept_together += len(idx)
    result = {k: [pairs[i] for i in sorted(v)] for k, v in out.items()}
    report.sizes = {k: len(v) for k, v in result.items()}
    fr_sets = {k: {fr for fr, _ in v} for k, v in result.items()}
    en_train = {en for _, en in result["train"]}
    names = list(fr_sets)
    report.french_in_two_splits = len(
        set().union(*(fr_sets[a] & fr_sets[b] for k, a in enumerate(names) for b in names[k + 1 :]))
    )
    report.test_english_in_train = len({en for _, en in result["test"]} & en_train)
    report.valid_english_in_train = len({en for _, en in result["valid"]} & en_train)
    report.new_in_train = sum(fr in fr_sets["train"] or en in en_train for fr, en in result["new"])
    return Splits(result["train"], result["valid"], result["test"], report, new=result["new"])


# ============================================================================ the whole pipeline


def test_sets_of(splits: Splits) -> dict[str, list[tuple[str, str]]]:
    """A run's own test sets, the one that measures what a user meets first."""
    return {NEW_SENTENCES: splits.new, IN_DISTRIBUTION: splits.test}


def write_test_sets(test_sets: dict[str, list[tuple[str, str]]], out: str | Path) -> dict[str, Path]:
    """``out/test_new.tsv`` and ``out/test.tsv`` (French<TAB>English), rewritten every time: they follow from the
    data, the limit and the seed, and ``evaluate --checkpoint out`` scores a run on them."""
    paths = RunFolder(out).test_sets
    return {
        name: runtime.atomic_write_text("".join(f"{fr}\t{en}\n" for fr, en in pairs), paths[name])
        for name, pairs in test_sets.items()
    }


@dataclass
class PreparedData:
    tokenizer: Tokenizer
    splits: Splits
    train_batcher: BucketBatcher
    valid_batches: list  # of Batch, at most cfg.valid_sentences sentences
    info: dict  # what a checkpoint must agree with: source, file hash, columns, limit, sizes, tokenizer
    reports: dict  # load, clean, split, encode_train, encode_valid: what each step kept and dropped, and why
    words: WordTable | None = None  # the training split's French words (unseen-word slice, word-by-word baseline)

    @property
    def test_pairs(self) -> list[tuple[str, str]]:
        return self.splits.test

    @property
    def new_pairs(self) -> list[tuple[str, str]]:
        return self.splits.new

    def test_sets(self) -> dict[str, list[tuple[str, str]]]:
        return test_sets_of(self.splits)

    def summary(self) -> dict:
        return data_summary(self.reports)

    def describe(self) -> str:
        return format_data_summary(self.summary())


@dataclass
class SplitData:
    """The data stage before any tokenizer: the cleaned pairs split leak-free, and what each step kept and dropped."""

    splits: Splits
    reports: dict  # load, clean, split

    def test_sets(self) -> dict[str, list[tuple[str, str]]]:
        return test_sets_of(self.splits)

    def describe(self) -> str:
        return format_data_summary(data_summary(self.reports))


def load_clean_split(
    data: str, columns: Sequence[str] | None = None, *, limit: int | None = None, seed: int = 0
) -> SplitData:
    """Load ``data``, clean the pairs and split them leak-free: the one data stage of ``train``, ``finetune``,
    notebook 04 and the benchmarks, so that the same data, seed and limit give every model the same test sets.

    ``data`` is what ``--data`` names: "builtin", the Tatoeba file (recognised), or a TSV whose ``columns``
    are given in file order. Notebook 03 runs these steps one cell each.
    """
    pairs, load_report = load_path(data, columns, limit=limit, seed=seed)
    pairs, clean_report = clean_pairs(pairs)
    splits = split_pairs(pairs, seed=seed)
    return SplitData(splits, {"load": load_report, "clean": clean_report, "split": splits.report})


def batches_for(
    tokenizer: Tokenizer,
    splits: Splits,
    *,
    max_len: int,
    max_tokens: int,
    valid_sentences: int,
    parallel_pairs: int | None = None,
    seed: int = 0,
    static_step: int | None = None,
) -> tuple[BucketBatcher, list, dict]:
    """The training batcher (the first ``parallel_pairs`` training pairs, shuffled by ``seed``) and the validation
    batches (at most ``valid_sentences`` sentences), each batch at most ``max_tokens`` tokens, padding included,
    with what encoding to ``max_len`` dropped for each.

    ``static_step`` pads the training batches to a fixed set of shapes, lengths in multiples of that many tokens
    (:class:`helpers.text.batches.StaticBucketBatcher`), for a step compiled once per shape; ``None`` (the default)
    buckets them with as little padding as possible. The validation batches are the same either way."""
    parallel = parallel_subset(splits.train, parallel_pairs, seed)
    train_ex, enc_train = encode_pairs(tokenizer, parallel, max_len)
    valid_ex, enc_valid = encode_pairs(tokenizer, splits.valid[:valid_sentences], max_len)
    if static_step is not None:
        batcher = StaticBucketBatcher(train_ex, max_tokens, step=static_step, max_len=max_len, seed=seed)
    else:
        batcher = BucketBatcher(train_ex, max_tokens=max_tokens, shuffle=True, seed=seed)
    valid_batches = list(BucketBatcher(valid_ex, max_tokens=max_tokens, shuffle=False)) if valid_ex else []
    return batcher, valid_batches, {"encode_train": enc_train, "encode_valid": enc_valid}


def prepare_data(
    data: str,
    cfg,
    out_dir: str | Path | None = None,
    *,
    columns: Sequence[str] | None = None,
    seed: int = 0,
    limit: int | None = None,
    progress: bool = True,
    static_step: int | None = None,
    stderr: TextIO | None = None,
    write_tests: bool = False,
    reuse_tokenizer: bool | None = None,
) -> PreparedData:
    """The data stage of a run: :func:`load_clean_split`, then the tokenizer (trained on the training split, or
    reloaded from ``out_dir/tokenizer``) and the batches (:func:`batches_for`; ``static_step`` pads them to a fixed
    set of shapes, for a compiled step: ``train`` passes :func:`helpers.pipeline.static_step`). With ``stderr``, what
    every step read, kept and dropped is printed there (nothing goes unsaid); with ``write_tests``, the run's two
    test sets are written to ``out_dir`` (``train`` leaves it to rank 0 under torchrun).

    ``cfg`` is a :class:`helpers.training.config.TrainConfig`: its vocabulary size and tokenizer type, ``max_len``,
    ``max_tokens``, ``valid_sentences`` and ``parallel_pairs`` are read. The tokenizer is trained on the training
    split only and saved in the run folder, so a resumed run reads the very same vocabulary: ``reuse_tokenizer`` is
    the caller's decision (:func:`helpers.text.tokenizer.tokenizer_for`; ``train`` passes whether it resumes).
    """
    stage = load_clean_split(data, columns, limit=limit, seed=seed)
    splits = stage.splits
    tokenizer = tokenizer_for(splits.train, cfg, out_dir, seed=seed, progress=progress, reuse=reuse_tokenizer)
    batcher, valid_batches, encoded = batches_for(
        tokenizer,
        splits,
        max_len=cfg.max_len,
        max_tokens=cfg.max_tokens,
        valid_sentences=cfg.valid_sentences,
        parallel_pairs=cfg.parallel_pairs,
        seed=seed,
        static_step=static_step,
    )
    words = WordTable.from_pairs(splits.train)
    info = data_info(data, splits, tokenizer, cfg, columns=columns, limit=limit)
    reports = {
        **stage.reports,
        **encoded,
        "test_sets": {
            name: describe_test_set(test_pairs, words, tokenizer, max_source_tokens(cfg.max_len))
            for name, test_pairs in (("new", splits.new), ("test", splits.test))
        },
    }
    if out_dir is not None:
        words.save(RunFolder(out_dir).words)
    prepared = PreparedData(tokenizer, splits, batcher, valid_batches, info, reports, words)
    if stderr is not None:
        print(prepared.describe(), file=stderr)
    if write_tests and out_dir is not None:
        write_test_sets(prepared.test_sets(), out_dir)
    return prepared


def parallel_subset(train: Sequence[tuple[str, str]], n: int | None, seed: int = 0) -> list[tuple[str, str]]:
    """The first ``n`` training pairs in a seeded order (all of them when ``n`` is None): nested, so the
    1,000 pairs of a small run are among the 5,000 of a larger one. Asking for more than there are is refused."""
    if n is None:
        return list(train)
    if n > len(train):
        raise DataError(
            f"parallel_pairs={n:,} but the training split has only {len(train):,} pairs: ask for at most that, or None."
        )
    order = np.random.default_rng([seed, 7]).permutation(len(train))[:n]
    return [train[i] for i in sorted(order.tolist())]


def data_info(
    data: str, splits: Splits, tokenizer: Tokenizer | None, cfg, *, columns: Sequence[str] | None = None, limit=None
) -> dict:
    """What a checkpoint records about its data (and refuses to resume on other data): the source and its
    sha256, the columns, the sample size, the split sizes and, for our model, the tokenizer (``finetune``,
    whose model brings its own, passes ``tokenizer=None``)."""
    builtin = data == "builtin"
    info = {
        "source": "builtin" if builtin else str(Path(data).expanduser().resolve()),
        "sha256": "builtin" if builtin else file_sha256(Path(data).expanduser()),
        "columns": list(columns) if columns else None,
        "limit": limit,
        "pairs": {
            "train": len(splits.train),
            "valid": len(splits.valid),
            "test": len(splits.test),
            "new": len(splits.new),
        },
    }
    if tokenizer is not None:
        info["tokenizer"] = {"vocab_size": tokenizer.vocab_size, "type": cfg.tokenizer_type}
    return info


def data_summary(reports: dict) -> dict:
    """What every step read, kept and dropped, as plain numbers (``train_summary.json``, ``eval.json``).

    ``reports`` holds a ``"load"`` :class:`LoadReport` and, when present, ``"clean"``, ``"split"`` and
    ``"encode_<split>"`` reports.
    """
    load = reports["load"]
    out = {
        "source": load.source,
        "path": load.path,
        "lines_read": load.lines_read,
        "pairs_kept": load.kept,
        "skipped": {r: {"count": n, "first_line": load.first_line.get(r)} for r, n in load.skipped.items()},
        "notes": list(load.notes),
    }
    if "clean" in reports:
        clean = reports["clean"]
        out["removed_by_cleaning"] = {r: n for r, n in clean.removed.items() if n}
        out["pairs_after_cleaning"] = clean.n_out
    if "split" in reports:
        out["split"] = dict(reports["split"].sizes)
    if "test_sets" in reports:
        out["test_sets"] = reports["test_sets"]
    for name, rep in reports.items():
        if name.startswith("encode_"):
            out.setdefault("max_len", rep.max_len)
            out.setdefault("too_long_for_max_len", {})[name[len("encode_") :]] = rep.dropped_too_long
    return out


_TEST_SET_NAMES = {"new": "new-sentence", "test": "in-distribution"}


def format_data_summary(summary: dict) -> str:
    """The short block ``train`` and ``evaluate`` print: nothing the pipeline dropped goes unsaid."""
    where = summary["path"] or summary["source"]
    lines = [
        f"Data: {where}",
        f"  lines read {summary['lines_read']:>10,}",
        f"  pairs kept {summary['pairs_kept']:>10,}",
    ]
    skipped = summary["skipped"]
    lines.append(f"  skipped    {sum(v['count'] for v in skipped.values()):>10,}")
    for reason, v in sorted(skipped.items(), key=lambda kv: -kv[1]["count"]):
        first = f" (first at line {v['first_line']:,})" if v["first_line"] else ""
        lines.append(f"    {v['count']:>8,}  {reason}{first}")
    if "removed_by_cleaning" in summary:
        removed = summary["removed_by_cleaning"]
        lines.append(f"  removed by cleaning {sum(removed.values()):>,}" + ("" if removed else " (none)"))
        lines += [f"    {n:>8,}  {reason}" for reason, n in removed.items()]
    if "split" in summary:
        s = summary["split"]
        lines.append(
            f"  split: train {s['train']:,} | valid {s['valid']:,} | test {s['test']:,} | new sentences {s.get('new', 0):,}"
        )
    # One budget, in the same words wherever it is printed: the model reads max_len tokens in all, and the
    # source budget is the share of them a French source may use (helpers.text.encoding.max_source_tokens).
    max_len = summary.get("max_len")
    max_src = next((t["max_src_tokens"] for t in summary.get("test_sets", {}).values() if "max_src_tokens" in t), None)
    budget = []
    if max_len is not None:
        budget.append(f"the model reads {max_len} tokens in all (<bos> French <sep> English <eos>)")
    if max_src is not None:
        of = "of them" if max_len is not None else "tokens"
        budget.append(f"source budget: {max_src} {of}, the rest is for the English")
    if budget:
        lines.append("  " + "; ".join(budget))
    for name, t in summary.get("test_sets", {}).items():
        lines.append(
            f"  {_TEST_SET_NAMES.get(name, name)} test set: median {t['median_words']} words, {t['share_long']:.1%} above 15 words"
            + (f", {t['share_unseen_word']:.1%} with a word unseen in training" if "share_unseen_word" in t else "")
            + (
                f", {t['sources_too_long']:,} sources longer than the {t['max_src_tokens']}-token source budget (translated in pieces)"
                if "sources_too_long" in t
                else ""
            )
        )
    if "too_long_for_max_len" in summary:
        parts = ", ".join(f"{k} {n:,}" for k, n in summary["too_long_for_max_len"].items())
        lines.append(f"  pairs longer than the model's {max_len} tokens (left out): {parts}")
    return "\n".join(lines)
