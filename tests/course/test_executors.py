"""helpers.course.executors: both ways the grader runs a cell (in this process, in a Jupyter kernel) share state
between cells, turn a cell's error into (name, message) instead of raising, and run a student's cell under the
file name the guard recognises."""

from __future__ import annotations

import os

import pytest

from helpers.course.executors import InProcess, Kernel, student_frames_of_traceback
from helpers.course.guard import STUDENT_FILE


def test_in_process_cells_share_one_namespace_and_errors_come_back_as_results():
    ex = InProcess()
    with ex.session():
        assert ex.run("x = 2\nquick = __import__('os').environ['QUICK']", "cell 1") is None
        assert ex.run("y = x * 21", "cell 2") is None
        assert ex.run("raise KeyError('no such word')", "cell 3") == ("KeyError", "'no such word'")
        assert ex.run("raise SystemExit('stopped')", "cell 4") == ("SystemExit", "stopped")  # exit() in a cell
    assert ex.namespace["y"] == 42 and ex.namespace["quick"] == "1"  # the session runs the cells in quick mode


def test_in_process_compiles_a_students_cell_under_the_guards_file_name(monkeypatch):
    monkeypatch.setenv("QUICK", "0")
    ex = InProcess({"__name__": "__notebook__"})
    with ex.session():
        ex.run("import sys\nwhere = sys._getframe().f_code.co_filename", "2.1", student=True)
        assert ex.namespace["where"].startswith(STUDENT_FILE) and "2.1" in ex.namespace["where"]
        ex.run("import sys\nwhere = sys._getframe().f_code.co_filename", "setup")
        assert ex.namespace["where"] == "<setup>"
    assert os.environ["QUICK"] == "0"  # the session puts the environment back


@pytest.mark.grading
def test_a_kernel_shares_state_between_cells_reports_errors_and_restores_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("QUICK", raising=False)
    ex = Kernel(tmp_path, timeout=120)
    with ex.session():
        assert os.environ["QUICK"] == "1"
        assert ex.run("import os\nx = 6 * 7\nquick = os.environ['QUICK']", "cell 1") is None
        assert ex.run("assert x == 42 and quick == '1', (x, quick)", "cell 2") is None
        assert ex.run("raise ValueError('bad shape')", "cell 3") == ("ValueError", "bad shape")
    assert "QUICK" not in os.environ


def test_an_error_names_the_students_own_lines_it_went_through():
    """Issue 48: a failed exercise shows the student's line that raised, not only the check's message."""
    ex = InProcess()
    with ex.session():
        assert ex.run("def f(x):\n    y = x + 1\n    return y / 0\n", "02_x cell 7", student=True) is None
        error = ex.run("assert f(1) == 2, 'f(1) should be 2'", "check of Exercise 9.1")
        clean = ex.run("assert 1 == 2, 'a check on its own'", "check of Exercise 9.2")
    assert error == ("ZeroDivisionError", "division by zero")  # still the (name, message) pair
    assert error.student_frames == [("02_x cell 7", 3, "f")]
    assert clean.student_frames == [], "a check's own failure went through no student line"


@pytest.mark.grading
def test_a_kernel_error_names_the_students_own_lines_too(tmp_path):
    ex = Kernel(tmp_path, timeout=120)
    with ex.session():
        assert ex.run("def f(x):\n    y = x + 1\n    return y / 0\n", "02_x cell 7", student=True) is None
        error = ex.run("f(1)", "check of Exercise 9.1")
    assert error == ("ZeroDivisionError", "division by zero")
    assert error.student_frames == [("02_x cell 7", 3, "f")]


def test_frames_are_read_from_a_kernels_coloured_traceback():
    text = (
        "\x1b[0;31mZeroDivisionError\x1b[0m  Traceback (most recent call last)\n"
        "File \x1b[0;32m<check>:1\x1b[0m\n"
        "File \x1b[0;32m<student 02_x cell 7>:3\x1b[0m, in \x1b[0;36mf\x1b[0;34m(x)\x1b[0m\n"
        'File "<student 02_x cell 9>", line 12, in g\n'
    )
    assert student_frames_of_traceback(text) == [("02_x cell 7", 3, "f"), ("02_x cell 9", 12, "g")]


# ---------------------------------------------------------------------------------------------------------------
# issue 50: the kernel's limits and the processes it leaves


def test_the_memory_limit_is_three_quarters_of_the_machine_and_none_beside_a_cuda_gpu(monkeypatch):
    import torch

    from helpers.course import executors

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert executors.default_memory_limit() == max(8 << 30, total * 3 // 4)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the GPU branch, on any machine
    assert executors.default_memory_limit() == 0, "CUDA reserves address space beyond RAM: no limit there"


def test_kill_descendants_ends_a_detached_grandchild_and_spares_what_was_there_before(tmp_path):
    import subprocess
    import sys
    import time

    from helpers.course import executors

    if not executors.become_subreaper():
        pytest.skip("no subreaper here (not Linux): detached processes escape")
    keep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    before = executors.descendants()
    pid_file = tmp_path / "pid"
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n        time.sleep(60)\n    os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    daemon = int(pid_file.read_text())
    assert daemon in executors.descendants(), "re-parented to this process (the subreaper), not to init"
    killed = executors.kill_descendants(before)  # the daemon (and its parent, a zombie the subreaper reaps)
    assert daemon in killed and not set(killed) & before, killed
    assert daemon not in executors.descendants() and keep.poll() is None, "what was there before is left alone"
    keep.kill()
    keep.wait()


@pytest.mark.grading
def test_the_grader_keeps_a_megabyte_of_a_cells_output_not_all_of_it(tmp_path, monkeypatch):
    """nbclient keeps every output of a cell in the grader's memory: a helper's cell printed 150 lines of 10 MB and
    the grader grew to 2.4 GB (2026-12-07). The kernel keeps the first OUTPUT_BYTES of a cell's output and says so;
    the cell still runs to its end, and an error after the flood still comes back. The control: with no cap the
    same cell's outputs all stay."""
    from helpers.course import executors

    flood = "import sys\nfor _ in range(8):\n    sys.stdout.write('x' * 1_000_000 + '\\n'); sys.stdout.flush()\n"
    monkeypatch.setattr(executors, "OUTPUT_BYTES", 2_500_000)
    ex = executors.Kernel(tmp_path, timeout=120)
    with ex.session():
        assert ex.run(flood + "done = True", "flood") is None
        kept = sum(len(o.get("text", "")) for o in ex._nb.cells[-1].outputs)
        assert 1_000_000 <= kept <= 2_600_000, kept
        assert "keeps the first 2,500,000 bytes" in ex._nb.cells[-1].outputs[-1]["text"]
        assert ex.run("assert done\n" + flood + "raise ValueError('after the flood')", "error") == (
            "ValueError",
            "after the flood",
        )
    monkeypatch.setattr(executors, "OUTPUT_BYTES", 10**12)
    ex = executors.Kernel(tmp_path, timeout=120)
    with ex.session():
        assert ex.run(flood, "flood") is None
        assert sum(len(o.get("text", "")) for o in ex._nb.cells[-1].outputs) >= 8_000_000
