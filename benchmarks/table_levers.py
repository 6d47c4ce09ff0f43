"""The issue-28 lever table: each run's greedy BLEU/chrF on the newer-sentence development set, two seeds,
and sacreBLEU's paired bootstrap of each lever against the vanilla runs (both seeds' translations together).

    python benchmarks/table_levers.py [--runs runs/scr] [--base vanilla] [--dev ../shared/data/tatoeba-newer-fr-en/dev.fr-en.tsv]

A run folder is NAME-sSEED with eval_dev_greedy.json and its translations beside it (benchmarks/levers_dev.sh).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

from sacrebleu.metrics import BLEU


def paired_p(refs, base, system, resamples=1000, seed=12345):
    """sacreBLEU's paired bootstrap: the share of resamples where ``system`` does not beat ``base`` (one-sided p)."""
    import numpy as np

    bleu = BLEU()
    stats_b = [bleu._extract_corpus_statistics([h], [[r]]) for h, r in zip(base, refs)]
    stats_s = [bleu._extract_corpus_statistics([h], [[r]]) for h, r in zip(system, refs)]
    sb, ss = np.array([s[0] for s in stats_b]), np.array([s[0] for s in stats_s])
    rng = np.random.default_rng(seed)
    n, worse = len(refs), 0
    for _ in range(resamples):
        idx = rng.integers(0, n, n)
        b = bleu._compute_score_from_stats(sb[idx].sum(0).tolist()).score
        s = bleu._compute_score_from_stats(ss[idx].sum(0).tolist()).score
        worse += s <= b
    return (worse + 1) / (resamples + 1)


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
        hyps = (folder / "eval_dev_greedy.dev.fr-en.hyp.txt").read_text(encoding="utf-8").split("\n")[: len(refs)]
        summary = json.loads((folder / "train_summary.json").read_text())
        runs[m.group(1)][int(m.group(2))] = {"bleu": ev["bleu"], "chrf": ev["chrf"], "hyps": hyps,
                                             "tok_s": summary["tokens_per_s"], "val": summary["val_loss"]}  # fmt: skip
    base = runs.get(args.base, {})
    base_hyps = [h for s in sorted(base) for h in base[s]["hyps"]]
    base_mean = sum(r["bleu"] for r in base.values()) / max(1, len(base))
    print(
        "| lever | seeds | dev BLEU per seed | mean | Δ vs vanilla | p (paired bootstrap) | chrF mean | val loss | target tok/s (1 thread) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, seeds in sorted(runs.items(), key=lambda kv: kv[0] != args.base):
        mean = sum(r["bleu"] for r in seeds.values()) / len(seeds)
        if name != args.base and sorted(seeds) == sorted(base):
            hyps = [h for s in sorted(seeds) for h in seeds[s]["hyps"]]
            p_value = f"{paired_p(refs * len(seeds), base_hyps, hyps):.3f}"
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
