"""`python -m helpers run-notebooks`: a progress line per cell, a per-cell time limit, Ctrl-C and SIGTERM
that shut the kernel down, and no kernel warnings on stderr.

Tiny synthetic notebooks in tmp_path, not the course notebooks, so the whole file takes seconds.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from helpers import cli
from helpers.course import notebooks

ROOT = Path(__file__).resolve().parents[2]
TCP_WARNING = "without encryption"  # ipykernel's "Kernel is running over TCP without encryption" warning
PROGRESS = re.compile(r'^  (\S+): cell (\d+)/(\d+)(?: \(section "(.*)"\))? (\d+\.\d) s$')


def write_notebook(path: Path, *cells) -> Path:
    """Cells are strings: code, or markdown when they start with "#"."""
    nb = new_notebook(cells=[new_markdown_cell(c) if c.startswith("#") else new_code_cell(c) for c in cells])
    nbformat.write(nb, path)
    return path


def run_cli(tmp_path: Path, *args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "REPORTS_DIR": str(tmp_path / "reports")}
    cmd = [sys.executable, "-m", "helpers", "run-notebooks", *args]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def running(pid: int) -> bool:
    """Whether a process runs (a zombie, dead and waiting for its new parent to reap it, does not)."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except ProcessLookupError:
        return False
    except FileNotFoundError:  # gone meanwhile, or no /proc (macOS): os.kill said it was there
        return not Path("/proc").is_dir()
    return state not in ("Z", "X")


@pytest.mark.notebook
def test_one_progress_line_per_code_cell_with_its_section_in_a_headless_kernel(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("REPORTS_DIR", str(tmp_path / "reports"))
    path = write_notebook(
        tmp_path / "tiny.ipynb",
        "# A tiny notebook",
        "import os\nprint(os.environ.get('HELPERS_HEADLESS'), os.environ.get('QUICK'))",
        "## 2. Softmax, stably",
        "x = 1",
        "   ",  # an empty code cell: nbclient skips it, and so does the count
        "x + 1",
    )
    executed = notebooks.run_notebook(path, tmp_path / "executed")
    out, err = capfd.readouterr()  # file descriptors: the kernel's own stderr lands here too
    lines = [PROGRESS.match(line) for line in out.splitlines()]
    assert all(lines), f"every stdout line is a progress line:\n{out}"
    assert [(m[1], m[2], m[3], m[4]) for m in lines] == [
        ("tiny", "1", "3", "A tiny notebook"),
        ("tiny", "2", "3", "2. Softmax, stably"),
        ("tiny", "3", "3", "2. Softmax, stably"),
    ]
    first = nbformat.read(executed, as_version=4).cells[1]
    assert first.outputs[0]["text"] == "1 1\n", "the kernel runs headless (no live widgets) and in quick mode"
    assert TCP_WARNING not in err


@pytest.mark.notebook
def test_a_cell_past_its_time_limit_is_named_with_what_to_do(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("REPORTS_DIR", str(tmp_path / "reports"))
    path = write_notebook(tmp_path / "stuck.ipynb", "print('fine')", "import time\nprint('waiting')\ntime.sleep(60)")
    t0 = time.perf_counter()
    with pytest.raises(notebooks.NotebookFailed) as err:
        notebooks.run_notebook(path, tmp_path / "executed", timeout=2)
    assert time.perf_counter() - t0 < 30, "the limit stopped the cell, not the cell's end"
    message = str(err.value)
    assert "stuck: cell 2/2" in message and "'import time'" in message, message
    assert "--cell-timeout" in message and str(tmp_path / "executed" / "stuck.ipynb") in message, message
    kept = nbformat.read(tmp_path / "executed" / "stuck.ipynb", as_version=4)
    assert kept.cells[0].outputs[0]["text"] == "fine\n", "the executed copy keeps the outputs up to the stuck cell"
    assert kept.cells[1].outputs[0]["text"] == "waiting\n"
    # the stuck cell is interrupted before the kernel shuts down: shut down mid-cell, the kernel logs a traceback
    assert "Traceback" not in capfd.readouterr().err


def test_cell_timeout_is_minutes_on_the_command_line_and_minutes_by_default(monkeypatch, capsys):
    assert notebooks.QUICK_CELL_TIMEOUT <= 10 * 60, "quick-mode cells take seconds: a stuck one must not hold a run"
    assert notebooks.FULL_CELL_TIMEOUT >= 30 * 60, "full mode trains for real"
    with pytest.raises(FileNotFoundError, match="not a notebook file"):
        notebooks.run_all(["missing/nowhere.ipynb"])
    calls = []
    monkeypatch.setattr(notebooks, "run_all", lambda only, **kw: calls.append((only, kw)))
    assert cli.main(["run-notebooks", "--only", "01", "--cell-timeout", "2.5"]) == 0
    assert cli.main(["run-notebooks"]) == 0
    assert calls == [(["01"], {"quick": True, "cell_timeout": 150.0}), (None, {"quick": True, "cell_timeout": None})]

    def fail(only, **kw):
        raise notebooks.NotebookFailed("01_x: cell 3/9 ran past the 5-minute cell time limit")

    monkeypatch.setattr(notebooks, "run_all", fail)
    assert cli.main(["run-notebooks", "--only", "01"]) == 1
    assert capsys.readouterr().err == "error: 01_x: cell 3/9 ran past the 5-minute cell time limit\n"


@pytest.mark.notebook
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_stops_the_run_at_once_and_shuts_the_kernel_down(tmp_path, sig):
    pid_file, started = tmp_path / "kernel.pid", tmp_path / "sleeping"
    path = write_notebook(
        tmp_path / "sleepy.ipynb",
        f"import os, pathlib\npathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))",
        f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(60)",
    )
    proc = run_cli(tmp_path, "--only", str(path))
    kernel = None
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), f"the kernel never reached the sleeping cell: {proc.communicate(timeout=10)}"
        kernel = int(pid_file.read_text())
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
        assert proc.returncode == 130, (proc.returncode, err)
        assert "sleepy: cell 1/2" in out, out
        # the last line says what happened (and no traceback of ours follows it)
        assert err.splitlines()[-1].startswith(
            f"Interrupted: {sig.name} during sleepy: cell 2/2; the kernel was shut"
        ), err
        deadline = time.monotonic() + 3
        while running(kernel) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(kernel), "the kernel outlived the command"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if kernel and running(kernel):
            os.kill(kernel, signal.SIGKILL)


@pytest.mark.notebook
def test_a_plain_run_of_a_notebook_path_says_nothing_on_stderr_about_tcp(tmp_path):
    path = write_notebook(tmp_path / "quiet.ipynb", "print('ok')")
    proc = run_cli(tmp_path, "--only", str(path))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "  quiet: cell 1/1 " in out and "[1/1] quiet: ok" in out, out
    assert TCP_WARNING not in err, err
    assert (tmp_path / "reports" / "executed" / "quiet.ipynb").exists()
