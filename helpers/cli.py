"""Command line: ``python -m helpers <command>``. It calls the same functions as the notebooks.

run-notebooks   execute every notebook headless (quick mode by default), reports in reports/
sync-notebooks  rewrite each notebooks/solutions/NN_*.ipynb from its .py, and notebooks/NN_*.ipynb (the exercise versions)
check-notebooks report pairs that drifted apart or carry outputs
train           train the French->English model (resumes when --out already has a checkpoint)
translate       French lines on standard input -> English lines on standard output
evaluate        BLEU and chrF with slices and baselines on the run's test sets or given files
finetune        fine-tune a pretrained Hugging Face model on the same pairs (then evaluate/translate it the same way)
student         write the student notebooks (each solution replaced by a stub that names its exercise)
grade           run a notebook in quick mode and score its exercises (points, first failing message, total)
report          gather figures, metrics, index.md and report.tex (your answers, figures, metrics) into one zip
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# what each command does lives in helpers.commands; notebook 04 and the tests reach the functions through here too
from .commands import evaluate_command, finetune_command, train_command, translate_command
from .course import exercises, gradebook, notebooks, report, written
from .text import sources
from .training import train


def _run_notebooks(args) -> int:
    cell_timeout = args.cell_timeout * 60 if args.cell_timeout else None
    try:
        notebooks.run_all(args.only or None, quick=not args.full, cell_timeout=cell_timeout)
    except notebooks.NotebookFailed as err:  # its message names the cell and says what to do
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: the kernel is already shut down
        print(f"\nInterrupted{': ' + str(err) if str(err) else ''}.", file=sys.stderr)
        return 130
    return 0


def _sync_notebooks(args) -> int:
    for path in notebooks.sync(notebooks.notebook_sources(args.only or None)):
        print("wrote", path)
    for path in exercises.write_exercise_versions(args.only or None):
        print("wrote", path, "(the exercise version)")
    return 0


def _check_notebooks(args) -> int:
    problems = [
        p
        for py in notebooks.notebook_sources()
        for p in notebooks.pair_problems(py) + exercises.exercise_version_problems(py)
    ]
    for p in problems:
        print(p)
    if not problems:
        print("All notebook pairs are in sync and carry no outputs.")
    return 1 if problems else 0


def _student(args) -> int:
    for path in exercises.build_student(args.out, args.only or None, keep_answers=args.keep_answers):
        print("wrote", path)
    print(
        f"Hand out {args.out}: each exercise raises NotImplementedError until it is written. Grade a copy with "
        "`python -m helpers grade PATH [--hidden DIR]`; keep hidden checks outside that folder."
    )
    return 0


def _notebook_path(name: str) -> Path:
    path = Path(name)
    if path.exists():
        return path

    if path.suffix in ("", ".ipynb", ".py") and len(path.parts) == 1:
        return notebooks.notebook_paths([path.stem])[0]  # "02" or "02_transformer_from_scratch"
    raise FileNotFoundError(f"{name}: no such notebook. Give a path to a .ipynb or .py file, or a number such as 02.")


def _grade(args) -> int:
    if len(args.notebook) > 1 or Path(args.notebook[0]).is_dir():  # a class
        options = [*(["--hidden", args.hidden] if args.hidden else []), *(["--full"] if args.full else [])]
        options += ["--cell-timeout", str(args.cell_timeout)] if args.cell_timeout else []
        options += ["--no-sandbox"] if args.no_sandbox else []
        book = gradebook.grade_class(args.notebook, args.out, expected=args.expected, jobs=args.jobs, options=options)
        print(f"wrote {book} and a feedback file per submission in {Path(args.out) / 'feedback'}")
        return 0
    path = _notebook_path(args.notebook[0])
    graded = exercises.read_notebook(path)
    reference_path = exercises.reference_for(path)
    reference = exercises.read_notebook(reference_path) if reference_path else graded
    # the reference's questions (and points) decide: a student's copy cannot change what a question is worth
    manual = written.read_sheet(args.manual, exercises.find_questions(reference)) if args.manual else None
    mode = "full mode (the Colab run: minutes to an hour)" if args.full else "quick mode"
    print(f"Grading {path} in {mode}; one line per exercise as it ends.", flush=True)
    quick = not args.full
    executor = exercises.InProcess(quick=quick) if args.in_process else None
    result = exercises.grade(
        path,
        args.hidden,
        executor=executor,
        echo=lambda line: print(" ", line, flush=True),
        quick=quick,
        cell_timeout=args.cell_timeout,
        sandbox=not args.no_sandbox,
    )
    # written only now: the kernel, and every process it started, are gone
    result.written = manual
    print(result.summary())  # each exercise's line was printed as it ended
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
        print("wrote", args.json)
    rows = written.sheet_rows(graded, reference, path.name)
    if rows and manual is None:
        default = Path(args.json).parent if args.json else Path(".")
        sheet = Path(args.sheet) if args.sheet else default / f"{path.stem}.manual.csv"
        if written.filled(sheet):
            print(f"{sheet} already holds points: left as it is (give --sheet another path for a fresh one).")
        else:
            csv_path, md_path = written.write_sheet(rows, sheet)
            print(
                f"wrote the manual grading sheet {csv_path} (and {md_path.name} to read): {len(rows)} written "
                f"questions, {result.written_possible} points. Fill in its points column, then run grade again "
                f"with --manual {csv_path}."
            )
    return 0


def _report(args) -> int:
    report.export(zip_path=args.zip, notebooks=args.notebooks or None, pdf=args.pdf)
    return 0


# ----------------------------------------------------------------------------------------------
# the parser


def _columns(text: str | None) -> tuple[str, ...] | None:
    return tuple(c.strip() for c in text.split(",")) if text else None


def _train(args) -> int:
    train_command(
        data=args.data,
        columns=_columns(args.columns),
        minutes=args.minutes,
        steps=args.steps,
        out=args.out,
        preset=args.preset,
        seed=args.seed,
        overrides=_train_overrides(args) or None,
    )
    return 0


# train's switches (the batch size, and notebook 05's variants), and the TrainConfig field each one sets
TRAIN_FLAGS = {"positions": "positional", "checkpoint_every": "checkpoint_every_steps"} | {
    f: f
    for f in "max_tokens precision attention bottleneck_dim pretrain pretrain_fraction parallel_pairs init_embeddings "
    "optimizer schedule cooldown lr muon_lr_scale label_smoothing qk_norm activation zero_init tie_weights vocab_size max_len dropout compile".split()
}
_SWITCHES = ("qk_norm", "zero_init", "tie_weights", "compile")  # given as 0/1, kept as booleans


def _train_overrides(args) -> dict:
    out = {field: getattr(args, flag) for flag, field in TRAIN_FLAGS.items() if getattr(args, flag) is not None}
    return {k: bool(v) if k in _SWITCHES else v for k, v in out.items()}


def _translate(args) -> int:
    translate_command(args.checkpoint, beams=args.beams, stdin=sys.stdin, stdout=sys.stdout, explain=args.explain)
    return 0


def _evaluate(args) -> int:
    evaluate_command(
        args.checkpoint,
        args.test,
        beams=args.beams,
        out_json=args.json,
        columns=_columns(args.columns),
        length_penalty=args.length_penalty,
    )
    return 0


def _finetune(args) -> int:
    finetune_command(
        args.model,
        args.data,
        args.out,
        columns=_columns(args.columns),
        minutes=args.minutes,
        steps=args.steps,
        seed=args.seed,
        limit=args.limit,
        lora=args.lora,
        batch_size=args.batch_size,
        lr=args.lr,
        precision=args.precision,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m helpers", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    p = sub.add_parser("run-notebooks", help="execute the notebooks headless (quick mode unless --full)")
    p.add_argument("--only", nargs="*", help="notebook numbers, names or .ipynb paths, e.g. --only 01 02")
    p.add_argument("--full", action="store_true", help="full mode (the Colab T4 run) instead of quick mode")
    p.add_argument(
        "--cell-timeout",
        type=float,
        metavar="MINUTES",
        help="stop when one cell runs longer than this (default 5 in quick mode, 30 in full mode)",
    )
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
    p.add_argument(
        "--preset",
        default="cpu",
        help="model and batch sizes: cpu (2 cores; the size measured and chosen for this machine and --minutes), "
        "cpu-fixed (the cpu preset without sizing), t4 (about an hour on a T4)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, help="also save a checkpoint every this many steps")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="tokens per batch, padding included (default: the preset's); lower it after an out-of-memory error",
    )
    p.add_argument(
        "--precision",
        choices=["auto", "bf16_if_native", "fp32", "bf16", "fp16"],
        default=None,
        help="default: the preset's (auto: fp16 + gradient scaler on a T4, bf16 on newer GPUs, fp32 on CPU); "
        "fp16 on a newer GPU rehearses a T4's path, fp32 on a bf16 CPU stands in for a CPU without bf16",
    )
    v = p.add_argument_group("positions, and the variants of notebook 05; each changes one thing of the preset")
    v.add_argument(
        "--attention",
        choices=["dot", "synthesizer"],
        help="how attention scores are made (synthesizer: with --positions learned)",
    )
    v.add_argument(
        "--bottleneck-dim",
        type=int,
        help="a Perceiver-style model with this many latents (e.g. 16; with --positions learned)",
    )
    v.add_argument(
        "--positions",
        choices=["learned", "sinusoidal", "rotary", "alibi", "none"],
        help="position scheme (default: the preset's, rotary as in notebook 02, learned for t4; learned and sinusoidal "
        "add a vector to each token)",
    )
    v.add_argument("--pretrain", choices=["span"], help="span-corruption pretraining on unpaired sentences first")
    v.add_argument("--pretrain-fraction", type=float, help="share of the budget spent pretraining (default 0.3)")
    v.add_argument("--parallel-pairs", type=int, help="train translation on only this many pairs (all by default)")
    v.add_argument("--init-embeddings", help="start token embeddings from a pretrained model's (hub, folder, .gguf)")
    s = p.add_argument_group("training levers (notebook 05; the GPT-2 speedrun's), sizes and the optimiser")
    s.add_argument(
        "--optimizer",
        choices=["adamw", "muon"],
        help="muon (the default): Muon for the blocks' matrices, AdamW for the rest; adamw: AdamW alone",
    )
    s.add_argument(
        "--schedule", choices=["cosine", "wsd"], help="wsd (the default): warm-up, stable, linear cool-down; cosine"
    )
    s.add_argument("--cooldown", type=float, help="wsd: share of the run spent cooling down (default 0.45)")
    s.add_argument("--lr", type=float, help="peak learning rate")
    s.add_argument("--muon-lr-scale", type=float, help="Muon's rate as a multiple of --lr (default 0.7)")
    s.add_argument(
        "--label-smoothing",
        type=float,
        help="share of each target's probability spread over the vocabulary (default 0.1)",
    )
    s.add_argument("--qk-norm", type=int, choices=[0, 1], help="1: unit-RMS queries and keys")
    s.add_argument(
        "--activation", choices=["gelu", "relu2"], help="the feed-forward's non-linearity (relu2: ReLU², the default)"
    )
    s.add_argument("--zero-init", type=int, choices=[0, 1], help="1: output projections start at zero")
    s.add_argument("--tie-weights", type=int, choices=[0, 1], help="0: an output head of its own (untied)")
    s.add_argument("--vocab-size", type=int, help="sentencepiece pieces to learn")
    s.add_argument("--max-len", type=int, help="tokens per sequence: the source budget is about half")
    s.add_argument("--compile", type=int, choices=[0, 1], help="1: static batch shapes, torch.compile'd step (GPU)")
    s.add_argument("--dropout", type=float, help="dropout probability (0 for runs that must repeat across ranks)")
    p.set_defaults(func=_train)

    p = sub.add_parser("translate", help="French on stdin -> English on stdout; at a terminal, a prompt")
    p.add_argument("--checkpoint", required=True, help="a run folder written by train")
    p.add_argument("--beams", type=int, default=1, help="1 = greedy")
    p.add_argument("--explain", action="store_true", help="also the candidates, unseen words and any cut")
    p.set_defaults(func=_translate)

    p = sub.add_parser("evaluate", help="BLEU and chrF, with slices and baselines, on each test set")
    p.add_argument("--checkpoint", required=True)
    p.add_argument(
        "--test",
        action="append",
        default=None,
        help="a file of French<TAB>English lines (the Tatoeba file is recognised) or a public set: "
        "tatoeba-newer-dev (newer Tatoeba sentences people typed: the development file beside the repository, "
        "or downloaded and filtered against the run's training file), wmt14, wmt14-dev (need the network); "
        "repeat for several; default: the run's own new-sentence and in-distribution sets",
    )
    p.add_argument("--columns", default=None, help="column order of --test, e.g. en,fr,attribution (default: fr,en)")
    p.add_argument("--beams", type=int, default=None, help="1 = greedy (default: beam search with 4 beams)")
    p.add_argument("--length-penalty", type=float, default=1.0, help="beam search: score / length ** this")
    p.add_argument("--json", default=None, help="where to write the metrics (default: <checkpoint>/eval.json)")
    p.set_defaults(func=_evaluate)

    p = sub.add_parser(
        "finetune", help="fine-tune a pretrained model on the same pairs; rerun with the same --out to resume"
    )
    p.add_argument(
        "--model",
        required=True,
        help="a hub name (Helsinki-NLP/opus-mt-fr-en, HuggingFaceTB/SmolLM2-135M), a local folder, or a .gguf file",
    )
    p.add_argument("--data", required=True, help="as for train: the Tatoeba file, a French<TAB>English file, 'builtin'")
    p.add_argument("--columns", default=None, help="column order of --data (as for train)")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--minutes", type=float, help="time budget")
    budget.add_argument("--steps", type=int, help="step budget")
    p.add_argument("--out", required=True, help="run folder: checkpoint, test sets, finetune.json")
    p.add_argument("--seed", type=int, default=0, help="as for train: the same seed gives the same split")
    p.add_argument("--limit", type=int, default=None, help="a random sample of this many pairs (as for train)")
    p.add_argument("--batch-size", type=int, default=16, help="pairs per step; lower it after an out-of-memory error")
    p.add_argument("--lr", type=float, default=None, help="default 5e-5 (encoder-decoder) or 1e-4 (decoder-only)")
    p.add_argument("--lora", action="store_true", help="train LoRA adapters only (needs peft): for a model too large")
    p.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16", "fp16"],
        default="auto",
        help="auto: fp16 + gradient scaler on a T4, bf16 on newer GPUs, fp32 on CPU; fp16 on a newer GPU rehearses a T4",
    )
    p.set_defaults(func=_finetune)

    p = sub.add_parser("student", help="write the student notebooks (solutions replaced by stubs) to --out")
    p.add_argument("--out", required=True, help="a folder to hand out; it never holds solutions or hidden checks")
    p.add_argument("--only", nargs="*", help="notebook numbers or names, e.g. --only 02")
    p.add_argument(
        "--keep-answers", action="store_true", help="keep the written questions' model answers (after the deadline)"
    )
    p.set_defaults(func=_student)

    p = sub.add_parser("grade", help="run a notebook in quick mode and score its exercises")
    p.add_argument(
        "notebook",
        nargs="+",
        help="a .ipynb or .py notebook (a student's copy), or a number such as 02; or a class: a folder of "
        "submissions, or several files (then --out, -j and --notebook apply)",
    )
    p.add_argument("--out", default="gradebook", help="a class's gradebook folder (default: gradebook/)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="a class: how many submissions to grade at once")
    p.add_argument(
        "--notebook",
        dest="expected",
        default=None,
        help="a class: the notebook number every submission must be (another week's is listed, not graded)",
    )
    p.add_argument("--hidden", default=None, help="a folder of hidden checks: NN_*.py, cut at '# %%%% Exercise N.M'")
    p.add_argument("--json", default=None, help="also write the result as JSON to this file")
    p.add_argument("--in-process", action="store_true", help="run the cells in this process instead of a kernel")
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the kernel unconfined (by default, on Linux, it cannot read the solutions or change the course's "
        "files); only if the confinement stops a notebook that should run, and say so to the course",
    )
    p.add_argument(
        "--cell-timeout",
        type=float,
        default=None,
        help="seconds a cell may run before its exercise fails (default 300 in quick mode, 1800 with --full)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="run the notebook in full mode (as on Colab: slow), which also grades the exercises marked 'full mode'",
    )
    p.add_argument(
        "--sheet",
        default=None,
        help="where to write the manual grading sheet (default: <notebook name>.manual.csv beside --json, "
        "else in the current folder)",
    )
    p.add_argument(
        "--manual", default=None, help="a filled manual grading sheet (.csv): its written points join the total"
    )
    p.set_defaults(func=_grade)

    p = sub.add_parser("report", help="gather figures, metrics and index.md into reports/report.zip")
    p.add_argument("--zip", default=None, help="where to write the zip (default reports/report.zip)")
    p.add_argument(
        "--notebooks", nargs="*", help="your notebooks (.ipynb) with your answers, for report.tex (saved first)"
    )
    p.add_argument("--pdf", action="store_true", help="also compile report.tex with pdflatex, where installed")
    p.set_defaults(func=_report)
    return parser


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors whose message already says what went wrong and what to do: shown without a traceback."""
    return (ValueError, FileNotFoundError, sources.DownloadError, train.NonFiniteLossError, train.OutOfMemoryError)
    # helpers.hf.translator.ModelLoadError is a ValueError


def main(argv: list[str] | None = None) -> int:
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
