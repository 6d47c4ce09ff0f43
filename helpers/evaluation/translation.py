"""Translating sentences with a model: the :class:`Translator` interface evaluation asks of every model.

``translate(sources, beams)`` gives English for each French source, in order. Our model and its tokenizer provide it
as a :class:`ScratchTranslator` (decoding by :func:`translate`: batches of similar length, the key/value cache, long
sources split where they can be and translated in pieces), a pretrained Hugging Face model as a
:class:`helpers.hf.translator.HFTranslator`. :func:`translate_lines` is ``python -m helpers translate``'s loop, with
its warnings; :mod:`helpers.evaluation.evaluate` scores what these return.
"""

from __future__ import annotations

import re
import sys
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, TextIO

import torch

from ..progress import progress_bar
from ..text.encoding import max_source_tokens


def max_new_tokens_for(prefix_len: int, max_len: int) -> int:
    """Room for the translation: about twice the source plus a margin, never past ``max_len``."""
    src_len = prefix_len - 2
    return max(1, min(2 * src_len + 10, max_len - prefix_len))


@dataclass
class TranslateReport:
    sentences: int = 0
    empty: int = 0
    truncated: list[tuple[int, int, int]] = field(default_factory=list)  # (line number from 1, tokens, kept)
    split: list[tuple[int, int, int]] = field(default_factory=list)  # (line number from 1, tokens, pieces)
    seconds: float = 0.0


# Where a source too long for the model is split: after a sentence's end, then after a clause mark, then between
# words. Every piece is translated, in order, and the translations joined: nothing is cut away.
_SPLITS = (re.compile(r"(?<=[.!?…])\s+"), re.compile(r"(?<=[,;:])\s+"), re.compile(r"\s+"))


def split_to_fit(text: str, encode, max_src: int) -> list[str]:
    """``text`` as consecutive pieces of at most ``max_src`` tokens each, cut at sentence ends, then at commas,
    semicolons and colons, then between words; neighbours are merged back while they fit, so the pieces are as
    long as the budget allows. A single word longer than the budget stays one piece (then it is cut, and counted).
    """
    if len(encode(text)) <= max_src:
        return [text]
    for pattern in _SPLITS:
        parts = [p for p in pattern.split(text) if p]
        if len(parts) < 2:
            continue
        pieces, current = [], ""
        for part in parts:
            joined = f"{current} {part}" if current else part
            if current and len(encode(joined)) > max_src:
                pieces.append(current)
                current = part
            else:
                current = joined
        pieces.append(current)
        return [q for piece in pieces for q in split_to_fit(piece, encode, max_src)]
    return [text]


def sources_to_decode(sources: list[str], encode, max_src: int, report: TranslateReport) -> list[tuple[int, str, list]]:
    """``(index, text, ids)`` for each source to translate, ids cut to ``max_src``: the contract every translator
    keeps (ours, and :class:`helpers.hf.translator.HFTranslator`). Blank sources are counted in ``report.empty`` (their
    translation is blank), cut ones in ``report.truncated`` as (line number from 1, tokens, kept)."""
    todo = []
    for i, text in enumerate(sources):
        text = (text or "").strip()
        if not text:
            report.empty += 1
            continue
        ids = encode(text)
        if len(ids) > max_src:
            report.truncated.append((i + 1, len(ids), max_src))
            ids = ids[:max_src]
        todo.append((i, text, ids))
    return todo


def translate(
    model: torch.nn.Module,
    tokenizer,
    sources: list[str],
    beams: int = 1,
    batch_size: int = 64,
    use_cache: bool = True,
    length_penalty: float = 1.0,
    report: TranslateReport | None = None,
    split_long: bool = True,
) -> list[str]:
    """Translate French sentences; the output list matches ``sources`` line for line.

    An empty (or blank) source gives an empty translation without calling the model. A source too long
    for the model (more than half of ``max_len``: the rest is for the translation) is split into pieces that fit
    (:func:`split_to_fit`), each translated and the translations joined; the split is recorded in ``report.split``,
    and a single word still too long is cut and recorded in ``report.truncated`` (the caller decides how to warn).
    ``split_long=False`` cuts instead (how long sources were handled before; benchmarks compare the two).
    Characters the tokenizer has never seen become its unknown token. Sentences are decoded in batches of similar length.
    """
    report = report if report is not None else TranslateReport()
    t0 = time.perf_counter()
    max_len = model.config.max_len
    max_src = max_source_tokens(max_len)
    # a long source becomes pieces that fit (split_to_fit); each is translated, and the translations joined
    pieces, owner = [], []
    for i, text in enumerate(sources):
        text = (text or "").strip()
        parts = split_to_fit(text, tokenizer.encode, max_src) if text and split_long else [text]
        if len(parts) > 1:
            report.split.append((i + 1, len(tokenizer.encode(text)), len(parts)))
        pieces += parts
        owner += [i] * len(parts)
    piece_report = TranslateReport()
    planned = sources_to_decode(pieces, tokenizer.encode, max_src, piece_report)
    report.empty += sum(1 for s in sources if not (s or "").strip())
    report.truncated += [(owner[n - 1] + 1, tokens, kept) for n, tokens, kept in piece_report.truncated]
    piece_out = [""] * len(pieces)
    todo = [(i, [tokenizer.bos_id, *ids, tokenizer.sep_id]) for i, _, ids in planned]
    todo.sort(key=lambda item: len(item[1]))  # similar lengths together: less padding per batch
    starts = range(0, len(todo), batch_size)
    if len(todo) >= 500:  # beam search over a test set takes minutes on a CPU: show that it moves
        starts = progress_bar(iterable=starts, desc=f"translating {len(todo):,} sentences", unit="batch", leave=False)
    for start in starts:
        chunk = todo[start : start + batch_size]
        prefixes = [p for _, p in chunk]
        budgets = [max_new_tokens_for(len(p), max_len) for p in prefixes]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # budgets already respect max_len
            new = model.generate(
                prefixes,
                budgets,
                eos_id=tokenizer.eos_id,
                beams=beams,
                use_cache=use_cache,
                length_penalty=length_penalty,
            )
        for (i, _), ids in zip(chunk, new):
            piece_out[i] = tokenizer.decode(ids)
    joined: list[list[str]] = [[] for _ in sources]
    for i, text in zip(owner, piece_out):
        if text:
            joined[i].append(text)
    outputs = [" ".join(parts) for parts in joined]
    report.sentences += len(sources)
    report.seconds += time.perf_counter() - t0
    return outputs


class Translator(Protocol):
    """What evaluation asks of a model: English for each French source, in order (the output list matches
    ``sources`` line for line; a blank source gives a blank translation), greedy (``beams=1``) or beam search, long
    sources recorded in ``report`` (``truncated``, ``split``, ``empty``, ``seconds``). :class:`ScratchTranslator`
    (our model) and :class:`helpers.hf.translator.HFTranslator` (a pretrained one) implement it."""

    def translate(
        self,
        sources: list[str],
        beams: int = 1,
        *,
        batch_size: int = ...,
        length_penalty: float = 1.0,
        report: TranslateReport | None = None,
    ) -> list[str]: ...

    def source_budget(self) -> str:
        """How much of a source the model reads, in words, for the warnings about long sources."""
        ...


@dataclass
class ScratchTranslator:
    """Our model (:class:`helpers.nn.model.DecoderOnlyTransformer`, or anything with its ``config.max_len`` and
    ``generate``) and its tokenizer as a :class:`Translator`: decoding by :func:`translate`."""

    model: torch.nn.Module
    tokenizer: object  # helpers.text.tokenizer.Tokenizer

    def translate(
        self,
        sources: list[str],
        beams: int = 1,
        *,
        batch_size: int = 64,
        length_penalty: float = 1.0,
        report: TranslateReport | None = None,
        use_cache: bool = True,
        split_long: bool = True,
    ) -> list[str]:
        options = dict(use_cache=use_cache, length_penalty=length_penalty, report=report, split_long=split_long)
        return translate(self.model, self.tokenizer, sources, beams=beams, batch_size=batch_size, **options)

    def source_budget(self) -> str:
        max_len = self.model.config.max_len
        return (
            f"source budget: {max_source_tokens(max_len)} of the model's {max_len} tokens, the rest is for the English"
        )


def translate_lines(
    translator: Translator, lines: Iterable[str], beams: int = 1, err: TextIO | None = None, batch_size: int = 64
) -> list[str]:
    """``translator.translate`` for lines of text, warning on standard error about every long line and the total."""
    err = err if err is not None else sys.stderr
    lines = [line.rstrip("\r\n") for line in lines]
    report = TranslateReport()
    out = translator.translate(lines, beams=beams, batch_size=batch_size, report=report)
    limit = translator.source_budget()  # ours: the same words as the data summary (text.data.format_data_summary)
    for number, n, parts in report.split:
        print(f"note: line {number} has {n} tokens; translated in {parts} pieces, split at sentence ends, "
              f"commas or words ({limit}).", file=err)  # fmt: skip
    for number, n, kept in report.truncated:
        print(f"warning: line {number} has {n} tokens; kept the first {kept} ({limit}).", file=err)
    if report.truncated:
        print(
            f"warning: {len(report.truncated)} of {len(lines)} lines were truncated; split long sentences to translate them whole.",
            file=err,
        )
    return out
