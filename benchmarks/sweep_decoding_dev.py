"""Beam width and length penalty chosen on the newer-sentence development set (issue 28, item 3).

    python benchmarks/sweep_decoding_dev.py CHECKPOINT [--beams 1 4 8] [--penalties 0.6 1.0 1.4]

Scores every combination (greedy once) with sacreBLEU on the development file; the hidden half is never used.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from helpers.evaluation.evaluate import score
from helpers.evaluation.translation import translate
from helpers.pipeline import load_run
from helpers.text.sources import load_tsv


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint")
    p.add_argument("--dev", default="../shared/data/tatoeba-newer-fr-en/dev.fr-en.tsv")
    p.add_argument("--beams", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--penalties", type=float, nargs="+", default=[0.6, 1.0, 1.4])
    args = p.parse_args(argv)
    pairs, _ = load_tsv(args.dev)
    src, refs = [fr for fr, _ in pairs], [en for _, en in pairs]
    run = load_run(args.checkpoint, device="cpu")
    print("| beams | length penalty | BLEU | chrF | seconds |\n|---|---|---|---|---|")
    for beams in args.beams:
        for lp in [1.0] if beams == 1 else args.penalties:
            t0 = time.perf_counter()
            hyps = translate(run.model, run.tokenizer, src, beams=beams, length_penalty=lp)
            s = score(hyps, refs)
            print(
                f"| {beams} | {lp} | {s['bleu']:.2f} | {s['chrf']:.2f} | {time.perf_counter() - t0:.0f} |", flush=True
            )


if __name__ == "__main__":
    main()
