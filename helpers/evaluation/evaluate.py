"""Translating and scoring: decoding with the key/value cache, sacreBLEU BLEU and chrF, baselines.

Notebook 03 calls :func:`translate`, :func:`score` and :func:`evaluate_pairs`; ``python -m helpers
translate`` and ``evaluate`` (``helpers.cli``) call the same functions. Every metrics file has the
layout of :func:`metrics_record`.

Evaluation asks one thing of a model, the :class:`Translator` interface: ``translate(sources, beams)``, English for
each French source, in order. Our model and its tokenizer provide it as a :class:`ScratchTranslator` (decoding by
:func:`translate`), a pretrained Hugging Face model as a :class:`helpers.hf.translator.HFTranslator`.

Scores are computed by sacreBLEU on detokenized text (what the tokenizer's ``decode`` returns),
with its default settings, and printed with the signature that says exactly how they were
computed, so they can be compared with published numbers.
"""

from __future__ import annotations

import json
import re
import sys
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TextIO

import numpy as np
import torch

from ..text.encoding import max_source_tokens
from ..training import checkpoint as ckpt_lib

DEFAULT_LENGTH_BUCKETS = (5, 10, 15, 25)  # source words: 1-5, 6-10, 11-15, 16-25, 26+
DEFAULT_BEAMS = 4  # evaluate's decoding: beam 4 gained 1-2 BLEU over greedy on every test set (RESULTS.md)


# ----------------------------------------------------------------------------------------------
# decoding


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
    for start in range(0, len(todo), batch_size):
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


# ----------------------------------------------------------------------------------------------
# scores


def score(hypotheses: list[str], references: list[str]) -> dict:
    """Corpus BLEU and chrF (sacreBLEU defaults) with their signatures."""
    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses for {len(references)} references: they must pair up line by line."
        )
    if not references:
        raise ValueError("Nothing to score: the test set is empty.")
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": round(b.score, 2),
        "chrf": round(c.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "bleu_detail": str(b),
        "n": len(references),
    }


def copy_baseline(sources: list[str], references: list[str]) -> dict:
    """The score of "translating" by copying the French unchanged: names, numbers and cognates already overlap.

    This is the floor a model has to beat, like predicting the most common answer for everyone.
    """
    return score(list(sources), references)


def _bucket_name(k: int, edges: tuple[int, ...]) -> str:
    lo = 1 if k == 0 else edges[k - 1] + 1
    return f"{lo}-{edges[k]}" if k < len(edges) else f"{edges[-1] + 1}+"


def slices(
    sources: list[str],
    hypotheses: list[str],
    references: list[str],
    *,
    words=None,
    buckets: tuple[int, ...] = DEFAULT_LENGTH_BUCKETS,
) -> dict[str, list[dict]]:
    """BLEU and chrF on parts of a test set: ``{"length": [...], "unseen_word": [...]}``.

    ``length`` cuts by source length in words (1-5, 6-10, 11-15, 16-25, 26+ by default); ``unseen_word`` splits
    the sentences holding a French word that no training pair holds from the others (needs ``words``, a
    :class:`helpers.text.testsets.WordTable`; without it the list is empty). Each row is ``{"slice", "n", "bleu",
    "chrf"}``; empty slices are left out, and the rows of each list cover the whole set.
    """
    from sacrebleu.metrics import BLEU, CHRF

    def row(name: str, idx: list[int]) -> dict:
        hyp, ref = [hypotheses[i] for i in idx], [[references[i] for i in idx]]
        return {
            "slice": name,
            "n": len(idx),
            "bleu": round(BLEU().corpus_score(hyp, ref).score, 2),
            "chrf": round(CHRF().corpus_score(hyp, ref).score, 2),
        }

    edges = tuple(buckets)
    by_length: dict[int, list[int]] = {}
    for i, src in enumerate(sources):
        n = len(src.split())
        by_length.setdefault(next((j for j, edge in enumerate(edges) if n <= edge), len(edges)), []).append(i)
    out = {"length": [row(_bucket_name(k, edges), by_length[k]) for k in sorted(by_length)], "unseen_word": []}
    if words is not None:
        flags = [bool(words.unseen(src)) for src in sources]
        for name, flag in (("with an unseen word", True), ("all words seen in training", False)):
            idx = [i for i, f in enumerate(flags) if f is flag]
            if idx:
                out["unseen_word"].append(row(name, idx))
    return out


def sample_table(
    sources: list[str], references: list[str], hypotheses: list[str], n: int = 10, seed: int = 0
) -> list[dict]:
    """``n`` random rows of source, reference and ours (fixed seed, so the same rows each run)."""
    import random

    idx = sorted(random.Random(seed).sample(range(len(sources)), min(n, len(sources))))
    return [{"source": sources[i], "reference": references[i], "ours": hypotheses[i]} for i in idx]


def format_table(rows: list[dict], width: int = 60) -> str:
    """A plain-text table of :func:`sample_table` rows (long cells cut with an ellipsis)."""
    if not rows:
        return "(no rows)"
    keys = list(rows[0])
    cut = lambda s: s if len(s) <= width else s[: width - 1] + "…"  # noqa: E731
    widths = {k: max(len(k), *(len(cut(str(r[k]))) for r in rows)) for k in keys}
    lines = [" | ".join(k.ljust(widths[k]) for k in keys), "-+-".join("-" * widths[k] for k in keys)]
    lines += [" | ".join(cut(str(r[k])).ljust(widths[k]) for k in keys) for r in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# one evaluation, one metrics layout: notebook 03, `python -m helpers evaluate` and notebook 04 share them

METRICS_SCHEMA = "tbb-metrics/1"
EVALUATION_KEYS = (
    "test_set", "n", "decoding", "beams", "bleu", "chrf", "bleu_signature", "chrf_signature", "copy_baseline",
    "word_baseline", "slices", "truncated", "empty_outputs", "seconds", "sentences_per_s", "samples",
)  # fmt: skip


def count_empty_outputs(sources: list[str], hypotheses: list[str]) -> int:
    """Translations that are empty (or blank) although their source is not: a model trained for a few steps ends
    most sentences at once, and BLEU alone (0.00) does not say so."""
    return sum(1 for src, hyp in zip(sources, hypotheses) if (src or "").strip() and not hyp.strip())


def mostly_empty(ev: dict) -> bool:
    """More than half the translations of an evaluation are empty."""
    return 2 * ev["empty_outputs"] > ev["n"]


def evaluate_pairs(
    translator: Translator,
    pairs: list[tuple[str, str]],
    *,
    test_set: str,
    words=None,
    beams: int = 1,
    length_penalty: float = 1.0,
    batch_size: int = 64,
    samples: int = 10,
) -> tuple[dict, list[str]]:
    """Translate the French of ``pairs``, score against the English; returns ``(evaluation, translations)``.

    ``translator`` is any :class:`Translator`: our model as a :class:`ScratchTranslator`, a pretrained one as a
    :class:`helpers.hf.translator.HFTranslator` (notebook 04): every model is scored by this one function.

    The evaluation names its ``test_set`` and holds BLEU, chrF, their signatures, two baselines (copy the
    source; word by word, which needs ``words``, the run's :class:`helpers.text.testsets.WordTable`), the
    :func:`slices` by length and by unseen word, how many sources were cut to fit, how many translations came
    out empty (``empty_outputs``, :func:`count_empty_outputs`), the decoding speed and sample rows
    (``EVALUATION_KEYS``).
    """
    if not pairs:
        raise ValueError(f"No test pairs to evaluate in {test_set!r}.")
    sources = [fr for fr, _ in pairs]
    references = [en for _, en in pairs]
    report = TranslateReport()
    hyps = translator.translate(
        sources, beams=beams, batch_size=batch_size, length_penalty=length_penalty, report=report
    )
    base = copy_baseline(sources, references)
    word_base = None
    if words is not None:
        from ..text.testsets import word_by_word_baseline

        wb = score(word_by_word_baseline(words, sources), references)
        word_base = {"bleu": wb["bleu"], "chrf": wb["chrf"]}
    result = {
        "test_set": test_set,
        **score(hyps, references),
        "beams": beams,
        "decoding": "greedy" if beams == 1 else f"beam {beams}, length penalty {length_penalty:g}",
        "copy_baseline": {"bleu": base["bleu"], "chrf": base["chrf"]},
        "word_baseline": word_base,
        "slices": slices(sources, hyps, references, words=words),
        "truncated": len(report.truncated),
        "split": len(report.split),  # long sources translated in pieces (split_to_fit), nothing cut away
        "empty_outputs": count_empty_outputs(sources, hyps),
        "seconds": round(report.seconds, 2),
        "sentences_per_s": round(len(sources) / max(report.seconds, 1e-9), 1),
        "samples": sample_table(sources, references, hyps, n=samples),
    }
    return result, hyps


def metrics_record(
    *, model: dict, evaluations: list[dict], training: dict | None = None, data: dict | None = None, **extra
) -> dict:
    """The one layout of every metrics file (``03_scratch.json``, ``eval.json``, notebook 04's comparison).

    ``model`` names the model (``name``, ``parameters``, and ``checkpoint`` and ``step`` when there is one);
    ``evaluations`` are :func:`evaluate_pairs` results; ``training`` and ``data`` are summaries, when known.
    """
    from .. import runtime

    for ev in evaluations:
        missing = [k for k in EVALUATION_KEYS if k not in ev]
        if missing:
            raise ValueError(f"evaluation of {ev.get('test_set')!r} lacks {missing}: build it with evaluate_pairs.")
    if "name" not in model or "parameters" not in model:
        raise ValueError(f"model must name itself and its parameter count, got keys {sorted(model)}.")
    return {
        "schema": METRICS_SCHEMA,
        "model": model,
        "training": training,
        "data": data,
        "evaluations": evaluations,
        "hardware": runtime.accelerator().as_dict(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        **extra,
    }


def format_evaluation(ev: dict, checkpoint: str | Path | None = None) -> str:
    """A short block for a terminal or a notebook: scores with signatures, both baselines, the slices; how many
    translations are empty, with a warning when most are (the scores then measure silence, not translation),
    naming the run folder ``checkpoint`` in the command it suggests, when given."""
    base, word = ev["copy_baseline"], ev["word_baseline"]
    empty, n = ev.get("empty_outputs"), ev["n"]  # None: an evaluation recorded before empty outputs were counted
    lines = [
        f"{ev['test_set']}: {n:,} sentences, {ev['decoding']} decoding, {ev['sentences_per_s']} sentences/s, "
        + (f"{ev['truncated']:,} sources longer than the source budget (cut)" if ev["truncated"] else "no source cut")
        + (f", {ev['split']:,} long sources translated in pieces" if ev.get("split") else "")
        + ("" if empty is None else f", {empty:,} of {n:,} translations are empty"),
    ]
    if empty is not None and mostly_empty(ev):
        lines += [
            f"  warning: {empty:,} of {n:,} translations ({empty / n:.0%}) are empty: the model ends most sentences "
            "at once, as one trained for only a few steps does; the scores below say nothing yet about how well it "
            "translates.",
            "  Train longer (rerun train with the same --out and more --steps or --minutes: it resumes), and check "
            "the run: its validation loss in train_summary.json, and a few sentences through "
            f"`python -m helpers translate --checkpoint {checkpoint or 'RUN'}`.",
        ]
    lines += [
        f"  BLEU = {ev['bleu']:.2f}   {ev['bleu_signature']}",
        f"  chrF = {ev['chrf']:.2f}   {ev['chrf_signature']}",
        f"  baselines: copy the source BLEU {base['bleu']:.2f} / chrF {base['chrf']:.2f}; "
        + (
            f"word by word BLEU {word['bleu']:.2f} / chrF {word['chrf']:.2f}"
            if word
            else "word by word: not available (no training word table)"
        ),
    ]
    for kind, title in (("length", "by source length (words)"), ("unseen_word", "by unseen word")):
        rows = ev["slices"][kind]
        if rows:
            lines.append(f"  {title}: " + "; ".join(f"{r['slice']} ({r['n']:,}) BLEU {r['bleu']:.1f}" for r in rows))
    return "\n".join(lines)


def write_json(record: dict, path: str | Path) -> Path:
    """Write a metrics record atomically (a disconnect never leaves half a file)."""
    return ckpt_lib.atomic_write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", path)


# ----------------------------------------------------------------------------------------------
# is a difference real? the paired bootstrap (Koehn, 2004), on sacreBLEU's per-sentence statistics


def sentence_bleu_counts(hypotheses: list[str], references: list[str]) -> np.ndarray:
    """sacreBLEU's sufficient statistics per sentence, (n, 10): lengths, then matches and totals of 1- to 4-grams."""
    from sacrebleu.metrics import BLEU

    return np.array(BLEU()._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype=np.int64)


def corpus_bleu_from_counts(stats: np.ndarray) -> float:
    """Corpus BLEU from summed statistics (sacreBLEU's defaults: exponential smoothing), as ``corpus_score`` gives."""
    from sacrebleu.metrics import BLEU

    s = [int(x) for x in stats]
    return BLEU.compute_bleu(s[2:6], s[6:10], s[0], s[1], smooth_method="exp").score


def bootstrap_bleu_difference(hyps_a: list[str], hyps_b: list[str], references: list[str], *,
                     resamples: int = 1000, seed: int = 0) -> dict:  # fmt: skip
    """Paired bootstrap of BLEU(b) - BLEU(a) on the same sentences (Koehn, 2004).

    Resample the test sentences with replacement, score both systems on each resample, and report the
    observed difference, a 95 % interval of the resampled differences, and ``p``: the share of resamples in
    which b does not beat a (for b better than a; a small p says the gain is not luck of the sentences drawn).
    """
    if not (len(hyps_a) == len(hyps_b) == len(references)) or not references:
        raise ValueError("both systems need one hypothesis per reference, on the same (non-empty) test set.")
    sa, sb = sentence_bleu_counts(hyps_a, references), sentence_bleu_counts(hyps_b, references)
    rng = np.random.default_rng(seed)
    n = len(references)
    idx = rng.integers(0, n, size=(resamples, n))  # one draw of sentences per resample, the same for a and b
    deltas = []
    step = max(1, 2**22 // (n * sa.shape[1]))  # resamples per gather: about 32 MB at a time, whatever n is
    for start in range(0, resamples, step):
        rows = idx[start : start + step]
        a_sums, b_sums = sa[rows].sum(1), sb[rows].sum(1)
        deltas += [corpus_bleu_from_counts(b) - corpus_bleu_from_counts(a) for a, b in zip(a_sums, b_sums)]
    deltas = np.array(deltas)
    low, high = np.percentile(deltas, [2.5, 97.5])
    return {
        "delta": round(corpus_bleu_from_counts(sb.sum(0)) - corpus_bleu_from_counts(sa.sum(0)), 2),
        "low": round(float(low), 2),
        "high": round(float(high), 2),
        "p": float((deltas <= 0).mean()),
        "resamples": resamples,
    }


def score_newer_dev(model, tokenizer, out: Path, err: TextIO | None) -> dict | None:
    """Greedy BLEU and chrF of a just-trained model on the newer-sentence development file, or None (with a line
    saying so) when the file is not on this machine. Translations go to ``out/eval_dev.greedy.hyp.txt``."""
    from ..run_folder import RunFolder
    from ..runtime import atomic_write_text
    from ..text.testsets import NEWER, WordTable, find_newer_dev, load_newer_sentences

    path = find_newer_dev()
    if path is None:
        if err is not None:
            print(f"({NEWER} is not on this machine: no score on newer sentences; evaluate --test FILE scores any set.)",
                  file=err)  # fmt: skip
        return None
    pairs, _, label = load_newer_sentences()  # the local file: nothing is downloaded here
    folder = RunFolder(out)
    words = WordTable.load(folder.words) if folder.words.is_file() else None
    was_training = model.training
    model.eval()
    try:
        ev, hyps = evaluate_pairs(ScratchTranslator(model, tokenizer), pairs, test_set=label, words=words, beams=1)
    finally:
        model.train(was_training)
    atomic_write_text("".join(h + "\n" for h in hyps), folder.dev_hypotheses)
    result = {"test_file": str(path), "n": ev["n"], "beams": 1, "bleu": ev["bleu"], "chrf": ev["chrf"],
              "truncated": ev["truncated"]}  # fmt: skip
    if err is not None:
        print(f"Newer sentences ({path.name}, {ev['n']:,} pairs, greedy): BLEU {ev['bleu']:.2f}, chrF {ev['chrf']:.2f}; "
              f"beam search with evaluate --test {NEWER}.", file=err)  # fmt: skip
    return result
