"""Long sources: translated in pieces (split_to_fit) against cut to the source budget, on the same checkpoints.

    python benchmarks/split_vs_cut.py runs/scr/vanilla-s0 runs/scr/vanilla-s1 [--dev FILE] [--beams 1]

Prints BLEU/chrF on the whole development set and on the sources longer than the budget, both ways.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from helpers.evaluation.evaluate import score
from helpers.evaluation.translation import TranslateReport, translate
from helpers.pipeline import load_run
from helpers.text.sources import load_tsv


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("checkpoints", nargs="+")
    p.add_argument("--dev", default="../shared/data/tatoeba-newer-fr-en/dev.fr-en.tsv")
    p.add_argument("--beams", type=int, default=1)
    args = p.parse_args(argv)
    pairs, _ = load_tsv(args.dev)
    src, refs = [fr for fr, _ in pairs], [en for _, en in pairs]
    for ckpt in args.checkpoints:
        run = load_run(ckpt, device="cpu")
        out = {}
        for split in (False, True):
            report = TranslateReport()
            out[split] = (
                translate(run.model, run.tokenizer, src, beams=args.beams, report=report, split_long=split),
                report,
            )
        long_idx = [n - 1 for n, _, _ in out[False][1].truncated]
        for split, (hyps, report) in out.items():
            whole = score(hyps, refs)
            part = score([hyps[i] for i in long_idx], [refs[i] for i in long_idx])
            print(f"{ckpt} {'split' if split else 'cut  '}: all {len(refs)}: BLEU {whole['bleu']:.2f} chrF {whole['chrf']:.2f} | "
                  f"the {len(long_idx)} long sources: BLEU {part['bleu']:.2f} chrF {part['chrf']:.2f} | "
                  f"cut {len(report.truncated)}, split {len(report.split)}")  # fmt: skip


if __name__ == "__main__":
    main()
