"""Notebook 06's strangers, place-named strangers and synthesizer row at their full-mode size, for RESULTS.md.

    python benchmarks/knowledge_strangers.py [--quick] [--seed 0] [--device cuda] [--json out.json]

The same experiment as notebook 06 (helpers.knowledge.knowledge_table: a model fine-tuned from scratch and one
span-corruption pretrained on every biography first, both asked about held-out people), once with dot-product
attention and once with notebook 05's synthesizer; then the pretrained dot-product model is asked about people no
text mentioned (knowledge.unseen_people) and about the same strangers renamed after a town they were born in
(knowledge.named_after_places). Accuracies, not speed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from helpers import knowledge as K
from helpers import runtime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="quick mode's sizes (seconds; noise)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="cuda or cpu (default: CUDA when present)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    kcfg, model_cfg = K.knowledge_configs(args.quick)
    kcfg = replace(kcfg, seed=args.seed)
    device = runtime.pick_device(args.device)
    t0 = time.perf_counter()
    data = K.make_knowledge_data(kcfg.n_people, kcfg.n_test, kcfg.seed, skew=kcfg.skew)
    tok = K.knowledge_tokenizer(data, kcfg.vocab_size, kcfg.seed)
    gold = [p.born for p in data.test]
    rows, profiles = {}, {}
    for attention in ("dot", "synthesizer"):
        table = K.knowledge_table(data, tok, kcfg, replace(model_cfg, attention=attention), device=device)
        rows[attention] = {k: table[k] for k in ("scratch", "pretrained", "baseline", "baseline_place")}
        rows[attention]["pretrained_profile"] = K.answer_profile(table["answers"]["pretrained"], gold,
                                                                 table["baseline_place"])  # fmt: skip
        if attention == "dot":
            model, place = table["models"]["pretrained"], table["baseline_place"]
    strangers = K.unseen_people(data, len(data.test), seed=kcfg.seed + 1)
    named = K.named_after_places(strangers, seed=kcfg.seed + 2)
    for name, people in (("strangers", strangers), ("place-named strangers", named)):
        said = K.answer_questions(model, tok, data.pairs(people))
        profiles[name] = K.answer_profile(said, [p.born for p in people], place)
        profiles[name]["examples"] = [f"Where was {p.name} born? -> {a!r} (born in {p.born})"
                                      for p, a in list(zip(people, said))[:5]]  # fmt: skip
    record = {
        "date": date.today().isoformat(),
        "machine": runtime.accelerator().describe(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "quick": args.quick,
        "seed": kcfg.seed,
        "n_test": len(gold),
        "rows": rows,
        "profiles": profiles,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    text = json.dumps(record, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
