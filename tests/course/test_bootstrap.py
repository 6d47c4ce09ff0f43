"""The first cell's installer, for real: pip installs from a local git repository at a tag, from a Drive copy
(folder or zip), and says what to do, without a traceback, when nothing can be reached; then the package's
after_install says what pip replaced, and stops with a restart notice when the session had loaded it.

The package installed is a stand-in with the course's distribution name and version 9.9.9 (so it is never
"already installed"), built and installed by pip into a temporary --target: the same pip call the notebooks
make on Colab, minus the dependencies. Nothing here touches the network: git+file:// is a local path.
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from helpers.course import bootstrap, colab, notebooks
from tests.environments import clean_env

ROOT = Path(__file__).resolve().parents[2]
VERSION = "9.9.9"
# the first cell a learner reads, in non-blank lines: 51 today (3 of them the off-Colab install hint), 69 when the
# whole installer was in it
FIRST_CELL_MAX_LINES = 51


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def course_repo(tmp_path_factory):
    """A git repository holding a minimal package named like the course, tagged v9.9.9."""
    repo = tmp_path_factory.mktemp("course-repo")
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{colab.PACKAGE}"\nversion = "{VERSION}"\n\n'
        '[tool.setuptools]\npackages = ["course_probe"]\n'
    )
    (repo / "course_probe").mkdir()
    (repo / "course_probe" / "__init__.py").write_text("VALUE = 42\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "release")
    _git(repo, "tag", f"v{VERSION}")
    return repo


def _installed(target: Path) -> bool:
    return (target / "course_probe" / "__init__.py").exists() and any(
        p.name.startswith("transformers_by_building-9.9.9") for p in target.glob("*.dist-info")
    )


def test_installs_the_pinned_release_from_a_git_repository(course_repo, tmp_path, capsys):
    target = tmp_path / "site"
    got, before = bootstrap.ensure_course(
        f"git+file://{course_repo}@v{VERSION}",
        tmp_path / "no-drive-copy",
        VERSION,
        install=True,
        pip_args=("--target", str(target), "--no-deps"),
    )
    assert got == "the pinned release"
    assert _installed(target)
    assert "Installing the course package from the pinned release" in capsys.readouterr().out
    had, modules = before  # taken before pip ran: this environment's distributions and this session's modules
    assert "pytest" in {bootstrap.normalise(name) for name in had} and "pytest" in modules
    # the package, imported after the install, says where it came from; pip installed into --target: nothing replaced
    assert bootstrap.after_install(got, before) == {}
    assert capsys.readouterr().out == "Course package: the pinned release\n"


def test_a_drive_copy_comes_first_as_a_folder_or_as_a_zip(course_repo, tmp_path):
    folder = tmp_path / "course"
    shutil.copytree(course_repo, folder, ignore=shutil.ignore_patterns(".git"))
    unreachable = "git+file:///nonexistent/course@v1"  # proves the pinned address is never needed
    for copy in (folder, tmp_path / "course.zip"):
        if copy.suffix == ".zip":  # as GitHub's "Download ZIP" makes it: one top folder
            with zipfile.ZipFile(copy, "w") as z:
                for path in folder.rglob("*"):
                    z.write(path, Path("course-main") / path.relative_to(folder))
        target = tmp_path / f"site-{copy.suffix or 'dir'}"
        got, _ = bootstrap.ensure_course(
            unreachable, copy, VERSION, install=True, pip_args=("--target", str(target), "--no-deps")
        )
        assert got == "the copy in Drive" and _installed(target)


def test_an_unreachable_address_gives_two_ways_out_and_no_traceback(tmp_path, capsys):
    with pytest.raises(RuntimeError) as err:
        bootstrap.ensure_course(
            "git+file:///nonexistent/course@v1",
            tmp_path / "missing",
            VERSION,
            install=True,
            pip_args=("--target", str(tmp_path / "site"), "--no-deps"),
        )
    message = str(err.value)
    assert "could not be installed" in message
    assert "the pinned release:" in message, "says what was tried, with pip's own last line"
    assert "internet" in message and "Google Drive" in message and str(tmp_path / "missing") in message
    shown = err.value._render_traceback_()  # what Jupyter prints instead of a traceback
    assert shown[0] == "Course set-up failed." and not any("Traceback" in line for line in shown)
    assert not (tmp_path / "site").exists() or not _installed(tmp_path / "site")


def test_nothing_is_installed_when_this_version_is_already_there_or_off_colab(tmp_path):
    here = metadata.version(colab.PACKAGE)
    unreachable = "git+file:///nonexistent/course@v1"
    assert bootstrap.ensure_course(unreachable, tmp_path, here, install=True) == ("already installed", None)
    got, before = bootstrap.ensure_course(unreachable, tmp_path, VERSION)
    assert got.startswith("this checkout") and before is None, "off Colab: no pip"


def test_after_install_names_what_pip_replaced_and_stops_when_this_session_had_loaded_it(capsys):
    """In-process, on this environment as it is: the "before" is made up, so pytest looks replaced (0.0.1 -> its
    version) and a package that is not here looks removed."""
    now = metadata.version("pytest")
    had = {"PyTest": "0.0.1", colab.PACKAGE: metadata.version(colab.PACKAGE), "gone-probe": "1.0"}
    said = f"gone-probe 1.0 -> removed; pytest 0.0.1 -> {now}"
    # a session that had not loaded pytest (though this one has: only the modules taken before the install count)
    replaced = bootstrap.after_install("the pinned release", (had, {"json"}))
    assert replaced == {"pytest": f"0.0.1 -> {now}", "gone-probe": "1.0 -> removed"}
    out = capsys.readouterr().out
    assert out.startswith("Course package: the pinned release\n")
    assert f"Note: pip also replaced {said}. This session had not loaded them: no restart needed." in out
    # one that had: stop, with the restart notice and no traceback
    with pytest.raises(bootstrap.CourseSetupError) as err:
        bootstrap.after_install("the copy in Drive", (had, {"json", "pytest"}))
    shown = err.value._render_traceback_()
    assert shown[0] == "Course set-up failed."
    assert f"pip replaced {said}, and this session had already loaded pytest." in shown[1]
    assert shown[2].startswith("Restart the session (Runtime > Restart session), then run this cell again")
    assert capsys.readouterr().out == "Course package: the copy in Drive\n", "it says where from, then stops"
    # nothing installed (already there, or off Colab): it only says so
    assert bootstrap.after_install("already installed", None) == {}
    assert capsys.readouterr().out == "Course package: already installed\n"


def _new_modules(module: str) -> list[str]:
    """The top-level modules that importing ``module`` loads in a fresh interpreter, less the standard library's."""
    code = (
        "import json, sys\nbefore = set(sys.modules)\n"
        f"import {module}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(done.stdout)


def test_the_package_s_installer_part_loads_nothing_pip_may_have_replaced():
    """The cell imports helpers.course.bootstrap right after pip: it must not load numpy, torch or the like itself."""
    assert _new_modules("helpers.course.bootstrap") == ["helpers"]
    assert {"numpy", "torch"} <= set(_new_modules("helpers.course.colab")), "the control: colab loads torch"


@pytest.mark.parametrize("py", notebooks.notebook_sources(), ids=lambda p: p.stem[:2])
def test_every_first_cell_is_the_shared_setup_with_this_installer(py):
    first = notebooks.code_cells(py)[0]
    assert "parameters" in first.tags, "the first code cell must carry the papermill tag `parameters`"
    assert first.source.strip() == notebooks.first_cell_source().strip(), (
        f"{py.name}'s first cell differs from helpers.course.notebooks.first_cell_source(): run python -m helpers sync-notebooks"
    )
    assert inspect.getsource(bootstrap.ensure_course).strip() in first.source
    assert f'"{colab.COURSE_PIN}"' in first.source and "torch" not in first.source.split("pip_args")[-1]
    # issue 49: Colab folds the install code under a title (its form markup must be the cell's first line)
    title = first.source.splitlines()[0]
    assert title.startswith("# @title ") and title.endswith('{ display-mode: "form" }'), title


def test_sync_rewrites_a_first_cell_that_drifted(tmp_path):
    py = tmp_path / "09_demo.py"
    original = (ROOT / "notebooks" / "solutions" / "02_transformer_from_scratch.py").read_text()
    py.write_text(original.replace(colab.COURSE_PIN, "git+https://example.org/fork@v0.0.1"))
    assert notebooks.set_first_cell(py) is True
    assert py.read_text() == original
    assert notebooks.set_first_cell(py) is False


def first_cell_problems(source: str) -> list[str]:
    """What keeps a first cell from reading at a glance or from doing its job: its length, the failure message
    with both ways out in the cell itself (the package cannot say it when it is not installed), and after_install
    called before anything that loads the packages pip may have replaced."""
    problems, lines = [], [line for line in source.splitlines() if line.strip()]
    if len(lines) > FIRST_CELL_MAX_LINES:
        problems.append(f"{len(lines)} lines, more than {FIRST_CELL_MAX_LINES}")
    for needed in ("def _render_traceback_(self):", "Two ways out", "Google Drive at {drive_copy}", "internet"):
        if needed not in source:
            problems.append(f"no {needed!r}")
    check = source.find("bootstrap.after_install(")
    others = [source.find(i) for i in ("from helpers import", "import torch", "import numpy") if i in source]
    if check < 0 or check > min(others, default=len(source)):
        problems.append("after_install is not called before the rest of the package is imported")
    return problems


@pytest.mark.parametrize("site", [True, False])
def test_off_colab_a_kernel_that_cannot_import_the_package_is_told_to_install_it(tmp_path, site):
    """A learner's own Jupyter, off Colab, whose Python lacks the package: the first cell stops with the command to
    run, before the import that would fail with a bare ModuleNotFoundError. ``python -S`` (no site-packages) from an
    empty folder stands in for that kernel; the control, with site-packages, is this checkout's install."""
    call = "ensure_course('git+file:///nonexistent/course@v1', '/nonexistent', '9.9.9', install=False)"
    script = inspect.getsource(bootstrap.ensure_course) + f"\ntry:\n    print({call}[0])\n"
    script += "except RuntimeError as err:\n    print('\\n'.join(err._render_traceback_()))\n"
    flags = [] if site else ["-S"]
    out = subprocess.run([sys.executable, *flags, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         encoding="utf-8", check=True).stdout  # fmt: skip
    if site:
        assert out.startswith("this checkout"), out
    else:
        assert out.startswith("Course set-up failed.") and "pip install -e ." in out and "restart" in out, out


def test_the_first_cell_reads_at_a_glance_and_still_fails_clearly():
    source = notebooks.first_cell_source()
    assert first_cell_problems(source) == []
    # planted: a cell as long as the one before (69 lines), the failure message gone, the check after the imports
    assert any("lines, more than" in p for p in first_cell_problems(source + "\n# one more line" * 23))
    assert first_cell_problems(source.replace("Two ways out", "Ways out")) == ["no 'Two ways out'"]
    call = "bootstrap.after_install(installed_from, before_install)\n"
    assert call in source
    late = source.replace(call, "") + "\n" + call
    assert first_cell_problems(late) == ["after_install is not called before the rest of the package is imported"]


# ---------------------------------------------------------------------------------------------------------------
# upgrades: pip adds what is missing and replaces nothing it need not; a replacement is announced, with a restart
# notice when the session had loaded the replaced package. Run in a throwaway venv that borrows this Python's
# pip, with hand-made wheels from a local folder: no network, no build.


def _wheel(folder: Path, name: str, version: str, module: str, requires: tuple[str, ...] = ()) -> Path:
    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{module}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}.dist-info/top_level.txt": f"{module}\n",
    }
    files[f"{dist}.dist-info/RECORD"] = "".join(f"{k},,\n" for k in files) + f"{dist}.dist-info/RECORD,,\n"
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
    return path


@pytest.fixture
def runtime_env(tmp_path):
    """A venv standing in for a runtime that ships probe-a 1.0 and probe-b 1.0 (and nothing else: not even pip's own
    metadata); wheels of 2.0 wait in a folder. (ensurepip would take half a minute on 2 busy cores.)"""
    pip = pytest.importorskip("pip")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in ("probe-a", "probe-b"):
        for version in ("1.0", "2.0"):
            _wheel(wheels, name, version, name.replace("-", "_"))

    def make(name):
        venv = tmp_path / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, env=clean_env())
        py = venv / "bin" / "python"
        site = Path(
            subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                           capture_output=True, text=True, check=True, env=clean_env()).stdout.strip()
        )  # fmt: skip
        shutil.copytree(Path(pip.__file__).parent, site / "pip")  # pip's code alone: it lists no package here
        for wheel in wheels.glob("*-1.0-*.whl"):  # a wheel unpacked into site-packages is an installed package
            zipfile.ZipFile(wheel).extractall(site)
        return py

    return make, wheels


def _first_cell(py, wheels, course: Path, version: str, imports: str = "") -> subprocess.CompletedProcess:
    """ensure_course in the venv, then after_install, as the first cell runs them (from bootstrap.py's source: the
    stand-in course package holds no helpers); prints what they said, and the probes' versions after."""
    script = (
        f"import importlib.util, importlib.metadata as m\n{imports}\n"
        f"spec = importlib.util.spec_from_file_location('bootstrap', {str(ROOT / 'helpers/course/bootstrap.py')!r})\n"
        "b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)\n"
        "try:\n"
        f"    got, before = b.ensure_course({str(course)!r}, '/nonexistent', {version!r}, install=True,\n"
        f"        pip_args=('--no-index', '--find-links', {str(wheels)!r}))\n"
        "    b.after_install(got, before)\n    print('WENT ON')\n"
        "except RuntimeError as err:\n"
        "    print('RAISED', *err._render_traceback_(), sep='\\n')\n"
        "print('VERSIONS', m.version('probe-a'), m.version('probe-b'))\n"
    )
    # clean_env: no PYTHONPATH (the checkout's helpers would look installed), no PIP_* (another index or find-links)
    return subprocess.run([py, "-c", script], capture_output=True, text=True, check=True, cwd=py.parents[2],
                          env=clean_env())  # fmt: skip


def test_the_install_replaces_nothing_the_runtime_has_when_its_versions_satisfy(runtime_env, tmp_path, monkeypatch):
    # as many developers set it: the throw-away runtime must not see the checkout's package as installed (red before
    # tests/environments.clean_env: "Course package: this checkout", issue 47)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    make, wheels = runtime_env
    py = make("venv")
    course = _wheel(tmp_path, colab.PACKAGE, "9.9.8", "course_probe", ("probe-a>=1", "probe-b>=1"))
    out = _first_cell(py, wheels, course, "9.9.8").stdout
    # 2.0 was on offer: not taken
    assert "Course package: the pinned release\nWENT ON" in out and "VERSIONS 1.0 1.0" in out, out
    assert "replaced" not in out and "Restart" not in out, out


def test_a_replaced_package_is_announced_and_a_loaded_one_stops_with_a_restart_notice(runtime_env, tmp_path):
    make, wheels = runtime_env
    py = make("venv")
    course = _wheel(tmp_path, colab.PACKAGE, "9.9.9", "course_probe", ("probe-a>=2", "probe-b>=2"))
    out = _first_cell(py, wheels, course, "9.9.9", imports="import probe_a").stdout
    assert "VERSIONS 2.0 2.0" in out, out
    assert "WENT ON" not in out, "a half-upgraded session must not go on"
    assert "Course package: the pinned release\nRAISED\nCourse set-up failed." in out, out
    assert "probe-a 1.0 -> 2.0; probe-b 1.0 -> 2.0" in out and "already loaded probe-a." in out, out
    assert "Restart the session (Runtime > Restart session), then run this cell again" in out
    # the same upgrade in a session that had loaded neither: a note, and the notebook goes on
    py = make("fresh")
    out = _first_cell(py, wheels, course, "9.9.9").stdout
    assert "WENT ON" in out and "VERSIONS 2.0 2.0" in out, out
    assert "Course package: the pinned release\nNote: pip also replaced probe-a 1.0 -> 2.0; probe-b 1.0 -> 2.0" in out
    assert "no restart needed" in out


def test_on_kaggle_the_cell_installs_and_without_internet_says_to_turn_it_on(tmp_path, monkeypatch):
    """Issue 49: Kaggle's notebooks (KAGGLE_KERNEL_RUN_TYPE set, no google.colab) install the pinned release; there is
    no Drive there, and with the notebook's Internet off pip fails: the cell says to turn it on, not a traceback."""
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    drive = tmp_path / "drive"
    drive.mkdir()  # a folder that looks like a Drive copy: never tried on Kaggle
    with pytest.raises(RuntimeError) as err:
        bootstrap.ensure_course("git+file:///nonexistent/course@v1", drive, VERSION,
                                pip_args=("--target", str(tmp_path / "site"), "--no-deps"))  # fmt: skip
    message = str(err.value)
    assert "the pinned release:" in message and "the copy in Drive" not in message, message
    assert "1. Turn Internet on in Session options (the right-hand panel), then run this cell again." in message
    assert err.value._render_traceback_()[0] == "Course set-up failed."
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE")  # the control: neither Colab nor Kaggle, nothing is installed
    got, before = bootstrap.ensure_course("git+file:///nonexistent/course@v1", drive, VERSION)
    assert got.startswith("this checkout (not on Colab or Kaggle") and before is None
