"""Scoring translations: sacreBLEU BLEU and chrF, baselines, slices, one record layout, the paired bootstrap.

Notebook 03 calls :func:`score` and :func:`evaluate_pairs`; ``python -m helpers evaluate`` (``helpers.commands``) and
notebook 04 call the same functions, so every metrics file has the layout of :func:`metrics_record`. The translations
come from any :class:`helpers.evaluation.translation.Translator`: our model, or a pretrained one.

Scores are computed by sacreBLEU on detokenized text (what the tokenizer's ``decode`` returns),
with its default settings, and printed with the signature that says exactly how they were
computed, so they can be compared with published numbers.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import TextIO

import numpy as np
import torch
from sacrebleu.metrics import BLEU, CHRF

from .. import runtime
from ..run_folder import RunFolder
from ..runtime import atomic_write_text
from ..text.testsets import NEWER, WordTable, find_newer_dev, load_newer_sentences, word_by_word_baseline
from .translation import ScratchTranslator, TranslateReport, Translator

DEFAULT_LENGTH_BUCKETS = (5, 10, 15, 25)  # source words: 1-5, 6-10, 11-15, 16-25, 26+
DEFAULT_BEAMS = 4  # evaluate's decoding: beam 4 gained 1-2 BLEU over greedy on every test set (RESULTS.md)


# ----------------------------------------------------------------------------------------------
# scores


def score(hypotheses: list[str], references: list[str]) -> dict:
    """Corpus BLEU and chrF (sacreBLEU defaults) with their signatures."""
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
    return atomic_write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", path)


# ----------------------------------------------------------------------------------------------
# is a difference real? the paired bootstrap (Koehn, 2004), on sacreBLEU's per-sentence statistics


def sentence_bleu_counts(hypotheses: list[str], references: list[str]) -> np.ndarray:
    """sacreBLEU's sufficient statistics per sentence, (n, 10): lengths, then matches and totals of 1- to 4-grams."""
    return np.array(BLEU()._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype=np.int64)


def corpus_bleu_from_counts(stats: np.ndarray) -> float:
    """Corpus BLEU from summed statistics (sacreBLEU's defaults: exponential smoothing), as ``corpus_score`` gives."""
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
