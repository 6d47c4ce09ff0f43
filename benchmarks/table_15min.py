"""The RESULTS.md table of benchmarks/runs_15min.sh, read from each run's train_summary.json and eval_greedy.json.

    python benchmarks/table_15min.py [runs/15min]

One row per run folder that has both files: what it changed, its size, steps, throughput, validation loss,
and greedy BLEU (chrF) on the new-sentence set (first: what a user meets) and on the in-distribution set.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ORDER = [
    "fixed",
    "sized-rule0.8",
    "sized-fp32-rule0.8",
    "sized",
    "sized-fp32",
    "synthesizer",
    "bottleneck",
    "rotary",
    "alibi",
    "nopos",
    "span",
]


def row(folder: Path) -> str | None:
    summary, scores = folder / "train_summary.json", folder / "eval_greedy.json"
    if not (summary.is_file() and scores.is_file()):
        return None
    s = json.loads(summary.read_text())
    e = {ev["test_set"].split(" (")[0]: ev for ev in json.loads(scores.read_text())["evaluations"]}
    cfg = s["config"]
    variant = ("attention", "bottleneck_dim", "positional", "pretrain")
    changed = [f"{k} {cfg[k]}" for k in variant if cfg.get(k) not in (None, "dot", "learned")]
    shape = f"{cfg['n_layer']}x{cfg['d_model']}"
    pre = s.get("pretraining") or {}
    steps = f"{s['steps']:,}" + (f" (+{pre['steps']:,} pretraining)" if pre.get("steps") else "")
    new, ind = e["new sentences"], e["in-distribution"]
    unseen = {x["slice"]: x["bleu"] for x in new["slices"]["unseen_word"]}
    unseen_with = next(v for k, v in unseen.items() if k.startswith("with"))
    all_seen = next(v for k, v in unseen.items() if not k.startswith("with"))
    return (
        f"| {folder.name} | {', '.join(changed) or 'vanilla'} | {s['precision']} | {shape}, {s['parameters'] / 1e6:.2f} M | "
        f"{steps} | {s['tokens_per_s']:,.0f} | {s['val_loss']:.3f} | **{new['bleu']:.2f}** ({new['chrf']:.2f}) | "
        f"{ind['bleu']:.2f} ({ind['chrf']:.2f}) | {unseen_with:.1f} / {all_seen:.1f} |"
    )


def main(root: str = "runs/15min") -> None:
    folders = sorted(Path(root).iterdir(), key=lambda p: ORDER.index(p.name) if p.name in ORDER else 99)
    print(
        "| run | change | precision | layers x width, parameters | steps | target tok/s | val loss | "
        "**new sentences** BLEU (chrF) | in-distribution BLEU (chrF) | new: with an unseen word / all seen |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for folder in folders:
        line = row(folder)
        if line:
            print(line)


if __name__ == "__main__":
    main(*sys.argv[1:])
