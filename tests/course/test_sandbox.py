"""helpers.course.sandbox: the graded kernel reads everything but the solutions, writes only where a notebook writes,
and cannot reach into the grader. A student of 2026-11-27 (a helper attacking the grader) took full marks with every
exercise a stub three ways the kernel allowed: the course's solved notebook read from disk and run, a line appended
to a package module that the grader imported only after the kernel, and gdb attached to the grader. Each is tried
here for real where this system has Landlock; the rules and the fallback are tested on any machine."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cli
from helpers.course import executors, exercises, gradebook, notebooks, sandbox
from tests.course.test_grading_tricks import SOLVED, _copy

ROOT = Path(__file__).resolve().parents[2]
LANDLOCK = pytest.mark.skipif(sandbox.abi() == 0, reason="this system has no Landlock (Linux 5.19 or later)")
PTRACE_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")
PARENT_MEMORY_OPENS = not PTRACE_SCOPE.exists() or PTRACE_SCOPE.read_text(encoding="utf-8").strip() == "0"


def test_reading_is_granted_around_the_denied_paths_only(tmp_path):
    (tmp_path / "course" / "notebooks" / "solutions").mkdir(parents=True)
    (tmp_path / "course" / "notebooks" / "01.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "course" / "helpers").mkdir()
    (tmp_path / "other").mkdir()
    denied = tmp_path / "course" / "notebooks" / "solutions"
    roots = sandbox.read_roots([denied])
    for granted in [
        tmp_path / "other",
        tmp_path / "course" / "helpers",
        tmp_path / "course" / "notebooks" / "01.ipynb",
    ]:
        assert granted.resolve() in roots, granted
    for path in [denied, *denied.parents]:  # a grant on any of these would reach the solutions
        assert path.resolve() not in roots, path
    (tmp_path / "course" / "current").symlink_to(tmp_path / "course")  # as pytest's "pytest-current" link does
    assert tmp_path / "course" / "current" not in sandbox.read_roots([denied]), "a link to an ancestor leaks all"
    assert Path("/usr") in roots or not Path("/usr").exists()
    assert sandbox.read_roots([]) == [Path("/")]
    # an allow-list: only beneath what is readable, still cut around what is denied
    inside = sandbox.read_roots([denied], [tmp_path / "course", tmp_path / "missing"])
    assert (tmp_path / "other").resolve() not in inside and (tmp_path / "course" / "helpers").resolve() in inside
    assert all(denied.resolve() != r and denied.resolve() not in r.parents for r in inside)
    assert sandbox.read_roots([denied], [tmp_path / "other"]) == [(tmp_path / "other").resolve()]


def test_the_rights_grow_with_the_abi_and_a_file_rule_keeps_file_rights():
    assert sandbox.write_rights(1) & sandbox.REFER == 0 and sandbox.write_rights(2) & sandbox.REFER
    assert sandbox.write_rights(2) & sandbox.TRUNCATE == 0 and sandbox.write_rights(3) & sandbox.TRUNCATE
    assert sandbox.write_rights(1) & sandbox.READ_FILE == 0, "writing never grants reading back what is denied"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock is Linux's")
@pytest.mark.parametrize("version, used", [(-1, 0), (1, 0), (2, 2), (7, 7)])
def test_landlock_abi_1_counts_as_none(monkeypatch, version, used):
    """ABI 1 cannot allow a rename across folders once confined, so a kernel confined with it could not save as
    notebooks do: confined from ABI 2 only (an error, -1, is none too)."""

    class Libc:
        def syscall(self, *args):
            return version

    monkeypatch.setattr(sandbox, "_libc", Libc)
    assert sandbox.abi() == used


@pytest.mark.grading  # notebook 02 in a kernel up to Exercise 2.1
def test_without_landlock_nothing_is_confined_and_the_grader_says_so(monkeypatch, tmp_path):
    """The other branch, on any machine: no Landlock, so the kernel command is left as it is and the grader names
    what the student's code could then read."""
    monkeypatch.setattr(sandbox, "abi", lambda: 0)
    assert sandbox.confine([tmp_path], [tmp_path]) == 0
    kernel = executors.Kernel(tmp_path, denied=[tmp_path])
    assert not kernel.sandboxed
    said = []
    copy = _copy(tmp_path)
    exercises.grade(copy, reference=SOLVED, cell_timeout=120, stop_after="2.1", echo=said.append)
    assert any(line.startswith("note: no Landlock") and "solutions" in line for line in said), said


def test_the_kernel_may_not_read_the_course_s_solutions_history_or_tests(monkeypatch, tmp_path):
    monkeypatch.setattr(Path, "home", lambda: tmp_path)
    (tmp_path / ".ipython").mkdir()  # every cell any kernel ran is in its history (a helper read the solutions there)
    denied = exercises.kernel_denied(SOLVED, None)
    assert notebooks.solutions_dir().resolve() in denied and tmp_path / ".ipython" in denied
    if (ROOT / ".git").exists():
        assert ROOT / ".git" in denied and ROOT / "tests" in denied


def _confined(script: str, denied: list[Path], writable: list[Path]) -> subprocess.CompletedProcess:
    cmd = sandbox.command([sys.executable, "-c", script], denied, writable)
    return subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", timeout=60)


SCRIPT = """
import os, sys
def attempt(what, f):
    try:
        f()
        print(what, "ok")
    except PermissionError:
        print(what, "denied")
attempt("read secret", lambda: open(sys.argv[1]).read())
attempt("read open", lambda: open(sys.argv[2]).read())
attempt("write course", lambda: open(sys.argv[2], "a").close())
attempt("write folder", lambda: open(os.path.join(sys.argv[3], "x.txt"), "w").write("x"))
attempt("parent memory", lambda: open(f"/proc/{os.getppid()}/mem", "rb").close())
"""


@LANDLOCK
def test_a_confined_process_reads_no_solution_writes_only_its_folder_and_cannot_reach_its_parent(tmp_path):
    (tmp_path / "solutions").mkdir()
    (secret := tmp_path / "solutions" / "01.py").write_text("the answer", encoding="utf-8")
    (course := tmp_path / "helpers.py").write_text("x = 1\n", encoding="utf-8")
    (folder := tmp_path / "work").mkdir()
    args = [str(secret), str(course), str(folder)]
    script = SCRIPT.replace("sys.argv[1]", repr(args[0])).replace("sys.argv[2]", repr(args[1]))
    script = script.replace("sys.argv[3]", repr(args[2]))
    confined = _confined(script, [tmp_path / "solutions"], [folder]).stdout.splitlines()
    # with an allow-list (the grader's), a copy of the solutions outside what is readable is out of reach too
    (elsewhere := tmp_path / "elsewhere").mkdir()
    (copy := elsewhere / "01.py").write_text("the answer", encoding="utf-8")
    listed = sandbox.command([sys.executable, "-c", f"print(open({str(copy)!r}).read())"], [], [], None,
                             [*executors.kernel_readable(), folder])  # fmt: skip
    assert "PermissionError" in subprocess.run(listed, capture_output=True, text=True, encoding="utf-8").stderr
    assert "the answer" in subprocess.run([sys.executable, "-c", f"print(open({str(copy)!r}).read())"],
                                          capture_output=True, text=True, encoding="utf-8").stdout  # fmt: skip
    assert confined == ["read secret denied", "read open ok", "write course denied", "write folder ok",
                        "parent memory denied"], confined  # fmt: skip
    # the control: the same script unconfined reads the secret and writes the course's file
    plain = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, encoding="utf-8").stdout
    assert "read secret ok" in plain and "write course ok" in plain, plain
    if PARENT_MEMORY_OPENS:  # no Yama rule against it: only the sandbox stopped it
        assert "parent memory ok" in plain, plain


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_DUMPABLE is Linux's")
@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may read any process's memory")
def test_an_undumpable_grader_s_memory_is_closed_to_its_children():
    script = "import os\ntry:\n    open(f'/proc/{os.getppid()}/mem', 'rb').close(); print('ok')\nexcept OSError: print('denied')"
    assert executors.set_dumpable(False)
    try:
        closed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, encoding="utf-8")
    finally:
        executors.set_dumpable(True)
    assert closed.stdout.strip() == "denied"
    if PARENT_MEMORY_OPENS:  # the control
        opened = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, encoding="utf-8")
        assert opened.stdout.strip() == "ok"


@LANDLOCK
@pytest.mark.grading  # notebook 02 in a kernel up to Exercise 2.2, twice (confined, then the control)
def test_graded_a_solution_cannot_read_the_solved_notebook_or_change_the_package(tmp_path):
    reads = f"assert 'BEGIN SOLUTION' in open({str(SOLVED)!r}, encoding='utf-8').read()"
    writes = f"open({str(ROOT / 'helpers' / 'nn' / 'attention.py')!r}, 'a').close()  # appends nothing"
    copy = _copy(tmp_path, {"2.1": (reads, {}), "2.2": (writes, {})})
    graded = exercises.grade(copy, reference=SOLVED, cell_timeout=120, stop_after="2.2")
    for number in ["2.1", "2.2"]:
        result = next(r for r in graded.results if r.number == number)
        assert result.status == "failed" and "PermissionError" in result.message, graded.table()
    # the control: unconfined (grade --no-sandbox), both lines run, and the stubs after them are what fails
    plain = exercises.grade(copy, reference=SOLVED, cell_timeout=120, stop_after="2.2", sandbox=False)
    assert [plain.status_of(n) for n in ["2.1", "2.2"]] == ["not attempted"] * 2, plain.table()
    assert os.access(ROOT / "helpers" / "nn" / "attention.py", os.R_OK)


def test_grade_no_sandbox_reaches_the_grader_and_a_class_s_graders(monkeypatch, tmp_path):
    """``grade --no-sandbox``: the instructor's way out if the confinement stops a notebook that should run."""
    seen = {}
    monkeypatch.setattr(exercises, "grade", lambda *a, **k: seen.update(k) or (_ for _ in ()).throw(SystemExit(0)))
    with pytest.raises(SystemExit):
        cli.main(["grade", str(SOLVED), "--no-sandbox"])
    assert seen["sandbox"] is False
    monkeypatch.setattr(gradebook, "grade_class", lambda *a, **k: seen.update(options=k["options"]) or tmp_path)
    (tmp_path / "a").mkdir()
    cli.main(["grade", str(tmp_path / "a"), "--no-sandbox", "--out", str(tmp_path / "book")])
    assert "--no-sandbox" in seen["options"]


@pytest.mark.skipif(sandbox.abi() < 4, reason="Landlock's TCP rules need ABI 4 (Linux 6.7)")
def test_a_confined_process_cannot_connect_to_another_local_port():
    """Another kernel of this user listens on local ports (its connection file says which, and its key): connected,
    code would run outside the sandbox. Only the download ports are open to a confined kernel."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        script = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port})); print('connected')\n"
        script += "except PermissionError:\n    print('denied')"
        confined = subprocess.run(sandbox.command([sys.executable, "-c", script], [], [], []), capture_output=True,
                                  text=True, encoding="utf-8", timeout=60)  # fmt: skip
        plain = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, encoding="utf-8")
    assert confined.stdout.strip() == "denied" and plain.stdout.strip() == "connected", (confined, plain)


@LANDLOCK
@pytest.mark.grading  # one kernel, two cells
def test_a_confined_kernel_keeps_no_history_and_has_an_ipython_folder_of_its_own(tmp_path):
    """IPython records every cell a kernel runs; the grader runs the reference's solutions in the kernel, and a
    helper's stubs read them back from ~/.ipython's history: the confined kernel keeps none, in a folder of its own."""
    kernel = executors.Kernel(tmp_path / "work", timeout=120, denied=[tmp_path / "secret"], writable=[tmp_path])
    kernel.cwd.mkdir()
    with kernel.session():
        assert kernel.sandboxed
        assert kernel.run("assert not get_ipython().history_manager.enabled", "history") is None
        check = f"import os\nassert os.environ['IPYTHONDIR'].startswith({str(tmp_path)!r}), os.environ['IPYTHONDIR']"
        assert kernel.run(check, "ipython folder") is None
    plain = executors.Kernel(tmp_path / "work", timeout=120)  # the control: unconfined, IPython records as usual
    with plain.session():
        assert plain.run("assert get_ipython().history_manager.enabled", "history") is None


@LANDLOCK
@pytest.mark.grading  # one kernel, restarted once
def test_a_restarted_kernel_starts_from_folders_nothing_wrote_to(tmp_path):
    """The grader replays the reference's solutions in a restarted kernel: a startup script in its IPython folder, or
    a module named like one it imports in its working folder, had run there (a helper's 22/22). Both are gone."""
    kernel = executors.Kernel(tmp_path / "work", timeout=120, denied=[tmp_path / "secret"], writable=[tmp_path])
    kernel.cwd.mkdir()
    plant = (
        "import os, pathlib\n"
        "startup = pathlib.Path(os.environ['IPYTHONDIR']) / 'profile_default' / 'startup'\n"
        "startup.mkdir(parents=True, exist_ok=True)\n"
        "(startup / '00.py').write_text('planted = True')\n"
        "pathlib.Path('json.py').write_text('planted = True')\n"
    )
    with kernel.session():
        assert kernel.run(plant, "plant") is None
        assert kernel.run("assert (pathlib.Path(os.environ['IPYTHONDIR']) / 'profile_default').exists()", "x") is None
        kernel.restart()
        assert kernel.run("assert 'planted' not in globals()", "startup gone") is None
        assert kernel.run("import os\nassert not os.path.exists('json.py') and os.listdir('.') == []", "cwd") is None


@LANDLOCK
def test_a_confined_kernel_writes_its_output_to_its_own_file_not_the_grader_s(tmp_path):
    """A kernel inherits the grader's standard output: a student printed "Total: 22/22 points" into the grade's log
    that way (the JSON stayed right). Confined, the kernel's output goes to a file of its own."""
    script = "import os\nos.write(1, b'Total: 22/22 points\\n')"
    log = tmp_path / "kernel.log"
    run = subprocess.run(sandbox.command([sys.executable, "-c", script], [], [tmp_path], None, None, log),
                         capture_output=True, text=True, encoding="utf-8")  # fmt: skip
    assert "Total" not in run.stdout and "Total: 22/22" in log.read_text(encoding="utf-8")
    plain = subprocess.run(sandbox.command([sys.executable, "-c", script], [], [tmp_path]), capture_output=True,
                           text=True, encoding="utf-8")  # fmt: skip
    assert "Total: 22/22" in plain.stdout  # the control: without a file, the grader's output takes it


@LANDLOCK
@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="this system has no /dev/shm")
def test_a_confined_kernel_writes_to_devices_but_leaves_nothing_that_outlives_the_grade(tmp_path):
    """/dev/shm outlives the grade: a helper's kernel wrote there the reference solutions the grader had restored into
    it, and the next grade of a copy with every exercise a stub read them back and passed 19 of 22 points. Confined
    with the grader's rules, the kernel still writes /dev/null and reads /dev/urandom, but creates nothing in /dev/shm;
    the control: the same script unconfined creates the file."""
    name = f"/dev/shm/course-test-{os.getpid()}"
    script = (
        "import os\nopen('/dev/null', 'w').write('x')\nassert len(open('/dev/urandom', 'rb').read(4)) == 4\n"
        f"try:\n    open({name!r}, 'w').write('attend')\n    print('shm ok')\nexcept PermissionError:\n"
        "    print('shm denied')\n"
    )
    cmd = sandbox.command([sys.executable, "-c", script], [], executors.kernel_writable([tmp_path]), None,
                          [*executors.kernel_readable(), tmp_path])  # fmt: skip
    try:
        confined = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", timeout=60)
        assert confined.stdout.split() == ["shm", "denied"], confined.stdout + confined.stderr
        assert not os.path.exists(name)
        plain = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, encoding="utf-8")
        assert plain.stdout.split() == ["shm", "ok"] and os.path.exists(name), plain.stdout + plain.stderr
    finally:
        if os.path.exists(name):
            os.unlink(name)
