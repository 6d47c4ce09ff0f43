"""How the grader runs a notebook's cells: in this process (fast; the tests) or in a Jupyter kernel (as a notebook
runs; the grader's default). A student's own cell runs under a file name the guard recognises
(``helpers.course.guard``), so that the package's reference is out of its direct reach."""

from __future__ import annotations

import contextlib
import os
import re
import traceback
from pathlib import Path

from .guard import STUDENT_FILE


def _first_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


class CellError(tuple):
    """What a cell raised, ``(ename, evalue)`` as before, and ``student_frames``: the student's own lines the error
    passed through, as ``(label, line, function)``, outermost first (the deepest raised it). Empty when the error never
    went through the student's code (a check that failed on its own assert)."""

    def __new__(cls, ename: str, evalue: str, student_frames=()):
        error = super().__new__(cls, (ename, evalue))
        error.student_frames = list(student_frames)
        return error


def _label(filename: str) -> str:
    """ "<student 02_x cell 12>" -> "02_x cell 12": the label the grader compiled a student's cell under."""
    return filename[len(STUDENT_FILE) :].strip().removesuffix(">")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# IPython 8 writes "File <student 02_x cell 12>:5, in attend(q, K, V)"; the plain form 'File "<...>", line 5, in f'
_KERNEL_FRAME = re.compile(r'File "?(' + re.escape(STUDENT_FILE) + r'[^>]*>)"?(?::|, line )(\d+)(?:, in (\w+))?')


def student_frames_of_traceback(text: str) -> list[tuple[str, int, str]]:
    """The student's frames in a kernel's formatted traceback (colours stripped), outermost first."""
    return [(_label(f), int(line), name or "") for f, line, name in _KERNEL_FRAME.findall(_ANSI.sub("", text))]


class InProcess:
    """Runs cells with ``exec`` in one namespace (quick mode, Agg backend). Fast; used by the tests."""

    def __init__(self, namespace: dict | None = None, *, quick: bool = True):
        self.namespace = namespace if namespace is not None else {"__name__": "__notebook__"}
        self.quick = quick  # False: the full run (grade --full)

    @contextlib.contextmanager
    def session(self):
        from .notebooks import quick_env

        with quick_env(self.quick):
            yield self

    def run(self, source: str, label: str, *, student: bool = False) -> tuple[str, str] | None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        filename = f"{STUDENT_FILE} {label}>" if student else f"<{label}>"
        try:
            exec(compile(source, filename, "exec"), self.namespace)
        except (Exception, SystemExit) as err:  # a student's error is a result, not a crash
            frames = [
                (_label(f.filename), f.lineno, f.name)
                for f in traceback.extract_tb(err.__traceback__)
                if f.filename.startswith(STUDENT_FILE)
            ]
            return CellError(type(err).__name__, str(err), frames)
        finally:
            plt.close("all")
        return None


class Kernel:
    """Runs cells in a Jupyter kernel with nbclient, as a notebook runs: the grader's default."""

    def __init__(self, cwd: Path, timeout: int = 1800, *, quick: bool = True):
        self.cwd, self.timeout, self.quick = Path(cwd), timeout, quick

    @contextlib.contextmanager
    def session(self):
        import nbclient
        import nbformat

        from .. import runtime

        self._nb = nbformat.v4.new_notebook()
        from .plotting import HEADLESS

        env = runtime.environment_snapshot("QUICK", "REPORTS_DIR", HEADLESS)
        os.environ["QUICK"] = "1" if self.quick else "0"
        os.environ[HEADLESS] = "1"
        os.environ.setdefault("REPORTS_DIR", str(runtime.reports_dir().resolve()))
        self._client = nbclient.NotebookClient(
            self._nb, timeout=self.timeout, kernel_name="python3", resources={"metadata": {"path": str(self.cwd)}}
        )
        from .notebooks import kernel_manager

        self._client.km = kernel_manager(self._client)  # encrypted: no "running over TCP" warning
        try:
            with self._client.setup_kernel():
                yield self
        finally:
            runtime.restore_environment(env)

    def run(self, source: str, label: str, *, student: bool = False) -> tuple[str, str] | None:
        import nbformat
        from nbclient.exceptions import CellExecutionError, CellTimeoutError

        from .guard import student_source

        cell = nbformat.v4.new_code_cell(student_source(source, label) if student else source)
        self._nb.cells.append(cell)
        try:
            self._client.execute_cell(cell, len(self._nb.cells) - 1)
        except CellTimeoutError as err:
            return CellError("TimeoutError", f"{label} ran longer than {self.timeout} s ({_first_line(err)})")
        except CellExecutionError as err:
            return CellError(err.ename, err.evalue, student_frames_of_traceback(str(err.traceback)))
        return None
