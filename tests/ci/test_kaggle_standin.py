"""A Kaggle stand-in: notebook 01 run from its first cell in a Python that has Kaggle's variable, no ``google.colab``
and no course package, so that the first cell itself must install the pinned release, as on Kaggle.

The runtime is a fresh venv that sees this checkout's installed packages (torch, Jupyter, …) through a folder of
links with the course's own distribution left out; the "release" is a local git repository of the checkout's files
tagged like the pin (the notebook's ``COURSE`` line points there, nothing else of the cell is touched); pip runs
with no index, so nothing comes from the network. Reachable: the cell installs, and the whole notebook runs.
Unreachable (the address does not answer, as when a Kaggle notebook's Internet is off): the cell prints Kaggle's
hint, not a traceback. The control: the same unreachable cell without Kaggle's variable installs nothing and says
this is not Colab or Kaggle.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

from helpers.course import colab, notebooks
from tests.environments import clean_env

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("colab_standin", ROOT / ".ci" / "colab_standin.py")
standin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(standin)

COURSE_LINE = re.compile(r'^COURSE = "[^"]*"', re.M)
HINT = "1. Turn Internet on in Session options (the right-hand panel), then run this cell again."


def _course_left_out(name: str) -> bool:
    """The course's own files in site-packages: its dist-info and the editable install's finder and .pth."""
    lowered = name.lower()
    return lowered.startswith(("transformers_by_building", "__editable__")) or lowered.endswith(".pth")


def _runtime(tmp: Path) -> Path:
    """A fresh runtime without the course (a venv seeing this one's packages but the course's); its python."""
    links = tmp / "runtime-packages"
    links.mkdir(parents=True)
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if not _course_left_out(entry.name) and entry.name != "helpers":
            (links / entry.name).symlink_to(entry)
    venv = tmp / "runtime"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, env=clean_env())
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True, env=clean_env()).stdout.strip()  # fmt: skip
    Path(site, "runtime-packages.pth").write_text(f"{links}\n")  # a plain path line: the links' own .pth stay unread
    return python


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> str:
    """The checkout's files as a release: a git repository tagged like the pin; its address."""
    repo = tmp_path_factory.mktemp("release")
    standin.copy_checkout(repo)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "r"],
                 ["tag", colab.RELEASE]):  # fmt: skip
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    return f"git+file://{repo}@{colab.RELEASE}"


def _run(python: Path, course: str, tmp_path: Path, *, cells: int | None = None, **env: str) -> dict:
    """Notebook 01 with its COURSE line pointing at ``course`` (``cells``: only that many code cells), through the
    Colab stand-in's driver, in ``python``; returns the driver's result for it."""
    nb = nbformat.read(notebooks.notebook_paths(["01"])[0], as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert COURSE_LINE.search(first.source), "the first cell no longer sets COURSE: update this test"
    first.source = COURSE_LINE.sub(f"COURSE = {json.dumps(course)}", first.source, count=1)
    if cells is not None:
        code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        nb.cells = nb.cells[: code[cells - 1] + 1]
    work = tmp_path / "content"  # not the checkout: nothing there to import the course from
    work.mkdir(parents=True)
    path = work / "01_attention_math.ipynb"
    nbformat.write(nb, path)
    spec = {"notebooks": [str(path)], "cwd": str(work), "out": str(tmp_path), "timeout": 300}
    # pip reaches no index; a build uses the runtime's own setuptools
    env = clean_env(QUICK="1", HELPERS_HEADLESS="1", PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0",
                    REPORTS_DIR=str(tmp_path / "reports"), **env)  # fmt: skip
    env.pop("MPLBACKEND", None)
    done = subprocess.run([python, "-c", standin.DRIVER, json.dumps(spec)], capture_output=True, text=True, cwd=work,
                          env=env, timeout=900)  # fmt: skip
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert last.startswith("RESULTS "), done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(last.removeprefix("RESULTS "))[0] | {"executed": tmp_path / path.name}


def _first_cell_text(executed: Path) -> str:
    first = next(c for c in nbformat.read(executed, as_version=4).cells if c.cell_type == "code")
    parts = []
    for out in first.get("outputs", []):
        parts.append(out.get("text", "") if out.output_type == "stream" else "\n".join(out.get("traceback", [])))
    return "\n".join(parts)


@pytest.mark.slow  # pip builds the course from a local repository, then notebook 01 runs in quick mode (~17 s)
def test_on_kaggle_notebook_01_installs_the_release_in_its_first_cell_and_runs(release, tmp_path):
    python = _runtime(tmp_path)
    got = _run(python, release, tmp_path, KAGGLE_KERNEL_RUN_TYPE="Interactive")
    assert got["error"] is None, got["error"]
    said = got["first_cell"]
    assert f"Installing the course package from the pinned release: {release}" in said, said
    assert "Course package: the pinned release" in said and "Running on: CPU" in said, said
    assert "the copy in Drive" not in said, "Kaggle has no Drive: it is never tried there"
    code = [c for c in nbformat.read(got["executed"], as_version=4).cells if c.cell_type == "code"]
    assert len(code) > 20 and all(c.get("execution_count") for c in code), "every cell of notebook 01 ran"


@pytest.mark.notebook
def test_on_kaggle_without_internet_the_first_cell_says_to_turn_it_on(tmp_path):
    python = _runtime(tmp_path)
    unreachable = f"git+file://{tmp_path / 'nowhere'}@{colab.RELEASE}"
    got = _run(python, unreachable, tmp_path / "kaggle", cells=1, KAGGLE_KERNEL_RUN_TYPE="Interactive")
    shown = _first_cell_text(got["executed"])
    assert got["error"] is not None and HINT in shown, shown
    assert "Course set-up failed." in shown and "Traceback" not in shown and "File " not in shown, shown
    # the control: the same cell off Kaggle installs nothing; this runtime cannot import the course, and the cell
    # says how to install it (before, the next line failed with "No module named 'helpers'")
    got = _run(python, unreachable, tmp_path / "plain", cells=1)
    shown = _first_cell_text(got["executed"])
    assert "Installing" not in shown and HINT not in shown, shown
    assert "Course set-up failed." in shown and "pip install -e ." in shown and "Traceback" not in shown, shown
