"""Notebook 06's experiments at their full-mode size, for benchmarks/RESULTS.md.

    python benchmarks/knowledge_access.py [--quick] [--threads 2] [--json out.json] [--seed 0] [--verdict]
    python benchmarks/knowledge_access.py [--pretrain-steps N] [--finetune-lr LR]
    python benchmarks/knowledge_access.py --embeddings --data fra.txt --minutes 3 [--steps N] [--kinds learned,word2vec] [--lm M]

Invented people's biographies are the pretraining text (span corruption, helpers.training.pretrain); a model is
fine-tuned to answer "Where was X born?" for some people and asked about the others, whose birthplace it can
only have read. Prints the table (from scratch, pretrained, the same pretrained model asked in the
biographies' words, the most-common-place baseline) and the accuracy along pretraining, all from
helpers.knowledge (the code notebook 06 runs). Accuracies, not speed: the seconds printed are only
what this run took on this machine. --verdict also prints (and saves with --json) the sentences that
read the numbers: the instructor's view, answers to notebook 06's questions.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import asdict, replace
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from helpers import knowledge as K
from helpers import runtime


def table(result: K.KnowledgeResult) -> str:
    n = result.n_test
    rows = [
        ("fine-tuned from scratch", result.scratch),
        (
            f"span-corruption pretrained ({result.curve[-1]['pretrain_steps']:,} steps), then fine-tuned",
            result.pretrained,
        ),
        ('the same, question in the biographies\' words ("X was born in")', result.pretrained_biography_words),
        (f"always the most common birthplace ({result.baseline_answer!r})", result.baseline),
    ]
    lines = [f"| model (test: {n} people seen only in pretraining) | accuracy | ± 2 s.e. |", "|---|---|---|"]
    lines += [f"| {name} | **{acc:.1%}** | {2 * K.standard_error(acc, n):.1%} |" for name, acc in rows]
    lines += [
        "",
        "| pretraining steps | accuracy after fine-tuning | birthplace written back into the masked biography |",
    ]
    lines += ["|---|---|---|"] + [
        f"| {c['pretrain_steps']:,} | {c['accuracy']:.1%} | {c['cloze']:.1%} |" for c in result.curve
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="quick mode's sizes (seconds; noise)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pretrain-steps", type=int, default=None)
    parser.add_argument("--finetune-lr", type=float, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    parser.add_argument("--embeddings", action="store_true", help="notebook 06's second experiment instead")
    parser.add_argument("--data", default="builtin", help="--embeddings: the pairs (Tatoeba's fra.txt, a TSV, builtin)")
    parser.add_argument("--minutes", type=float, default=3.0, help="--embeddings: the budget of each row")
    parser.add_argument(
        "--steps", type=int, default=None, help="--embeddings: a step budget instead (a shared machine)"
    )
    parser.add_argument("--preset", default="cpu-fixed", help="--embeddings: the model's preset")
    parser.add_argument("--kinds", default=",".join(K.EMBEDDING_KINDS), help="--embeddings: which starts, by name")
    parser.add_argument("--lm", default=None, help="--embeddings: the pretrained LM (hub name, folder or .gguf)")
    parser.add_argument("--eval-sentences", type=int, default=1000)
    parser.add_argument("--verdict", action="store_true", help="also print the sentences that read the numbers")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.embeddings:
        return embeddings(args, argv)
    kcfg, model_cfg = K.knowledge_configs(args.quick)
    kcfg = replace(kcfg, seed=args.seed)
    if args.pretrain_steps is not None:
        kcfg = replace(kcfg, pretrain_steps=args.pretrain_steps)
    if args.finetune_lr is not None:
        kcfg = replace(kcfg, finetune_lr=args.finetune_lr)
    device = runtime.pick_device()
    print(f"{runtime.hardware_name(device)}, {torch.get_num_threads()} threads; {kcfg}", flush=True)
    result, _ = K.run_knowledge(kcfg, model_cfg, device=device)
    print(table(result))
    if args.verdict:
        print()
        print(result.verdict())
    print(f"fine-tuning people answered correctly: {result.finetune_accuracy}; took {result.seconds / 60:.1f} min")
    print(f"held-out answers naming the town moved to instead of the birthplace: {result.moved_to_answers}")
    for e in result.examples[:4]:
        print(f"  {e['question']} {e['answer']!r}: scratch {e['scratch']!r}, pretrained {e['pretrained']!r}")
    if args.json is not None:
        record = {
            "command": "python benchmarks/knowledge_access.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "date": date.today().isoformat(),
            "machine": f"{runtime.hardware_name(device)}, {platform.platform()}",
            "knowledge_config": asdict(kcfg),
            "model_config": model_cfg.to_dict(),
            "result": result.as_dict(),
        }
        if args.verdict:
            record["verdict"] = result.verdict()
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


def embeddings(args, argv) -> int:
    """Each start of the token embeddings trained for the same minutes, scored on the new-sentence set."""
    from helpers.text import data as D
    from helpers.training import config as C

    device = runtime.pick_device()
    budget = {"steps": args.steps} if args.steps else {"minutes": args.minutes}
    cfg = C.preset_config(args.preset, seed=args.seed, **budget)
    prepared = D.prepare_data(args.data, cfg, None, seed=args.seed, progress=False)
    print(f"{runtime.hardware_name(device)}; {prepared.info['pairs']} pairs; {args.preset}, {budget} per row")
    rows = []
    for kind in args.kinds.split(","):
        row = K.embedding_row(prepared, cfg, kind, lm=args.lm, device=device, eval_sentences=args.eval_sentences)
        rows.append(row)
        print(f"| {kind} | {row['trainable']:,} | {row['steps']:,} | {row['val_loss']:.3f} | {row['bleu_valid']:.2f} | "
              f"**{row['bleu_new']:.2f}** ({row['chrf_new']:.2f}) | {row['embeddings']} |", flush=True)  # fmt: skip
    comparisons = K.compare_embeddings(rows, resamples=1000, seed=args.seed)
    if args.verdict:
        for c in comparisons:
            print(K.bootstrap_sentence(c))
    if args.json is not None:
        keep = [{k: v for k, v in r.items() if k not in ("hypotheses_new", "references_new")} for r in rows]
        record = {
            "command": "python benchmarks/knowledge_access.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "date": date.today().isoformat(),
            "machine": f"{runtime.hardware_name(device)}, {platform.platform()}",
            "config": cfg.to_dict(),
            "rows": keep,
            "comparisons": comparisons,
        }
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
