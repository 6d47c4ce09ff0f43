"""What ``train``, ``translate``, ``evaluate`` and ``finetune`` do: one function each, called by the command line
(``helpers.cli``), the notebooks, the benchmarks and the tests alike.

Each reads its inputs, runs the pipeline's stages (``helpers.pipeline``) and says what it did; none parses
arguments (that is ``helpers.cli``'s job) and none keeps state between calls.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

import torch

from . import pipeline, runtime
from .evaluation import translation
from .evaluation.evaluate import (
    DEFAULT_BEAMS,
    evaluate_pairs,
    format_evaluation,
    metrics_record,
    score_newer_dev,
    write_json,
)
from .evaluation.explain import explain_translation
from .hf.loading import load_pretrained
from .run_folder import RunFolder, hypotheses_beside
from .runtime import atomic_write_text
from .text import data as text_data
from .text.sources import load_path
from .text.testsets import NEWER, PUBLIC_TEST_SETS, find_newer_dev, load_newer_sentences, load_public
from .training import checkpoint as ckpt_lib
from .training import distributed, sizing
from .training import train as train_lib
from .training.config import SHAPE_FIELDS, SIZED_PRESETS, preset_config

# ----------------------------------------------------------------------------------------------
# train, translate, evaluate: each is one function, called by its subcommand and by the tests


def train_command(
    data: str,
    columns: tuple[str, ...] | None = None,
    minutes: float | None = None,
    steps: int | None = None,
    out: str | Path = "runs/fr-en",
    preset: str = "cpu",
    seed: int = 0,
    *,
    overrides: dict | None = None,
    progress: bool = True,
    device: str | None = None,
    limit: int | None = None,
    stderr: TextIO | None = None,
    probe_seconds: float | None = None,
    dev_score: bool = True,
):
    """``python -m helpers train``: the run's stages top to bottom, each stage's module called once (the data stage
    :func:`helpers.text.data.prepare_data`, the size, :func:`helpers.pipeline.start_model`, the training loop
    :func:`helpers.training.train.train`) into ``out``, then the run's record. Whether the run continues a checkpoint
    in ``out`` is decided once, here, and handed to every stage.

    With ``preset="cpu"`` and a time budget the model's size is chosen for this machine first
    (``helpers.training.sizing.size_for_machine``: each size's training step measured for ``probe_seconds``), unless
    ``overrides`` fix a shape field; a resumed run keeps the size it started with.

    Rerunning with the same ``out`` resumes from its checkpoint (a different configuration is refused, naming
    the field). ``steps`` makes the run exactly reproducible; ``minutes`` is what the notebook uses.
    ``overrides`` changes preset fields (e.g. ``{"checkpoint_every_steps": 10}``); ``limit`` keeps a random sample
    of that many pairs. Prints what loading, cleaning and encoding dropped, and why; writes ``out/test.tsv`` (the
    held-out pairs, French<TAB>English, for ``evaluate``) and ``out/train_summary.json`` (the same counts included).
    With ``dev_score`` and the newer-sentence development file on this machine (not for the built-in data), the
    trained model is scored on it at the end, greedy (:func:`helpers.evaluation.evaluate.score_newer_dev`).
    """
    err = stderr if stderr is not None else sys.stderr
    # under torchrun: join the other ranks; each says which it is, then only rank 0 speaks and writes
    with distributed.process_group(device, "train", err, progress) as (ranks, dev, err, progress):
        cfg = preset_config(preset, **{**(overrides or {}), "minutes": minutes, "steps": steps, "seed": seed})
        train_lib.Budget(minutes, steps)  # a missing or bad budget fails now, not after the data is prepared
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        folder = RunFolder(out)
        resume = ckpt_lib.resume_point(out)  # decided once: each stage below is told, none looks itself
        if ranks.several:  # under torchrun every rank continues what rank 0 found
            resume = distributed.object_from_main(resume)
        precision = runtime.resolve_precision(dev, cfg.precision)
        runtime.set_seed(seed)
        # the stages, top to bottom: each hands what it made to the next, here
        with distributed.main_first(ranks):  # rank 0 trains and saves the tokenizer; the others load it
            prepared = text_data.prepare_data(
                data, cfg, out, columns=columns, seed=seed, limit=limit, progress=progress,
                static_step=pipeline.static_step(cfg), stderr=err, write_tests=ranks.main,
                reuse_tokenizer=resume.resumes or not ranks.main,  # the other ranks load what rank 0 saved
            )  # fmt: skip
        size_record = None
        if preset in SIZED_PRESETS and not set(SHAPE_FIELDS) & set(overrides or {}):  # a shape given: fixed size
            examples, vocab_size = prepared.train_batcher.examples, prepared.tokenizer.vocab_size
            cfg, size_record = sizing.size_for_run(
                cfg, examples, vocab_size, resume.sized_by, dev, probe_seconds, err if progress else None
            )
            if ranks.several:  # each rank measured its own step: rank 0's choice holds for all
                cfg, size_record = distributed.object_from_main((cfg, size_record))
        built = pipeline.start_model(
            cfg, prepared, out, dev, resume=resume, progress=progress, stderr=err, describe=progress
        )
        if progress and built.transfer is not None:
            print("Embeddings:", built.transfer.describe(), file=err)
        data_config = {"data": {k: v for k, v in prepared.info.items() if k != "pairs"}}  # a resume must agree
        result = train_lib.train(
            built.model, prepared.train_batcher, prepared.valid_batches, built.translate_cfg, out, device=dev,
            resume_from=resume.translation, extra_config=data_config, progress=progress,
        )  # fmt: skip
        if not ranks.main:  # the checkpoint, metrics and the dev score are rank 0's to write
            return result
        model_cfg, pretrained = built.model.config, built.pretrained
        summary = {
            **train_lib.training_summary(result, cfg, preset=preset, precision=precision),
            "parameters": built.parameters,
            "device": str(dev),
            "hardware": runtime.hardware_name(dev),
            "processes": ranks.world,  # 1, or torchrun's world size: each rank one device, its batches sharded
            "model": model_cfg.to_dict(),
            "data": {**prepared.info, "report": prepared.summary()},
            "test_files": {name: str(path) for name, path in folder.test_sets.items()},
            "sizing": size_record,
            "pretraining": None
            if pretrained is None
            else {"steps": pretrained.steps, "minutes": pretrained.seconds / 60, "val_loss": pretrained.val_loss},
            "torch": torch.__version__,
        }
        if dev_score and data != "builtin":
            summary["newer_dev"] = score_newer_dev(built.model, prepared.tokenizer, out, err if progress else None)
        runtime.atomic_write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", folder.train_summary)
        if progress:
            vl = (
                ""
                if result.val_loss is None
                else f", validation loss {result.val_loss:.3f} (perplexity {result.val_ppl:.1f})"
            )
            print(
                f"Done: {result.steps} steps, {result.tokens:,} target tokens in {result.seconds / 60:.1f} min "
                f"({result.tokens_per_s:,.0f} tokens/s){vl}.\nCheckpoint: {result.checkpoint}\n"
                f"Evaluate on its two test sets: python -m helpers evaluate --checkpoint {out}",
                file=err,
            )
        return result


def translate_command(
    checkpoint: str | Path,
    beams: int = 1,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    *,
    explain: bool = False,
    interactive: bool | None = None,
) -> int:
    """``python -m helpers translate``: French lines on ``stdin``, English lines on ``stdout``, one for one.

    With a terminal on ``stdin`` (or ``interactive=True``) it is a prompt instead: one French line in, its translation
    out at once, history with the arrow keys, Ctrl-D to leave; ``explain`` adds the beam's candidates, the words no
    training pair holds and any cut (:func:`helpers.evaluation.explain.explain_translation`). Returns the number of
    lines translated. Warnings (long sources translated in pieces) go to ``stderr``.
    """
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    run = pipeline.load_run(checkpoint)
    interactive = stdin.isatty() if interactive is None else interactive
    if interactive:
        return _prompt(run, beams, explain, stdin, stdout, err)
    lines = stdin.read().splitlines()
    if explain:
        out = [_explained(run, line, beams) for line in lines]
    else:
        out = translation.translate_lines(run.translator, lines, beams=beams, err=err)
    for line in out:
        stdout.write(line + "\n")
    stdout.flush()
    return len(out)


def _explained(run, line: str, beams: int) -> str:
    if not run.scratch:  # a fine-tuned Hugging Face model: its translation only
        return run.model.translate([line], beams=beams)[0] + "\n  note: --explain takes apart models made by `train`"
    return explain_translation(run.model, run.tokenizer, line, beams=beams, word_table=run.words).to_text()


def _prompt(run, beams: int, explain: bool, stdin, stdout, err) -> int:
    """The terminal prompt of ``translate``: ``fr>`` reads a line, ``en>`` answers; an empty line gets a hint."""
    try:
        # optional (not on Windows)
        import readline  # noqa: F401  (input() then keeps a history: the arrow keys recall earlier lines)
    except ImportError:  # Windows: no history, the rest works
        pass
    print(f"Translating French with {run.path} ({'beam ' + str(beams) if beams > 1 else 'greedy'}). Type a sentence "
          "and press Enter; Ctrl-D (Ctrl-Z Enter on Windows) to leave.", file=err, flush=True)  # fmt: skip
    done = 0
    while True:
        try:
            line = input("fr> ") if stdin is sys.stdin else _read_line(stdin, stdout, "fr> ")
        except EOFError:
            print(file=stdout)
            return done
        except KeyboardInterrupt:  # Ctrl-C: a fresh line, not a traceback
            print("\n(Ctrl-D to leave)", file=stdout)
            continue
        if not line.strip():
            print("   (an empty line: type a French sentence, or Ctrl-D to leave)", file=stdout, flush=True)
            continue
        answer = _explained(run, line, beams) if explain else translation.translate_lines(run.translator, [line], beams=beams,
                                                                                err=err)[0]  # fmt: skip
        print("en> " + answer, file=stdout, flush=True)
        done += 1


def _read_line(stdin, stdout, prompt: str) -> str:
    stdout.write(prompt)
    stdout.flush()
    line = stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\r\n")


def evaluate_command(
    checkpoint: str | Path,
    tests: str | Path | list | None = None,
    beams: int | None = None,
    out_json: str | Path | None = None,
    *,
    columns: tuple[str, ...] | None = None,
    length_penalty: float = 1.0,
    stdout: TextIO | None = None,
) -> dict:
    """``python -m helpers evaluate``: score a run on test sets; print what was read and the scores; write JSON.

    ``tests`` are files or public set names (``helpers.text.testsets.PUBLIC_TEST_SETS``); without any, the run's own
    two test sets (new sentences first, then in-distribution). A file is read like ``train --data``
    (French<TAB>English by default, ``columns`` for another order, the Tatoeba file recognised); lines it cannot
    use are counted and named, never dropped silently. ``beams`` defaults to
    :data:`helpers.evaluation.evaluate.DEFAULT_BEAMS`. The JSON (default ``<checkpoint>/eval.json``) has the layout of
    :func:`helpers.evaluation.evaluate.metrics_record`, one evaluation per test set; the translations go beside it, one
    file per set. Returns the record.
    """
    stdout = stdout if stdout is not None else sys.stdout
    beams = DEFAULT_BEAMS if beams is None else beams
    run = pipeline.load_run(checkpoint)
    folder = RunFolder(run.path)
    if tests is None or tests == []:
        named = list(folder.test_sets.items())
        missing = [str(p) for _, p in named if not p.is_file()]
        if missing:
            raise FileNotFoundError(
                f"{run.path} lacks {', '.join(missing)}: pass test files with --test (runs made before the "
                "new-sentence set have only test.tsv)."
            )
        own_columns = ("fr", "en")
    else:
        named = [(None, t) for t in ([tests] if isinstance(tests, (str, Path)) else tests)]
        own_columns = columns
    if run.words is None:
        print("note: no training word table in the run folder: no unseen-word slice, no word-by-word baseline.",
              file=stdout)  # fmt: skip
    evaluations, reports = [], {}
    out_json = Path(out_json) if out_json is not None else folder.eval_record
    for name, test in named:
        if str(test) in PUBLIC_TEST_SETS:
            pairs, load_report = load_public(str(test))
            label = f"{test}: {PUBLIC_TEST_SETS[str(test)][3]}"
        elif str(test) == NEWER:
            pairs, load_report, label = load_newer_sentences(
                None if find_newer_dev() else pipeline.training_pairs_of(run)
            )
        else:
            pairs, load_report = load_path(test, own_columns)
            label = name or Path(test).name
        report = text_data.data_summary({"load": load_report})
        print(text_data.format_data_summary(report), file=stdout)
        evaluation, hyps = evaluate_pairs(
            run.translator, pairs, test_set=label, words=run.words, beams=beams, length_penalty=length_penalty
        )
        print(format_evaluation(evaluation, checkpoint=run.path), file=stdout)
        evaluations.append(evaluation)
        reports[label] = {"test_file": str(test), "report": report}
        hyp_path = hypotheses_beside(out_json, test)
        atomic_write_text("".join(h + "\n" for h in hyps), hyp_path)
        print(f"translations: {hyp_path}", file=stdout)
    record = metrics_record(
        model={
            "name": run.name,
            "parameters": run.parameters,
            "checkpoint": str(run.path),
            "step": run.step,
        },
        evaluations=evaluations,
        data={"test_sets": reports},
    )
    write_json(record, out_json)
    print(f"wrote {out_json}", file=stdout)
    return record


def finetune_command(
    model: str,
    data: str,
    out: str | Path,
    columns: tuple[str, ...] | None = None,
    minutes: float | None = None,
    steps: int | None = None,
    seed: int = 0,
    *,
    limit: int | None = None,
    lora: bool = False,
    batch_size: int = 16,
    lr: float | None = None,
    precision: str = "auto",
    device: str | None = None,
    progress: bool = True,
    stderr: TextIO | None = None,
):
    """``python -m helpers finetune``: the pairs of ``train`` (same loading, cleaning and leak-free split for the same
    data, seed and limit, hence the same test sets), a pretrained model from ``model`` (hub name, local folder or
    GGUF file), then :func:`helpers.hf.finetune.finetune` into ``out``. Rerunning with the same ``out`` resumes.
    Writes ``out/test_new.tsv`` and ``out/test.tsv`` and the training words, so that ``evaluate --checkpoint out``
    scores it exactly as it scores a scratch run. Returns the :class:`helpers.hf.finetune.FinetuneResult`."""
    # transformers, peft and datasets load with it: 2.6 s (python -X importtime), which no other command needs
    from .hf.finetune import FinetuneConfig, finetune  # slow start-up (2.6 s)

    err = stderr if stderr is not None else sys.stderr
    train_lib.Budget(minutes, steps)  # a missing or bad budget fails before the model loads
    out = Path(out)
    if ckpt_lib.find_checkpoint(out) is not None:
        raise ValueError(f"{out} holds a scratch-model run (from `train`): give finetune a folder of its own.")
    out.mkdir(parents=True, exist_ok=True)
    # under torchrun: Trainer runs DDP in the group joined here; rank 0 writes the test sets, checkpoints and model
    with distributed.process_group(device, "finetune", err, progress) as (ranks, dev, err, progress):
        stage = pipeline.prepare_pairs(data, out, columns=columns, seed=seed, limit=limit, stderr=err, write=ranks.main)
        splits = stage.splits
        runtime.set_seed(seed)
        translator = load_pretrained(model, device=dev)
        print(f"Model: {translator.describe()}; device {dev}.", file=err)
        for note in translator.notes:
            print(f"note: {note}", file=err)
        data_info = {**text_data.data_info(data, splits, None, None, columns=columns, limit=limit), "seed": seed}
        cfg = FinetuneConfig(lr=lr, batch_size=batch_size, lora=lora, seed=seed, precision=precision)
        result = finetune(translator, splits.train, out, minutes=minutes, steps=steps, cfg=cfg, base_model=str(model),
                          data=data_info, monitor=splits.valid[:200], monitor_every_minutes=(minutes or 0) / 5 or None,
                          progress=progress, stderr=err)  # fmt: skip
        print(
            f"Done: {result.steps} steps, {result.pairs:,} pairs, {result.tokens:,} target tokens in "
            f"{result.seconds / 60:.1f} min ({result.precision}); {result.trainable:,} of {result.parameters:,} "
            f"parameters trained; last loss {result.loss}.\nValidation BLEU along the way: "
            + ", ".join(f"{m['minutes']:.1f} min {m['bleu']:.1f}" for m in result.monitor)
            + f"\nEvaluate on its two test sets: python -m helpers evaluate --checkpoint {out}",
            file=err,
        )
        return result
