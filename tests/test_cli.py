"""`python -m helpers ...` end to end: the same functions as the notebooks, through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.__main__ import build_parser


def _run(*args, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "helpers", *args], input=stdin, capture_output=True, text=True, env=env, timeout=300
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"python -m helpers {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def test_train_translate_evaluate_round_trip(tmp_path):
    out = tmp_path / "run"
    _run("train", "--data", "builtin", "--steps", "6", "--out", str(out), "--preset", "tiny", "--max-tokens", "256")
    saved = json.loads((out / "checkpoint.json").read_text())
    assert saved["step"] == 6
    assert saved["config"]["train"]["max_tokens"] == 256, "--max-tokens must reach the training configuration"

    again = _run(
        "train", "--data", "builtin", "--steps", "6", "--out", str(out), "--preset", "tiny", "--max-tokens", "256"
    )
    assert "Nothing to do" in again.stdout + again.stderr or "Resuming" in again.stdout + again.stderr

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
    assert {"bleu", "chrf", "bleu_signature"} <= set(metrics)


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
