"""Installing on top of Colab replaces nothing: the package's ranges admit every version Colab ships, the lock lies
within the ranges, and the Colab stand-in (.ci/colab_standin.py) reads Colab's freeze, patches the first cell and
judges pip's work correctly. The stand-in's own run (every notebook in Colab's versions) is the `colab` marker.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from helpers.course import notebooks

ROOT = Path(__file__).resolve().parents[2]
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


def test_the_local_torch_wheel_for_this_python_is_found_in_pip_s_find_links(tmp_path, monkeypatch):
    for version, py in [("9.9.0+cpu", "cp311"), ("9.9.0+cpu", "cp312"), ("9.8.0+cpu", "cp311")]:
        (tmp_path / f"torch-{version}-{py}-{py}-manylinux_2_28_x86_64.whl").touch()
    monkeypatch.setenv("PIP_FIND_LINKS", f"/nonexistent {tmp_path}")
    found = standin.local_torch_wheel("9.9.0", "3.11.7")
    assert found == str(tmp_path / "torch-9.9.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert standin.local_torch_wheel("9.9.0", "3.13.1") is None, "no wheel for another Python: uv takes PyPI's"
    assert standin.local_torch_wheel("9.7.0", "3.11.7") is None


FIGURE_TEST = "tests/notebooks/test_every_notebook.py::test_every_notebook_saves_its_figures_as_pdf_and_png"


def _floor_selection() -> list[str]:
    """The test ids CI's floor job names in .ci/run (its floor_tests array), --deselect ones included."""
    text = (ROOT / ".ci" / "run").read_text()
    block = re.search(r"^floor_tests=\((.*?)^\)", text, re.S | re.M)
    assert block, ".ci/run no longer lists floor_tests=( ... ): update this test"
    return re.findall(r"(tests/\S+?\.py::[\w\[\]-]+)", block.group(1))


def _missing(ids: list[str]) -> list[str]:
    """The ids whose test function (or notebook parameter) does not exist: pytest would stop on them, or, for a
    --deselect, quietly run the notebook twice."""
    stems = {p.stem for p in notebooks.notebook_sources()}
    out = []
    for nodeid in ids:
        file, _, name = nodeid.partition("::")
        function, _, param = name.partition("[")
        path = ROOT / file
        if not path.is_file() or not re.search(rf"^def {function}\(", path.read_text(), re.M):
            out.append(nodeid)
        elif param and param.rstrip("]") not in stems:
            out.append(nodeid)
    return out


def test_the_floor_job_names_tests_that_exist_and_every_notebook_runs_in_it():
    ids = _floor_selection()
    assert len(ids) >= 5 and _missing(ids) == []
    # notebook 01 runs in the kernel from its first cell; the figure test runs the others (its one deselection)
    in_kernel = notebooks.notebook_sources(standin.FLOOR_NOTEBOOKS)[0].stem
    assert [i for i in ids if "[" in i] == [f"{FIGURE_TEST}[{in_kernel}]"]
    assert any("text_box" in i for i in ids) and any("headless_kernel" in i for i in ids)
    # a renamed test or notebook is caught
    renamed = ["tests/notebooks/test_notebook03.py::test_the_text_box_renamed", f"{FIGURE_TEST}[01_renamed]"]
    assert _missing([*renamed, f"{FIGURE_TEST}[{in_kernel}]"]) == renamed


def _alive(pid: int) -> bool:
    """A process that runs (not ended, not a zombie waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_child_s_cpu_time_is_measured_and_a_stopped_run_takes_its_workers_with_it(tmp_path):
    busy = subprocess.Popen(
        [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"]
    )
    assert 0.25 <= standin.wait_with_usage(busy) < 5 and busy.returncode == 0
    # a parent (as pytest) with a child (as an xdist worker), in their own session: stop ends both
    pid_file = tmp_path / "child"
    code = (
        "import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(c.pid))\n"
        "time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    for _ in range(100):
        if pid_file.is_file() and pid_file.read_text():
            break
        time.sleep(0.05)
    child = int(pid_file.read_text())
    standin.stop(parent)
    assert parent.wait(timeout=10) != 0
    for _ in range(100):
        if not _alive(child):
            break
        time.sleep(0.05)
    else:
        os.kill(child, 9)
        pytest.fail("the worker outlived its stopped parent")
    standin.stop(parent)  # already ended: nothing to do, no error


@pytest.mark.notebook  # starts a Jupyter kernel (seconds)
def test_the_driver_says_when_the_first_cell_is_done_and_reports_a_failing_cell(tmp_path):
    import nbformat

    cells = ["print('Course package: the copy in Drive')", "x = 1", "raise RuntimeError('planted')", "y = 2"]
    path = tmp_path / "01_demo.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    (tmp_path / "out").mkdir()
    spec = {"notebooks": [str(path)], "cwd": str(tmp_path), "out": str(tmp_path / "out"), "timeout": 60}
    done = subprocess.run([sys.executable, "-c", standin.DRIVER, json.dumps(spec)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0] == "FIRST_CELL_DONE 01_demo.ipynb", done.stdout + done.stderr
    results = json.loads(lines[-1].removeprefix("RESULTS "))
    assert len(results) == 1 and "planted" in results[0]["error"]
    assert results[0]["first_cell"] == "Course package: the copy in Drive\n" and results[0]["first_cell_seconds"] >= 0
    executed = nbformat.read(tmp_path / "out" / "01_demo.ipynb", as_version=4)
    assert "execution_count" in executed.cells[2] and not executed.cells[3].get("outputs")
    # a first cell that fails (the install did not happen) is not announced: the tests would start without the course
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise SystemExit('no install')")]), path)
    done = subprocess.run([sys.executable, "-c", standin.DRIVER, json.dumps(spec)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    assert "FIRST_CELL_DONE" not in done.stdout and "no install" in done.stdout.splitlines()[-1], done.stdout


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
