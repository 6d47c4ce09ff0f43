"""The table of benchmarks/recipe_15min.sh: one row per run, then each group's mean and spread over its seeds (a group:
the precision, with the TAG of a lever's runs before it).

python benchmarks/table_recipe.py [runs/recipe]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def rows(folder: Path) -> list[dict]:
    out = []
    for run in sorted(p for p in folder.iterdir() if (p / "eval_newer_dev.json").is_file()):
        summary = json.loads((run / "train_summary.json").read_text(encoding="utf-8"))
        record = json.loads((run / "eval_newer_dev.json").read_text(encoding="utf-8"))
        ev = record["evaluations"][0]
        train = summary.get("training", summary)
        cfg = train["config"]
        out.append(
            {
                "run": run.name,
                "precision": train["precision"],
                "size": f"{cfg['n_layer']}x{cfg['d_model']}",
                "steps": train["steps"],
                "tok_s": train["tokens_per_s"],
                "val_loss": train["val_loss"],
                "bleu": ev["bleu"],
                "chrf": ev["chrf"],
                "test_set": ev["test_set"],
            }
        )
    return out


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0] if args else "runs/recipe")
    table = rows(folder)
    if not table:
        print(f"no finished runs in {folder} (each needs train_summary.json and eval_newer_dev.json)")
        return 1
    print(f"test set: {table[0]['test_set']}, beam 4\n")
    print("| run | precision | layers x width | steps | target tok/s | val loss | BLEU | chrF |")
    print("|---|---|---|---|---|---|---|---|")
    for r in table:
        print(
            f"| {r['run']} | {r['precision']} | {r['size']} | {r['steps']:,} | {r['tok_s']:,.0f} | "
            f"{r['val_loss'] if r['val_loss'] is None else format(r['val_loss'], '.3f')} | {r['bleu']:.2f} | "
            f"{r['chrf']:.2f} |"
        )
    print()
    for group in sorted({r["run"].rsplit("-seed", 1)[0] for r in table}):  # bf16, fp32, mlr0.7-bf16 (a TAG), ...
        bleu = [r["bleu"] for r in table if r["run"].rsplit("-seed", 1)[0] == group]
        spread = f" ± {statistics.stdev(bleu):.2f} (sd), range {min(bleu):.2f}-{max(bleu):.2f}" if len(bleu) > 1 else ""
        print(f"{group}: mean BLEU {statistics.mean(bleu):.2f}{spread} over {len(bleu)} seed(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
