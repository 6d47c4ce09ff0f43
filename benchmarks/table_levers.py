"""The issue-28 lever table: each run's greedy BLEU/chrF on the newer-sentence development set, two seeds,
and sacreBLEU's paired bootstrap of each lever against the vanilla runs (both seeds' translations together).

    python benchmarks/table_levers.py [--runs runs/scr] [--base vanilla] [--dev ../shared/data/tatoeba-newer-fr-en/dev.fr-en.tsv]

A run folder is NAME-sSEED with eval_dev_greedy.json and its translations beside it (benchmarks/levers_dev.sh,
benchmarks/recipe_levers_dev.sh: `--runs runs/rscr --base base`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from helpers.evaluation.evaluate import bootstrap_bleu_difference  # noqa: E402


def paired_p(refs, base, system, resamples=1000, seed=12345) -> float:
    """The paired bootstrap's one-sided p (helpers.evaluation.evaluate.bootstrap_bleu_difference): the share of
    resamples in which ``system`` does not beat ``base``."""
    return bootstrap_bleu_difference(base, system, refs, resamples=resamples, seed=seed)["p"]


def _format_p(p: float, resamples: int = 1000) -> str:
    return f"< {1 / resamples:.3f}" if p == 0 else f"{p:.3f}"  # no resample in which the lever does not win


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--runs", default="runs/scr")
    p.add_argument("--base", default="vanilla")
    p.add_argument("--dev", default="../shared/data/tatoeba-newer-fr-en/dev.fr-en.tsv")
    args = p.parse_args(argv)
    refs = [line.rstrip("\n").split("\t")[1] for line in open(args.dev, encoding="utf-8")]
    runs = defaultdict(dict)
    for folder in sorted(Path(args.runs).glob("*-s*")):
        m = re.fullmatch(r"(.+)-s(\d+)", folder.name)
        ev_path = folder / "eval_dev_greedy.json"
        if not m or not folder.is_dir() or not ev_path.is_file():
            continue
        ev = json.loads(ev_path.read_text())["evaluations"][0]
        hyp_file = next(folder.glob("eval_dev_greedy.*.hyp.txt"))  # named after the test set (a file or a name)
        hyps = hyp_file.read_text(encoding="utf-8").split("\n")[: len(refs)]
        summary = json.loads((folder / "train_summary.json").read_text())
        runs[m.group(1)][int(m.group(2))] = {"bleu": ev["bleu"], "chrf": ev["chrf"], "hyps": hyps,
                                             "tok_s": summary["tokens_per_s"], "val": summary["val_loss"]}  # fmt: skip
    base = runs.get(args.base, {})
    base_hyps = [h for s in sorted(base) for h in base[s]["hyps"]]
    base_mean = sum(r["bleu"] for r in base.values()) / max(1, len(base))
    print(
        f"| lever | seeds | dev BLEU per seed | mean | Δ vs {args.base} | p (paired bootstrap) | chrF mean | val loss | target tok/s (1 thread) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, seeds in sorted(runs.items(), key=lambda kv: kv[0] != args.base):
        mean = sum(r["bleu"] for r in seeds.values()) / len(seeds)
        if name != args.base and sorted(seeds) == sorted(base):
            hyps = [h for s in sorted(seeds) for h in seeds[s]["hyps"]]
            p_value = _format_p(paired_p(refs * len(seeds), base_hyps, hyps))
        else:
            p_value = "–"
        per = " / ".join(f"{seeds[s]['bleu']:.2f}" for s in sorted(seeds))
        chrf = sum(r["chrf"] for r in seeds.values()) / len(seeds)
        val = sum(r["val"] for r in seeds.values()) / len(seeds)
        tok = sum(r["tok_s"] for r in seeds.values()) / len(seeds)
        delta = "–" if name == args.base else f"{mean - base_mean:+.2f}"
        print(
            f"| {name} | {len(seeds)} | {per} | {mean:.2f} | {delta} | {p_value} | {chrf:.2f} | {val:.3f} | {tok:,.0f} |"
        )


if __name__ == "__main__":
    main()
