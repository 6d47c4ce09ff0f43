"""Installing on top of Colab replaces nothing: the package's ranges admit every version Colab ships, the lock lies
within the ranges, and the Colab stand-in (.ci/colab_standin.py) reads Colab's freeze, patches the first cell and
judges pip's work correctly. The stand-in's own run (every notebook in Colab's versions) is the `colab` marker.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from helpers.course import notebooks

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "colab_standin.py"
FREEZE = ROOT.parent / "shared" / "colab" / "pip-freeze.gpu.txt"

_spec = importlib.util.spec_from_file_location("colab_standin", SCRIPT)
standin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(standin)

needs_freeze = pytest.mark.skipif(not FREEZE.is_file(), reason=f"{FREEZE} (Colab's pip freeze, in ../shared) is absent")


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]


def _colab() -> dict[str, str]:
    return standin.parse_freeze(FREEZE.read_text())


def _refused(requirements: list[Requirement], versions: dict[str, str]) -> list[str]:
    """Each requirement whose range leaves out the version in ``versions`` (local tags like +cu128 ignored)."""
    out = []
    for req in requirements:
        have = versions.get(standin.norm(req.name))
        if have and not have.startswith("@") and not req.specifier.contains(have.split("+")[0], prereleases=True):
            out.append(f"{req} refuses {have}")
    return out


@needs_freeze
def test_every_range_admits_what_colab_ships():
    colab = _colab()
    assert colab["ipywidgets"] == "7.7.1" and "sacrebleu" not in colab, "the freeze is Colab's, as the issue read it"
    assert _refused(_requirements(), colab) == [], "pip would replace a package Colab ships"
    # the check catches the range that upgraded Colab's widgets (pyproject.toml before issue 38)
    assert _refused([Requirement("ipywidgets>=8.1"), Requirement("torch>=2.12")], colab) == [
        "ipywidgets>=8.1 refuses 7.7.1",
        "torch>=2.12 refuses 2.11.0+cu128",
    ]


@needs_freeze
def test_each_floor_of_a_package_colab_ships_is_colabs_version():
    """Floors are versions the stand-in really ran: Colab's own (a lower floor would be untested)."""
    colab, off = _colab(), []
    for req in _requirements():
        have = colab.get(standin.norm(req.name), "@")
        floors = [s.version for s in req.specifier if s.operator == ">="]
        if have.startswith("@") or req.name in ("nbformat", "jupytext", "pytest"):  # dev tools: any the lock tested
            continue
        if [Version(f) for f in floors] != [Version(have.split("+")[0])]:
            off.append(f"{req} (Colab: {have})")
    assert off == []


def test_the_lock_lies_within_the_ranges():
    lock = standin.parse_freeze((ROOT / "constraints.txt").read_text())
    assert _refused(_requirements(), lock) == [], "constraints.txt holds a version pyproject.toml refuses: run .ci/lock"
    assert _refused([Requirement("numpy<2")], lock) == [f"numpy<2 refuses {lock['numpy']}"]


def test_a_freeze_is_read_and_pip_s_work_is_judged():
    text = "# comment\nFoo_Bar==1.0\ntorch==2.11.0+cu128\ngoogle-colab @ file:///colabtools/x.tar.gz\nnvidia-cublas-cu12==12.8\n"
    colab = standin.parse_freeze(text)
    assert colab == {"foo-bar": "1.0", "torch": "2.11.0+cu128", "google-colab": "@ file:///colabtools/x.tar.gz",
                     "nvidia-cublas-cu12": "12.8"}  # fmt: skip
    assert standin.colab_pins(colab) == ["foo-bar==1.0"], "no URL, no CUDA build, no torch among the pins"
    with pytest.raises(ValueError, match="not a pip freeze line"):
        standin.parse_freeze("foo>=1\n")
    diff = standin.freeze_diff({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "2.1", "d": "4"})
    assert diff == {"added": {"d": "4"}, "changed": {"b": ["2", "2.1"]}, "removed": {"c": "3"}}
    assert standin.freeze_diff({"a": "1"}, {"a": "1", "b": "2"}) == {"added": {"b": "2"}, "changed": {}, "removed": {}}
    gaps = standin.standin_gaps({"torch": "2.11.0", "foo-bar": "1.1", "jedi": "0.19"}, colab, "2.11.0")
    assert gaps == {"other_version": {"foo-bar": ["1.0", "1.1"]}, "not_on_colab": {"jedi": "0.19"}}


@needs_freeze
def test_the_standin_installs_colabs_kernel_stack_and_the_course_s_closure_but_not_what_colab_lacks():
    names = standin.wanted_packages(_colab(), (ROOT / "constraints.txt").read_text())
    for name in ("ipywidgets", "widgetsnbextension", "notebook", "ipykernel", "jupyter-client", "nbclient",
                 "transformers", "datasets", "numpy", "accelerate", "peft", "scipy", "smart-open", "tabulate"):  # fmt: skip
        assert name in names, name
    for name in ("sacrebleu", "gensim", "torch", "pytest-xdist", "ruff", "google-colab"):
        assert name not in names, name


@pytest.mark.parametrize("py", notebooks.notebook_sources(), ids=lambda p: p.stem[:2])
def test_the_first_cell_is_pointed_at_the_drive_copy_and_installs(py, tmp_path):
    source = notebooks.code_cells(py)[0].source
    patched = standin.point_first_cell_at(source, tmp_path / "course")
    assert f'COURSE_IN_DRIVE = "{tmp_path / "course"}"' in patched
    assert "ensure_course(COURSE, COURSE_IN_DRIVE, install=True, version=" in patched
    assert patched.replace(str(tmp_path / "course"), "X") != source and "/content/drive" not in patched.split("def ")[0]
    with pytest.raises(ValueError, match="update point_first_cell_at"):
        standin.point_first_cell_at(source.replace("ensure_course(COURSE,", "ensure_course(PIN,"), tmp_path)


# ---------------------------------------------------------------------------------------------------------------
# the stand-in itself (minutes; needs its environment built and PyPI for what Colab lacks)


def _built() -> list[Path]:
    return sorted(p.parent for p in (ROOT / ".cache" / "colab-standin").glob("py*/key"))


@pytest.mark.colab
@pytest.mark.skipif(not _built(), reason="the Colab stand-in is not built: run `python3 .ci/colab_standin.py` once")
def test_in_the_colab_standin_every_notebook_passes_and_the_install_only_adds():
    done = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    name = re.search(r"Colab stand-in (\S+):", done.stdout).group(1)
    summary = json.loads((ROOT / ".cache" / "colab-standin" / name / "report" / "summary.json").read_text())
    assert summary["environment"]["reused"], "the environment was rebuilt: it was not put back after the last run"
    assert [r["error"] for r in summary["notebooks"]] == [None] * len(notebooks.notebook_sources())
    install = summary["install"]
    assert install["changed"] == {} and install["removed"] == {} and {"sacrebleu", "gensim"} <= set(install["added"])
    after = standin.parse_freeze((ROOT / ".cache" / "colab-standin" / name / "report" / "freeze-after.txt").read_text())
    assert after["ipywidgets"] == "7.7.1" and after["transformers"] == _colab()["transformers"]
