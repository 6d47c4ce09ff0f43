"""The example format: one training sequence per pair (notebook 03, "Encoding" and "One training example").

    examples, report = encode_pairs(tok, pairs, max_len=64)   # over-long pairs dropped, and counted
    prompt_ids(tok, "Où es-tu ?")                             # what a translation starts from

One training sequence is ``<bos> French <sep> English <eos>``; the loss is taken on the English tokens and ``<eos>``
only (:func:`helpers.text.batches.collate` builds the labels from ``prefix_len``). At inference the model reads
``<bos> French <sep>`` and writes the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .sources import DataError
from .tokenizer import BOS_ID, EOS_ID, SEP_ID, Tokenizer


@dataclass
class Example:
    input_ids: list[int]  # <bos> French <sep> English <eos>
    prefix_len: int  # len(<bos> French <sep>): positions from here on are the target


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


def max_source_tokens(max_len: int) -> int:
    """The most French tokens ``translate`` reads: half the positions, less <bos> and <sep>; the rest is for the
    English. A longer source is cut, and the cut is counted (``evaluate``) and named (``translate``)."""
    return max(1, max_len // 2 - 2)


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


def pair_lengths(pairs: Sequence[tuple[str, str]], tok: Tokenizer | None = None) -> dict[str, np.ndarray]:
    """Lengths of the French and English sides, in tokens with ``tok``, else in words (the histograms that
    choose ``max_len``)."""
    if tok is None:
        return {
            "fr": np.array([len(fr.split()) for fr, _ in pairs]),
            "en": np.array([len(en.split()) for _, en in pairs]),
        }
    return {
        "fr": np.array([len(x) for x in tok.encode_batch([fr for fr, _ in pairs])]),
        "en": np.array([len(x) for x in tok.encode_batch([en for _, en in pairs])]),
    }
