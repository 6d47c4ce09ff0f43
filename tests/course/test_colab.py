"""helpers.course.colab: the release every notebook installs, what Colab lacks and installs (never torch), the
accelerator report, and Google Drive. Colab itself is played by a stand-in ``google.colab`` module; pip and
``input`` are replaced, so nothing is installed, mounted or asked here.

That the dependency list is pyproject.toml's is tests/test_package.py's; the first cell's installer is
tests/course/test_bootstrap.py's."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import types
from importlib import metadata
from pathlib import Path

import pytest
import torch

from helpers import runtime
from helpers.course import colab

ROOT = Path(__file__).resolve().parents[2]


def test_the_pin_is_this_repository_at_this_release():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert colab.COURSE_PIN == f"git+{colab.REPO_URL}@v{version}", (
        "the notebooks must install the release they belong to: update COURSE_PIN with the version"
    )


def test_accelerator_report_on_cpu():
    acc = colab.setup(quiet=True)

    if not torch.cuda.is_available():
        assert acc.device == "cpu" and not acc.fp16_native
        assert acc.bf16_native == runtime.cpu_has_native_bf16(), "one bf16 check for the report and the presets"
    assert "bf16 native" in acc.describe()
    json.dumps(acc.as_dict())


def test_required_packages_leaves_out_torch_extras_and_version_specifiers(monkeypatch):
    listed = ["numpy>=1.26", "torch==2.13.0", "sacrebleu[ja] >=2.4", "pytest>=8; extra == 'dev'", "tqdm"]
    monkeypatch.setattr(metadata, "requires", lambda name: listed if name == colab.PACKAGE else [])
    assert colab.required_packages() == ["numpy", "sacrebleu", "tqdm"]


def test_required_packages_reads_pyproject_in_a_bare_checkout_and_says_what_to_do_without_one(monkeypatch):
    installed = colab.required_packages()

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "requires", not_installed)
    assert colab.required_packages() == installed, "the same list, read from pyproject.toml"
    monkeypatch.setattr(runtime, "repo_root", lambda: None)
    with pytest.raises(RuntimeError, match=r"not installed: run pip install -e \."):
        colab.required_packages()


@pytest.fixture
def on_colab(monkeypatch):
    """A stand-in ``google.colab`` package (with ``drive``) in sys.modules: in_colab() is then True."""
    google = types.ModuleType("google")
    google_colab = types.ModuleType("google.colab")
    drive = types.ModuleType("google.colab.drive")
    drive.mounted = []
    drive.mount = drive.mounted.append
    google_colab.drive = drive
    google.colab = google_colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", google_colab)
    monkeypatch.setitem(sys.modules, "google.colab.drive", drive)
    return drive


def test_in_colab_only_where_google_colab_is(on_colab, monkeypatch):
    assert colab.in_colab() is True
    monkeypatch.delitem(sys.modules, "google.colab")
    monkeypatch.delitem(sys.modules, "google")
    assert colab.in_colab() is False, "no google package at all: not Colab (and no exception)"


def test_missing_packages_are_the_required_ones_that_do_not_import(monkeypatch):
    monkeypatch.setattr(colab, "required_packages", lambda: ["numpy", "no_such_course_probe", "json"])
    assert colab.missing_packages() == ["no_such_course_probe"]


def _recording_pip(monkeypatch) -> list[list[str]]:
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: calls.append(list(args)))
    return calls


def test_setup_installs_only_what_colab_lacks_and_never_torch(on_colab, monkeypatch, capsys):
    calls = _recording_pip(monkeypatch)
    monkeypatch.setattr(colab, "missing_packages", lambda: ["sacrebleu", "sentencepiece"])
    acc = colab.setup()
    assert calls == [[sys.executable, "-m", "pip", "install", "-q", "sacrebleu", "sentencepiece"]]
    out = capsys.readouterr().out
    assert "Installing what this Colab runtime lacks: sacrebleu, sentencepiece" in out
    assert f"Running on: {acc.describe()}" in out
    if acc.device == "cpu":
        assert "Runtime > Change runtime type > T4 GPU" in out, "on a CPU runtime: how to get the GPU"
    monkeypatch.setattr(colab, "missing_packages", lambda: [])
    colab.setup(quiet=True)
    assert len(calls) == 1 and capsys.readouterr().out == "", "nothing missing, quiet: no pip, nothing printed"


def test_setup_off_colab_installs_nothing(monkeypatch, capsys):
    calls = _recording_pip(monkeypatch)
    monkeypatch.setattr(colab, "in_colab", lambda: False)
    monkeypatch.setattr(colab, "missing_packages", lambda: ["sacrebleu"])
    acc = colab.setup()
    out = capsys.readouterr().out
    assert calls == [] and "Installing" not in out and "T4 GPU" not in out
    assert out == f"Running on: {acc.describe()}\n"


def _answers(monkeypatch, *replies):
    """``input`` answering ``replies`` in turn (an EOFError for an exception), recording each prompt."""
    asked, queue = [], list(replies)

    def answer(prompt=""):
        asked.append(prompt)
        reply = queue.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    monkeypatch.setattr("builtins.input", answer)
    return asked


def test_mount_drive_off_colab_asks_nothing(monkeypatch):
    monkeypatch.setattr(colab, "in_colab", lambda: False)
    asked = _answers(monkeypatch)
    assert colab.mount_drive() is None and asked == []


@pytest.mark.parametrize("reply", ["", "y", " Yes "])
def test_mount_drive_mounts_on_yes_and_gives_the_course_folder(on_colab, monkeypatch, tmp_path, reply):
    asked = _answers(monkeypatch, reply)
    folder = colab.mount_drive(mount_point=str(tmp_path))
    assert len(asked) == 1 and "Mount Google Drive" in asked[0]
    assert on_colab.mounted == [str(tmp_path)]
    assert folder == tmp_path / "MyDrive" / "transformers-by-building" and folder.is_dir()


@pytest.mark.parametrize("reply", ["n", "no", "later", EOFError()], ids=["n", "no", "other", "no-input"])
def test_mount_drive_declined_keeps_files_local_and_says_so(on_colab, monkeypatch, tmp_path, capsys, reply):
    _answers(monkeypatch, reply)
    assert colab.mount_drive(mount_point=str(tmp_path)) is None
    assert on_colab.mounted == [] and not (tmp_path / "MyDrive").exists()
    assert "Not mounting Drive" in capsys.readouterr().out


def test_mount_drive_without_asking(on_colab, monkeypatch, tmp_path):
    asked = _answers(monkeypatch)
    assert colab.mount_drive(ask=False, mount_point=str(tmp_path)) == tmp_path / "MyDrive" / "transformers-by-building"
    assert asked == [] and on_colab.mounted == [str(tmp_path)]
