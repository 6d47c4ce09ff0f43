"""`python -m helpers ...` end to end: the same functions as the notebooks, through the command line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers.cli import build_parser


def _run(*args, stdin: str | None = None, check: bool = True, patch: str = "") -> subprocess.CompletedProcess:
    """``python -m helpers ARGS``; with ``patch``, that Python code runs first in the same process (a planted bug)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    start = ["-c", f"{patch}\nimport sys\nfrom helpers.cli import main\nsys.exit(main(sys.argv[1:]))"] if patch else []
    proc = subprocess.run(
        [sys.executable, *(start or ["-m", "helpers"]), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"python -m helpers {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


TINY = ("--data", "builtin", "--preset", "tiny", "--max-tokens", "256")


@pytest.fixture(scope="module")
def three_and_six_steps(tmp_path_factory):
    """Two finished runs of the same settings: 3 steps (to resume) and 6 steps uninterrupted (what it must become)."""
    folder = tmp_path_factory.mktemp("resume")
    for steps in (3, 6):
        _run("train", *TINY, "--steps", str(steps), "--out", str(folder / f"steps{steps}"))
    return folder / "steps3", folder / "steps6"


def _saved(run: Path) -> dict:
    return torch.load(run / "checkpoint.pt", weights_only=True, map_location="cpu")


def resume_problems(resumed: Path, said: str, uninterrupted: Path) -> list[str]:
    """What shows that rerunning `train --steps 6` on a 3-step run did not continue it ([] when it did): the
    resume is announced at step 3 and recorded, the first session's history is kept with no step repeated, and
    the weights equal those of 6 uninterrupted steps (same batches, optimizer moments, RNG)."""
    problems = []
    if "Resuming from" not in said or "at step 3 " not in said:
        problems.append("the rerun did not say it resumed at step 3")
    summary = json.loads((resumed / "train_summary.json").read_text())
    if summary["resumed_from"] != 3 or summary["steps"] != 6:
        problems.append(f"resumed_from {summary['resumed_from']}, steps {summary['steps']}: not 3 then 6")
    got, want = _saved(resumed), _saved(uninterrupted)
    steps = [h["step"] for h in json.loads(got["history"])]
    if steps != [3, 6]:
        problems.append(f"history steps {steps}, not [3, 6]: the first session's record lost or a step repeated")
    if json.loads(got["train_state"])["tokens"] != json.loads(want["train_state"])["tokens"]:
        problems.append("a different number of target tokens than 6 uninterrupted steps")
    differ = [k for k in want["model"] if not torch.equal(got["model"][k], want["model"][k])]
    if differ:
        problems.append(f"weights differ from 6 uninterrupted steps in {len(differ)} tensors, e.g. {differ[0]}")
    return problems


@pytest.mark.training
def test_train_translate_evaluate_round_trip(tmp_path, three_and_six_steps):
    out = tmp_path / "run"
    shutil.copytree(three_and_six_steps[0], out)
    saved = json.loads((out / "checkpoint.json").read_text())
    assert saved["step"] == 3
    assert saved["config"]["train"]["max_tokens"] == 256, "--max-tokens must reach the training configuration"

    again = _run("train", *TINY, "--steps", "6", "--out", str(out))
    assert resume_problems(out, again.stderr, three_and_six_steps[1]) == []
    before = (out / "checkpoint.pt").read_bytes()
    done = _run("train", *TINY, "--steps", "6", "--out", str(out))
    assert "Nothing to do" in done.stderr and "(step 6)" in done.stderr
    assert (out / "checkpoint.pt").read_bytes() == before, "a run already at its budget must not train or save again"

    translated = _run("translate", "--checkpoint", str(out), stdin="Le chat dort.\n\nJe mange une pomme.\n")
    lines = translated.stdout.split("\n")
    assert len(lines[:-1]) == 3 and lines[1] == "", "one English line per French line; an empty line stays empty"

    test = tmp_path / "test.tsv"
    test.write_text(
        "Le chat dort.\tThe cat is sleeping.\nJe mange une pomme.\tI am eating an apple.\n", encoding="utf8"
    )
    metrics_path = tmp_path / "eval.json"
    scored = _run("evaluate", "--checkpoint", str(out), "--test", str(test), "--json", str(metrics_path))
    assert "BLEU" in scored.stdout and "nrefs:1" in scored.stdout, "scores are printed with their sacreBLEU signature"
    metrics = json.loads(metrics_path.read_text())
    assert {"bleu", "chrf", "bleu_signature"} <= set(metrics["evaluations"][0])


RESUME_MUTANTS = {
    # the rerun starts over from fresh weights and ignores the checkpoint (then overwrites it)
    "retrains from scratch": (
        "import helpers.training.train as T\n_real = T.train\n"
        "T.train = lambda *a, **k: _real(*a, **{**k, 'resume_from': None})"
    ),
    # weights and optimizer restored, but the data stream restarts at the first batch: steps 4-6 repeat 1-3's data
    "restarts the data": (
        "import helpers.training.train as T\n"
        "T.TrainingRun._restore_data = lambda self, saved: T._epoch_stream(self.batcher, self.data_state)"
    ),
    # everything but the AdamW moments: the update after the resume differs
    "drops the optimizer state": (
        "import helpers.training.train as T\nimport helpers.training.checkpoint as C\n_real = C.restore\n"
        "T.ckpt_lib.restore = lambda ckpt, **k: _real(ckpt, **{**k, 'optimizer': None})"
    ),
}


@pytest.mark.training
@pytest.mark.parametrize("mutant", list(RESUME_MUTANTS))
def test_the_resume_check_fails_on_a_rerun_that_does_not_continue(tmp_path, three_and_six_steps, mutant):
    """Each planted resume bug, run through the command line, is caught by resume_problems."""
    out = tmp_path / "run"
    shutil.copytree(three_and_six_steps[0], out)
    again = _run("train", *TINY, "--steps", "6", "--out", str(out), patch=RESUME_MUTANTS[mutant])
    assert resume_problems(out, again.stderr, three_and_six_steps[1]) != []


@pytest.mark.training
def test_a_different_configuration_is_refused_with_the_field_named(tmp_path):
    out = tmp_path / "run"
    _run("train", "--data", "builtin", "--steps", "2", "--out", str(out), "--preset", "tiny")
    refused = _run(
        "train",
        "--data",
        "builtin",
        "--steps",
        "4",
        "--out",
        str(out),
        "--preset",
        "tiny",
        "--max-tokens",
        "128",
        check=False,
    )
    assert refused.returncode == 2
    assert "train.max_tokens: 512 in the checkpoint, 128 now" in refused.stderr
    assert "Traceback" not in refused.stderr, "a user error is a message, not a traceback"


def test_missing_data_file_is_a_message_not_a_traceback(tmp_path):
    proc = _run(
        "train", "--data", str(tmp_path / "nope.tsv"), "--steps", "1", "--out", str(tmp_path / "r"), check=False
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no such file" in proc.stderr and "builtin" in proc.stderr, "says what is wrong and what to do instead"


def test_budget_is_required_and_exclusive():
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--data", "builtin", "--out", "x"])
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--data", "builtin", "--out", "x", "--steps", "3", "--minutes", "1"])
    args = parser.parse_args(["train", "--data", "builtin", "--out", "x", "--steps", "3"])
    assert args.steps == 3 and args.minutes is None and args.preset == "cpu"


@pytest.mark.training
def test_train_prints_and_records_every_line_it_could_not_use(tmp_path):
    """3,000 good lines plus planted bad ones: each kind is counted, with the line where it first occurs."""
    from helpers.text.corpus import builtin_corpus

    good = [f"{fr}\t{en}".encode() for fr, en in builtin_corpus(3000, seed=3, difficulty=1)]
    no_tab = [f"Ligne sans tabulation numéro {i}.".encode() for i in range(17)]
    empty_en = [f"Une phrase française {i}.\t ".encode() for i in range(11)]
    bad_utf8 = [b"Caf\xe9 cr\xe8me\tCoffee " + str(i).encode() for i in range(9)]  # Latin-1, not UTF-8
    lines = good[:1000] + no_tab + good[1000:2000] + empty_en + good[2000:] + bad_utf8
    data = tmp_path / "planted.tsv"
    data.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "run"
    proc = _run("train", "--data", str(data), "--steps", "1", "--out", str(out), "--preset", "tiny")
    said = proc.stderr
    assert "lines read      3,037" in said and "pairs kept      3,000" in said and "skipped            37" in said
    assert "17  missing tab (fewer than 2 columns) (first at line 1,001)" in said
    assert "11  empty English side (first at line 2,018)" in said
    assert "9  invalid UTF-8 (first at line 3,029)" in said
    assert "removed by cleaning" in said and "pairs longer than the model's 48 tokens (left out)" in said
    report = json.loads((out / "train_summary.json").read_text())["data"]["report"]
    assert report["lines_read"] == 3037 and report["pairs_kept"] == 3000
    assert report["skipped"] == {
        "missing tab (fewer than 2 columns)": {"count": 17, "first_line": 1001},
        "empty English side": {"count": 11, "first_line": 2018},
        "invalid UTF-8": {"count": 9, "first_line": 3029},
    }
    removed = sum(report["removed_by_cleaning"].values())
    assert report["pairs_after_cleaning"] == 3000 - removed == sum(report["split"].values())
    assert set(report["too_long_for_max_len"]) == {"train", "valid"}
