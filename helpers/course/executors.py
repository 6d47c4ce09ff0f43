"""How the grader runs a notebook's cells: in this process (fast; the tests) or in a Jupyter kernel (as a notebook
runs; the grader's default). A student's own cell runs under a file name the guard recognises
(``helpers.course.guard``), so that the package's reference is out of its direct reach."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _first_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


class InProcess:
    """Runs cells with ``exec`` in one namespace (quick mode, Agg backend). Fast; used by the tests."""

    def __init__(self, namespace: dict | None = None):
        self.namespace = namespace if namespace is not None else {"__name__": "__notebook__"}

    @contextlib.contextmanager
    def session(self):
        from .notebooks import quick_env

        with quick_env():
            yield self

    def run(self, source: str, label: str, *, student: bool = False) -> tuple[str, str] | None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from .guard import STUDENT_FILE

        filename = f"{STUDENT_FILE} {label}>" if student else f"<{label}>"
        try:
            exec(compile(source, filename, "exec"), self.namespace)
        except (Exception, SystemExit) as err:  # a student's error is a result, not a crash
            return type(err).__name__, str(err)
        finally:
            plt.close("all")
        return None


class Kernel:
    """Runs cells in a Jupyter kernel with nbclient, as a notebook runs: the grader's default."""

    def __init__(self, cwd: Path, timeout: int = 1800):
        self.cwd, self.timeout = Path(cwd), timeout

    @contextlib.contextmanager
    def session(self):
        import nbclient
        import nbformat

        from .. import runtime

        self._nb = nbformat.v4.new_notebook()
        from .plotting import HEADLESS

        env = runtime.environment_snapshot("QUICK", "REPORTS_DIR", HEADLESS)
        os.environ["QUICK"] = os.environ[HEADLESS] = "1"
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
            return "TimeoutError", f"{label} ran longer than {self.timeout} s ({_first_line(err)})"
        except CellExecutionError as err:
            return err.ename, err.evalue
        return None
