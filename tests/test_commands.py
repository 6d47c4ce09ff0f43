"""helpers.commands: what ``train``, ``translate`` and ``evaluate`` do, called as the notebooks call them (in-process,
streams given): the run's record and its last words, a bad budget refused before anything is read, the prompt that
a terminal gets, ``--explain`` on a fine-tuned run (its translation and a note), and what ``evaluate`` records and
says about the run it scores.

More of these functions' behaviour is tested beside the module each stage belongs to: translations line for line and
the metrics layout (tests/evaluation/test_evaluate.py), ``--explain`` and the prompt's hints
(tests/evaluation/test_explain.py), resuming (tests/training/test_checkpoint.py), sizing (tests/training/test_sizing.py),
``finetune`` (tests/hf/test_finetune.py); through ``python -m helpers`` in a subprocess, tests/test_cli.py."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from pathlib import Path

import pytest

from helpers import commands, pipeline
from helpers.nn.variants import num_parameters

STEPS = 3


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run folder from ``train_command`` (3 steps of the tiny preset on 300 invented pairs in a file, so the
    newer-sentence stand-in of conftest is scored at the end), and what it printed."""
    from helpers.text.corpus import builtin_corpus

    folder = tmp_path_factory.mktemp("commands")
    data = folder / "pairs.tsv"
    data.write_text("".join(f"{fr}\t{en}\n" for fr, en in builtin_corpus(300, seed=5, difficulty=1)), encoding="utf-8")
    err = io.StringIO()
    commands.train_command(str(data), steps=STEPS, out=folder / "run", preset="tiny", stderr=err)
    return folder / "run", err.getvalue()


@pytest.fixture(scope="module")
def run(trained):
    return pipeline.load_run(trained[0], device="cpu")


def _summary(run_dir) -> dict:
    return json.loads((run_dir / "train_summary.json").read_text())


def test_train_command_records_the_run_and_says_how_to_evaluate_it(trained, run, _newer_sentences):
    run_dir, said = trained
    summary = _summary(run_dir)
    assert summary["steps"] == STEPS and summary["preset"] == "tiny" and summary["processes"] == 1
    assert summary["model"] == run.model.config.to_dict(), "the record's model is the checkpoint's"
    assert summary["parameters"] == num_parameters(run.model.config)
    assert summary["data"]["report"]["lines_read"] == 300 and summary["pretraining"] is None
    tests = list(summary["test_files"].values())
    assert len(tests) == 2 and all(p.startswith(str(run_dir)) for p in tests)
    assert all(Path(p).is_file() for p in tests), "the record names the test sets train wrote"
    lines = sum(1 for _ in _newer_sentences.open(encoding="utf-8"))
    assert summary["newer_dev"]["n"] == lines and summary["newer_dev"]["beams"] == 1, "scored greedy, at the end"
    assert f"Done: {STEPS} steps" in said
    assert said.rstrip().endswith(f"Evaluate on its two test sets: python -m helpers evaluate --checkpoint {run_dir}")


def test_without_dev_score_the_newer_sentences_are_not_scored(tmp_path):
    from helpers.text.corpus import builtin_corpus

    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{fr}\t{en}\n" for fr, en in builtin_corpus(120, seed=6, difficulty=1)), encoding="utf-8")
    commands.train_command(str(data), steps=1, out=tmp_path / "run", preset="tiny", progress=False, dev_score=False)
    summary = _summary(tmp_path / "run")
    assert summary["steps"] == 1 and "newer_dev" not in summary


@pytest.mark.parametrize(
    "budget, says",
    [({}, "Give a budget"), ({"steps": 0}, "steps must be a whole number"), ({"minutes": -1.0}, "minutes must be")],
)
def test_a_bad_budget_is_refused_before_the_data_is_read_or_the_folder_made(tmp_path, budget, says):
    """The data file does not exist either: the budget's message comes first, and no run folder is left behind."""
    with pytest.raises(ValueError, match=says):
        commands.train_command(str(tmp_path / "missing.tsv"), out=tmp_path / "run", preset="tiny", **budget)
    with pytest.raises(ValueError, match=says):
        commands.finetune_command("no/such-model", str(tmp_path / "missing.tsv"), tmp_path / "ft", **budget)
    assert not (tmp_path / "run").exists() and not (tmp_path / "ft").exists()


def _test_file(tmp_path):
    path = tmp_path / "two.tsv"
    path.write_text("Le chat dort.\tThe cat is sleeping.\nJe mange.\tI am eating.\n", encoding="utf-8")
    return path


def test_evaluate_command_records_which_model_it_scored_and_where_it_wrote(trained, run, tmp_path):
    run_dir, _ = trained
    test, out_json, stdout = _test_file(tmp_path), tmp_path / "scores.json", io.StringIO()
    record = commands.evaluate_command(run_dir, [test], beams=1, out_json=out_json, stdout=stdout)
    assert record["model"] == {
        "name": f"scratch ({run_dir.name})",
        "parameters": num_parameters(run.model.config),
        "checkpoint": str(run_dir),
        "step": STEPS,
    }
    assert record["data"]["test_sets"]["two.tsv"]["test_file"] == str(test)
    assert json.loads(out_json.read_text()) == json.loads(json.dumps(record)), "the JSON is the record returned"
    printed = stdout.getvalue()
    assert f"translations: {tmp_path / 'scores.two.hyp.txt'}" in printed and f"wrote {out_json}" in printed
    assert "no training word table" not in printed, "this run has one"


def test_evaluate_without_the_runs_own_test_sets_asks_for_test_files(trained, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(trained[0], run_dir)
    gone = Path(next(iter(_summary(trained[0])["test_files"].values()))).name  # one of the two test sets
    (run_dir / gone).unlink()
    with pytest.raises(FileNotFoundError, match="pass test files with --test") as err:
        commands.evaluate_command(run_dir, None, beams=1, stdout=io.StringIO())
    assert str(run_dir / gone) in str(err.value), "names the file it looked for"


def test_evaluate_says_when_the_run_has_no_word_table(trained, run, tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "load_run", lambda *a, **k: dataclasses.replace(run, words=None))
    stdout = io.StringIO()
    record = commands.evaluate_command(trained[0], [_test_file(tmp_path)], beams=1, out_json=tmp_path / "e.json",
                                       stdout=stdout)  # fmt: skip
    assert "note: no training word table in the run folder" in stdout.getvalue()
    assert record["evaluations"][0]["n"] == 2, "and scores all the same"


class _Terminal(io.StringIO):
    """Lines typed at a terminal: ``isatty`` is True; an entry that is an exception is raised (Ctrl-C) instead."""

    def __init__(self, *typed):
        super().__init__()
        self.typed = list(typed)

    def isatty(self):
        return True

    def readline(self, *args):
        if not self.typed:
            return ""  # Ctrl-D
        line = self.typed.pop(0)
        if isinstance(line, BaseException):
            raise line
        return line


def test_translate_is_a_prompt_on_a_terminal_and_a_filter_on_a_pipe(trained):
    run_dir, _ = trained
    piped = io.StringIO()
    assert commands.translate_command(run_dir, stdin=io.StringIO("Il dort.\n"), stdout=piped, stderr=io.StringIO()) == 1
    (translation,) = piped.getvalue().splitlines()
    typed, err = io.StringIO(), io.StringIO()
    assert commands.translate_command(run_dir, stdin=_Terminal("Il dort.\n"), stdout=typed, stderr=err) == 1
    assert typed.getvalue() == f"fr> en> {translation}\nfr> \n", "the same translation, after the prompt"
    assert err.getvalue().startswith(f"Translating French with {run_dir} (greedy).")


def test_ctrl_c_at_the_prompt_gives_a_fresh_line_not_a_traceback(trained):
    run_dir, _ = trained
    out, err = io.StringIO(), io.StringIO()
    n = commands.translate_command(run_dir, beams=2, stdin=_Terminal(KeyboardInterrupt(), "Il dort.\n"), stdout=out,
                                   stderr=err)  # fmt: skip
    assert n == 1 and out.getvalue().count("en> ") == 1
    assert out.getvalue().startswith("fr> \n(Ctrl-D to leave)\nfr> en> ")
    assert "(beam 2)" in err.getvalue()


class _FineTuned:
    """Stands in for a fine-tuned Hugging Face model (helpers.hf.translator.HFTranslator): it translates, and records
    each call; it has no configuration or beam candidates for ``--explain`` to take apart."""

    name = "tiny-finetuned"

    def __init__(self):
        self.calls = []

    def parameters(self) -> int:
        return 1

    def translate(self, sources, beams=1, **kwargs):
        self.calls.append((list(sources), beams))
        return [f"<{s}>" for s in sources]


def test_translate_explain_on_a_finetuned_run_translates_and_says_what_explain_takes_apart(tmp_path, monkeypatch):
    """``--explain`` on a folder written by ``finetune``: the model's own translation (at the beams asked) and a note,
    from a pipe and at the prompt, instead of taking apart a model that is not ours. (A real fine-tuned folder read
    back is tests/hf/test_finetune.py's; a tiny one generates to its length limit, over 30 s here.)"""
    model = _FineTuned()
    finetuned = pipeline.Run(model, None, {}, 5, tmp_path / "ft", None, translator=model, scratch=False)
    monkeypatch.setattr(pipeline, "load_run", lambda *a, **k: finetuned)
    note = "  note: --explain takes apart models made by `train`"
    out = io.StringIO()
    lines = io.StringIO("Il dort.\nJe mange.\n")
    n = commands.translate_command(
        tmp_path / "ft", beams=3, stdin=lines, stdout=out, stderr=io.StringIO(), explain=True
    )
    assert n == 2 and out.getvalue() == f"<Il dort.>\n{note}\n<Je mange.>\n{note}\n"
    assert model.calls == [(["Il dort."], 3), (["Je mange."], 3)], "one line at a time, at the beams asked"
    typed = io.StringIO()
    prompt = _Terminal("Il dort.\n")
    n = commands.translate_command(tmp_path / "ft", stdin=prompt, stdout=typed, stderr=io.StringIO(), explain=True)
    assert n == 1 and typed.getvalue() == f"fr> en> <Il dort.>\n{note}\nfr> \n"
