"""Choose beam search's length penalty on the validation split, never on a test set we report.

Beam search ranks finished hypotheses by ``log-probability / length ** length_penalty``; a larger penalty
favours longer translations. The 15-minute models translate too short (BLEU's brevity penalty is 0.88-0.94 on
both test sets), so the penalty is worth a sweep. This script rebuilds the run's validation split from the
same data and seed (the split is deterministic), translates a sample of it with each penalty and prints BLEU,
chrF and the length ratio, so the choice never looks at ``test_new.tsv`` or ``test.tsv``. The data, its
columns, sample size and seed are read from the run's ``train_summary.json``; a split whose size differs from
the recorded one is refused.

    python benchmarks/sweep_length_penalty.py --checkpoint runs/cpu15 --pairs 2000 --penalties 1.0 1.3 1.6 2.0
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.evaluation.evaluate import score  # noqa: E402
from helpers.evaluation.translation import translate  # noqa: E402
from helpers.pipeline import load_run  # noqa: E402
from helpers.text.data import load_clean_split  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True, help="a run folder written by train")
    ap.add_argument("--data", default=None, help="the run's data file, if it has moved since training")
    ap.add_argument("--pairs", type=int, default=2000, help="validation pairs to translate (a seeded sample)")
    ap.add_argument("--beams", type=int, default=4)
    ap.add_argument("--penalties", type=float, nargs="+", default=[0.6, 1.0, 1.3, 1.6, 2.0])
    ap.add_argument("--json", default=None, help="write the table here")
    args = ap.parse_args(argv)

    run = load_run(args.checkpoint)
    summary = json.loads((Path(args.checkpoint) / "train_summary.json").read_text())
    seed, info = summary["config"]["seed"], summary["data"]
    columns = tuple(info["columns"]) if info["columns"] else None
    valid = load_clean_split(args.data or info["source"], columns, limit=info["limit"], seed=seed).splits.valid
    if len(valid) != info["pairs"]["valid"]:
        raise SystemExit(
            f"The rebuilt validation split has {len(valid):,} pairs, the run's had {info['pairs']['valid']:,}: "
            "this is not the data the run was trained on (pass --data with the file it used)."
        )
    sample = random.Random(1234).sample(valid, min(args.pairs, len(valid)))
    sources, refs = [fr for fr, _ in sample], [en for _, en in sample]
    print(f"{len(sample)} of {len(valid):,} validation pairs (seed {seed}); beams {args.beams}", flush=True)
    rows = []
    for lp in args.penalties:
        t0 = time.perf_counter()
        hyps = translate(run.model, run.tokenizer, sources, beams=args.beams, length_penalty=lp)
        s = score(hyps, refs)
        ratio = sum(len(h.split()) for h in hyps) / max(1, sum(len(r.split()) for r in refs))
        rows.append({"length_penalty": lp, "bleu": s["bleu"], "chrf": s["chrf"], "word_ratio": round(ratio, 3)})
        print(
            f"length penalty {lp:4.2f}: BLEU {s['bleu']:6.2f}  chrF {s['chrf']:6.2f}  words hyp/ref {ratio:.3f}  "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    best = max(rows, key=lambda r: r["bleu"])
    print(f"best on validation: length penalty {best['length_penalty']:g} (BLEU {best['bleu']:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"checkpoint": args.checkpoint, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
