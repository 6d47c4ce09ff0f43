"""Translating and scoring: decoding with the key/value cache, sacreBLEU BLEU and chrF, baselines.

``python -m helpers translate`` calls :func:`translate_command` and ``python -m helpers evaluate``
calls :func:`evaluate_command`; notebook 03 calls :func:`translate` and :func:`score` directly.

Scores are computed by sacreBLEU on detokenized text (what the tokenizer's ``decode`` returns),
with its default settings, and printed with the signature that says exactly how they were
computed, so they can be compared with published numbers.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import torch

from . import checkpoint as ckpt_lib

DEFAULT_LENGTH_BUCKETS = (5, 10, 15, 20, 30)  # source words: <=5, 6-10, ..., >30


# ----------------------------------------------------------------------------------------------
# loading a trained run


@dataclass
class Run:
    model: torch.nn.Module
    tokenizer: object
    config: dict
    step: int
    path: Path


def load_run(checkpoint: str | Path, device: str | torch.device | None = None) -> Run:
    """The model (eval mode) and tokenizer of a run folder written by ``train``."""
    from .data import Tokenizer
    from .model import DecoderOnlyTransformer, ModelConfig

    folder = Path(checkpoint)
    if folder.is_file():
        folder = folder.parent
    saved = ckpt_lib.load_checkpoint(folder, map_location="cpu")
    tok_dir = folder / ckpt_lib.TOKENIZER_DIR
    if not tok_dir.is_dir():
        raise FileNotFoundError(
            f"{folder} has a checkpoint but no {ckpt_lib.TOKENIZER_DIR}/ folder beside it: pass the whole run folder "
            "written by `python -m helpers train` (checkpoint and tokenizer travel together)."
        )
    tokenizer = Tokenizer.load(tok_dir)
    model = DecoderOnlyTransformer(ModelConfig.from_dict(saved["config"]["model"]))
    model.load_state_dict(saved["model"])
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device).eval()
    return Run(model=model, tokenizer=tokenizer, config=saved["config"], step=int(saved["step"]), path=folder)


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
    seconds: float = 0.0


def translate(
    model: torch.nn.Module,
    tokenizer,
    sources: list[str],
    beams: int = 1,
    batch_size: int = 64,
    use_cache: bool = True,
    length_penalty: float = 1.0,
    report: TranslateReport | None = None,
) -> list[str]:
    """Translate French sentences; the output list matches ``sources`` line for line.

    An empty (or blank) source gives an empty translation without calling the model. A source too long
    for the model is cut so that half of ``max_len`` stays free for the translation; the cut is recorded
    in ``report.truncated`` (the caller decides how to warn). Characters the tokenizer has never seen
    become its unknown token. Sentences are decoded in batches of similar length.
    """
    report = report if report is not None else TranslateReport()
    t0 = time.perf_counter()
    max_len = model.config.max_len
    # the source may use at most half the positions (minus <bos>, <sep>): the rest is for the English
    max_src = max(1, max_len // 2 - 2)
    outputs = [""] * len(sources)
    todo = []
    for i, text in enumerate(sources):
        text = (text or "").strip()
        if not text:
            report.empty += 1
            continue
        ids = tokenizer.encode(text)
        if len(ids) > max_src:
            report.truncated.append((i + 1, len(ids), max_src))
            ids = ids[:max_src]
        todo.append((i, [tokenizer.bos_id, *ids, tokenizer.sep_id]))
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
            outputs[i] = tokenizer.decode(ids)
    report.sentences += len(sources)
    report.seconds += time.perf_counter() - t0
    return outputs


def translate_lines(
    model, tokenizer, lines: Iterable[str], beams: int = 1, err: TextIO | None = None, batch_size: int = 64
) -> list[str]:
    """:func:`translate` for lines of text, warning on standard error about every truncated line and the total."""
    err = err if err is not None else sys.stderr
    lines = [line.rstrip("\r\n") for line in lines]
    report = TranslateReport()
    out = translate(model, tokenizer, lines, beams=beams, batch_size=batch_size, report=report)
    for number, n, kept in report.truncated:
        print(
            f"warning: line {number} has {n} tokens; kept the first {kept} (the model reads at most "
            f"{model.config.max_len} tokens, source and translation together).",
            file=err,
        )
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


def bleu_by_length(
    sources: list[str], hypotheses: list[str], references: list[str], buckets: tuple[int, ...] = DEFAULT_LENGTH_BUCKETS
) -> list[dict]:
    """BLEU per source-length bucket (in words): ``[{"bucket": "6-10", "n": ..., "bleu": ...}, ...]``; empty buckets left out."""
    from sacrebleu.metrics import BLEU

    edges = list(buckets)
    groups: dict[int, list[int]] = {}
    for i, src in enumerate(sources):
        n = len(src.split())
        k = next((j for j, edge in enumerate(edges) if n <= edge), len(edges))
        groups.setdefault(k, []).append(i)
    rows = []
    for k in sorted(groups):
        idx = groups[k]
        lo = 1 if k == 0 else edges[k - 1] + 1
        name = f"{lo}-{edges[k]}" if k < len(edges) else f">{edges[-1]}"
        b = BLEU().corpus_score([hypotheses[i] for i in idx], [[references[i] for i in idx]])
        rows.append({"bucket": name, "n": len(idx), "bleu": round(b.score, 2)})
    return rows


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


def evaluate_pairs(
    model, tokenizer, pairs: list[tuple[str, str]], beams: int = 1, batch_size: int = 64, samples: int = 10
) -> dict:
    """Translate the French of ``pairs`` and score against the English: BLEU, chrF, copy baseline, by length, samples."""
    if not pairs:
        raise ValueError("No test pairs to evaluate.")
    sources = [fr for fr, _ in pairs]
    references = [en for _, en in pairs]
    report = TranslateReport()
    hyps = translate(model, tokenizer, sources, beams=beams, batch_size=batch_size, report=report)
    result = score(hyps, references)
    result.update(
        beams=beams,
        decoding="greedy" if beams == 1 else f"beam {beams}",
        copy_baseline=copy_baseline(sources, references),
        by_length=bleu_by_length(sources, hyps, references),
        samples=sample_table(sources, references, hyps, n=samples),
        truncated=len(report.truncated),
        seconds=round(report.seconds, 2),
        sentences_per_s=round(len(sources) / max(report.seconds, 1e-9), 1),
    )
    result["hypotheses"] = hyps
    return result


def read_test_file(path: str | Path) -> list[tuple[str, str]]:
    """``French<TAB>English`` lines. Blank lines are skipped; any other malformed line is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"Test file {path} does not exist: pass a file of French<TAB>English lines "
            "(train writes one as <out>/test.tsv)."
        )
    pairs = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) != 2 or not cols[0].strip() or not cols[1].strip():
                raise ValueError(
                    f"{path}, line {number}: expected 'French<TAB>English' (two non-empty columns), got "
                    f"{len(cols)} column(s): {line[:80]!r}. Fix or remove that line; for the Tatoeba file "
                    "(English<TAB>French<TAB>...) use the test.tsv that train writes into its output folder."
                )
            pairs.append((cols[0].strip(), cols[1].strip()))
    if not pairs:
        raise ValueError(f"{path} holds no French<TAB>English lines.")
    return pairs


# ----------------------------------------------------------------------------------------------
# the command-line entry points


def translate_command(
    checkpoint: str | Path,
    beams: int = 1,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """``python -m helpers translate``: French lines on ``stdin``, English lines on ``stdout``, one for one.

    Returns the number of lines translated. Warnings (truncated lines) go to ``stderr``.
    """
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    run = load_run(checkpoint)
    lines = stdin.read().splitlines()
    out = translate_lines(run.model, run.tokenizer, lines, beams=beams, err=stderr)
    for line in out:
        stdout.write(line + "\n")
    stdout.flush()
    return len(out)


def evaluate_command(
    checkpoint: str | Path,
    test: str | Path,
    beams: int = 1,
    out_json: str | Path | None = None,
    stdout: TextIO | None = None,
) -> dict:
    """``python -m helpers evaluate``: score a run on ``French<TAB>English`` lines; print the scores, write JSON.

    The JSON (default ``<checkpoint>/eval.json``) holds BLEU, chrF, their signatures, the copy baseline,
    BLEU by length and sample translations. Returns the same dict.
    """
    stdout = stdout if stdout is not None else sys.stdout
    pairs = read_test_file(test)
    run = load_run(checkpoint)
    result = evaluate_pairs(run.model, run.tokenizer, pairs, beams=beams)
    hyps = result.pop("hypotheses")
    result.update(
        checkpoint=str(run.path), step=run.step, test=str(test), device=str(next(run.model.parameters()).device)
    )
    print(
        f"{len(pairs)} sentences, {result['decoding']} decoding, {result['sentences_per_s']} sentences/s", file=stdout
    )
    print(f"BLEU = {result['bleu']:.2f}   {result['bleu_signature']}", file=stdout)
    print(f"chrF = {result['chrf']:.2f}   {result['chrf_signature']}", file=stdout)
    base = result["copy_baseline"]
    print(f"copy-the-source baseline: BLEU = {base['bleu']:.2f}, chrF = {base['chrf']:.2f}", file=stdout)
    out_json = Path(out_json) if out_json is not None else Path(run.path) / "eval.json"
    ckpt_lib.atomic_write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", out_json)
    hyp_path = out_json.with_suffix(".hyp.txt")
    ckpt_lib.atomic_write_text("".join(h + "\n" for h in hyps), hyp_path)
    print(f"wrote {out_json} and {hyp_path}", file=stdout)
    return result
