"""Command line: ``python -m helpers <command>``. It calls the same functions as the notebooks.

run-notebooks   execute every notebook headless (quick mode by default), reports in reports/
sync-notebooks  rewrite each notebooks/NN_*.ipynb from its jupytext .py pair (no outputs)
check-notebooks report pairs that drifted apart or carry outputs
train           train the French->English model (resumes when --out already has a checkpoint)
translate       French lines on standard input -> English lines on standard output
evaluate        BLEU and chrF on a French<TAB>English test file
"""

from __future__ import annotations

import argparse
import sys


def _run_notebooks(args) -> int:
    from . import notebooks

    notebooks.run_all(args.only or None, quick=not args.full)
    return 0


def _sync_notebooks(args) -> int:
    from . import notebooks

    for path in notebooks.sync(notebooks.notebook_sources(args.only or None)):
        print("wrote", path)
    return 0


def _check_notebooks(args) -> int:
    from . import notebooks

    problems = [p for py in notebooks.notebook_sources() for p in notebooks.pair_problems(py)]
    for p in problems:
        print(p)
    if not problems:
        print("All notebook pairs are in sync and carry no outputs.")
    return 1 if problems else 0


def _train(args) -> int:
    from . import train

    columns = tuple(c.strip() for c in args.columns.split(",")) if args.columns else None
    overrides = {"max_tokens": args.max_tokens} if args.max_tokens else None
    train.train_command(
        data=args.data,
        columns=columns,
        minutes=args.minutes,
        steps=args.steps,
        out=args.out,
        preset=args.preset,
        seed=args.seed,
        overrides=overrides,
    )
    return 0


def _translate(args) -> int:
    from . import evaluate

    evaluate.translate_command(args.checkpoint, beams=args.beams, stdin=sys.stdin, stdout=sys.stdout)
    return 0


def _evaluate(args) -> int:
    from . import evaluate

    evaluate.evaluate_command(args.checkpoint, args.test, beams=args.beams, out_json=args.json)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m helpers", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    p = sub.add_parser("run-notebooks", help="execute the notebooks headless (quick mode unless --full)")
    p.add_argument("--only", nargs="*", help="notebook numbers or names, e.g. --only 01 02")
    p.add_argument("--full", action="store_true", help="full mode (the Colab T4 run) instead of quick mode")
    p.set_defaults(func=_run_notebooks)

    p = sub.add_parser("sync-notebooks", help="rewrite .ipynb files from their .py pairs")
    p.add_argument("--only", nargs="*")
    p.set_defaults(func=_sync_notebooks)

    p = sub.add_parser("check-notebooks", help="list pairs that drifted apart or carry outputs")
    p.set_defaults(func=_check_notebooks)

    p = sub.add_parser("train", help="train French->English; rerun with the same --out to resume")
    p.add_argument("--data", required=True, help="a Tatoeba-style or French<TAB>English file, or 'builtin'")
    p.add_argument(
        "--columns",
        default=None,
        help="column order of --data, e.g. en,fr for the Tatoeba file (default: fr,en; Tatoeba is detected)",
    )
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--minutes", type=float, help="time budget (what the notebook uses)")
    budget.add_argument("--steps", type=int, help="step budget (exactly reproducible)")
    p.add_argument("--out", required=True, help="run folder: checkpoints, tokenizer, metrics")
    p.add_argument("--preset", default="cpu", help="model and batch sizes: cpu (2 cores) or t4 (about an hour on a T4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="tokens per batch, padding included (default: the preset's); lower it after an out-of-memory error",
    )
    p.set_defaults(func=_train)

    p = sub.add_parser("translate", help="French on stdin -> English on stdout")
    p.add_argument("--checkpoint", required=True, help="a run folder written by train")
    p.add_argument("--beams", type=int, default=1, help="1 = greedy")
    p.set_defaults(func=_translate)

    p = sub.add_parser("evaluate", help="BLEU and chrF on French<TAB>English lines")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--test", required=True, help="file of French<TAB>English lines")
    p.add_argument("--beams", type=int, default=1)
    p.add_argument("--json", default=None, help="where to write the metrics (default: <checkpoint>/eval.json)")
    p.set_defaults(func=_evaluate)
    return parser


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors whose message already says what went wrong and what to do: shown without a traceback."""
    from . import data, train

    return (ValueError, FileNotFoundError, data.DownloadError, train.NonFiniteLossError, train.OutOfMemoryError)


def main(argv: list[str] | None = None) -> int:
    import os

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except _user_errors() as err:
        if os.environ.get("HELPERS_DEBUG"):
            raise
        print(f"error: {err}\n(set HELPERS_DEBUG=1 to see the traceback)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "\nInterrupted. A training run resumes from its last checkpoint when you rerun the same command.",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
