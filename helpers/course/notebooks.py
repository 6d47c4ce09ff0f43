"""The numbered notebooks: jupytext pairing, headless execution, and in-process execution for tests.

The solved notebooks live in ``notebooks/solutions/``: the percent-format ``NN_name.py`` is the source reviewers
read, ``NN_name.ipynb`` is generated from it (no outputs) for Colab. Where learners look first, ``notebooks/``, hold
the exercise versions, generated from the solved ones (``helpers.course.exercises.write_exercise_versions``).
``run_all`` executes every solved notebook headless with nbclient and writes executed copies to ``reports/executed/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import runtime
from . import bootstrap, colab
from .plotting import HEADLESS

PAIR_FORMATS = "ipynb,py:percent"
# Colab reads these: open on a GPU runtime (T4 on the free tier) with a Python 3 kernel.
COLAB_METADATA = {
    "accelerator": "GPU",
    "colab": {"gpuType": "T4", "provenance": []},
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def notebooks_dir() -> Path:
    """``notebooks/``: the exercise versions, where a learner looks first (the solved ones are in a folder below)."""
    root = runtime.repo_root()
    if root is None:
        raise FileNotFoundError(
            "The notebooks folder was not found: helpers is installed outside a checkout of the course. "
            "Clone the repository and run from its root (pip install -e .)."
        )
    return root / "notebooks"


def solutions_dir() -> Path:
    """``notebooks/solutions/``: the solved notebooks, their ``.py`` sources and ``.ipynb`` pairs."""
    return notebooks_dir() / "solutions"


def exercise_version(source: Path) -> Path:
    """Where the exercise version of the solved ``source`` lives: ``notebooks/NN_name.ipynb``."""
    return notebooks_dir() / source.with_suffix(".ipynb").name


def course_path(name: str, *, solved: bool) -> str:
    """Where the repository holds notebook ``name`` (``01_attention_math.ipynb``), as GitHub's addresses write it."""
    return f"notebooks/solutions/{name}" if solved else f"notebooks/{name}"


def notebook_sources(only: list[str] | None = None) -> list[Path]:
    """The solved sources ``notebooks/solutions/NN_*.py``, in order; ``only`` filters by number or name."""
    paths = sorted(p for p in solutions_dir().glob("[0-9][0-9]_*.py"))
    if only:
        wanted = [str(o) for o in only]
        chosen = [
            p
            for p in paths
            if any(
                p.stem == w or p.stem.startswith(w.zfill(2) + "_") or p.stem == w.removesuffix(".py") for w in wanted
            )
        ]
        unknown = [w for w in wanted if not any(p.stem == w or p.stem.startswith(w.zfill(2) + "_") for p in paths)]
        if unknown:
            names = ", ".join(p.stem for p in paths) or "(none)"
            raise ValueError(
                f"No notebook matches {', '.join(unknown)}. Available: {names}. Use a number (01) or a full name."
            )
        return chosen
    return paths


def notebook_paths(only: list[str] | None = None) -> list[Path]:
    """The solved ``.ipynb`` notebooks (paired with :func:`notebook_sources`), in order."""
    return [p.with_suffix(".ipynb") for p in notebook_sources(only)]


# ----------------------------------------------------------------------------------------------
# pairing


def read_py(path: Path):
    import jupytext  # optional ([dev] extra)

    return jupytext.read(path, fmt="py:percent")


FIRST_CELL_MARKER = '# %% tags=["parameters"]'
# Colab's form markup: the first cell shows as this title with its code folded away (its output still says where the
# course came from and what the runtime has); every other front-end reads a comment
FORM_TITLE = '# @title Set-up: install the course and check the runtime { display-mode: "form" }'


def first_cell_source() -> str:
    """The set-up cell every notebook starts with: the pinned install (``helpers.course.bootstrap``), then QUICK and SEED.

    The cell carries only what must run before the package is importable (:func:`bootstrap.ensure_course`, copied
    verbatim); :func:`bootstrap.after_install` does the rest from the package, imported before anything that loads
    the packages pip may have replaced.
    """
    return "\n".join(
        [
            FORM_TITLE,  # Colab folds the code under this title; headless it is a comment
            "# On Colab this installs the course package at these notebooks' release (from a copy in Drive first, if",
            "# any) and what the runtime lacks, never torch, or says what to do. QUICK=1 shrinks sizes and steps.",
            f'COURSE = "{colab.COURSE_PIN}"',
            f'COURSE_IN_DRIVE = "{colab.DRIVE_COPY}"  # a folder or .zip of the repository',
            "",
            "",
            inspect.getsource(bootstrap.ensure_course).rstrip(),
            "",
            "",
            'installed_from, before_install = ensure_course(COURSE, COURSE_IN_DRIVE, version=COURSE.rsplit("@v", 1)[1])',
            "from helpers.course import bootstrap  # importable now: it says what pip replaced, and when to restart",
            "",
            "bootstrap.after_install(installed_from, before_install)",
            "from helpers import runtime",
            "from helpers.course import colab",
            "",
            "QUICK = runtime.quick_mode()",
            "SEED = 0",
            "ACCELERATOR = colab.setup()",
        ]
    )


BADGE_TAG = "badge"  # the notebook's first cell: the doors that open it (Colab, Kaggle), rewritten by sync


def badge_cell_source(name: str, *, solved: bool) -> str:
    """The badge cell of notebook ``name`` (``01_attention_math.ipynb``): badges opening that same file at the
    release, and what it is. The solved notebook names the exercise version; the exercise version never points at
    the solutions."""
    here = colab.badges(course_path(name, solved=solved))
    if solved:
        exercise = course_path(name, solved=False)
        return (
            f"{here}\n\n**Solutions**: the solved notebook, with model answers and grading rubrics. Learners start "
            f"from the exercise version, [`{exercise}`]({colab.github_url(exercise)})."
        )
    return (
        f"{here}\n\n**Exercise version**: each exercise raises `NotImplementedError` until you write it, and the "
        "checks under it say whether your code is right."
    )


def set_badge_cell(py: Path) -> bool:
    """Make the ``.py``'s first cell its badge cell (:func:`badge_cell_source`); True when it changed."""
    text = py.read_text(encoding="utf-8")
    header_end = text.index("# ---\n", 4) + len("# ---\n")  # jupytext's YAML header
    marker = f'# %% [markdown] tags=["{BADGE_TAG}"]\n'
    body = "\n".join(
        f"# {line}".rstrip() for line in badge_cell_source(py.with_suffix(".ipynb").name, solved=True).splitlines()
    )
    cell = f"\n{marker}{body}\n"
    rest = text[header_end:]
    if rest.startswith("\n" + marker):
        rest = rest[rest.index("\n# %%", 1) :]
    new = text[:header_end] + cell + rest
    if new != text:
        py.write_text(new, encoding="utf-8")
    return new != text


def set_first_cell(py: Path) -> bool:
    """Rewrite the ``.py``'s first code cell to :func:`first_cell_source`; True when it changed."""
    text = py.read_text(encoding="utf-8")
    start = text.index(FIRST_CELL_MARKER) + len(FIRST_CELL_MARKER) + 1
    end = text.index("\n# %%", start)
    new = text[:start] + first_cell_source() + "\n" + text[end:]
    if new != text:
        py.write_text(new, encoding="utf-8")
    return new != text


def sync(paths: list[Path] | None = None) -> list[Path]:
    """(Re)write each ``.ipynb`` from its ``.py`` pair, with no outputs and Colab metadata.

    The ``.py``'s badge cell and set-up cell are first brought up to date (:func:`set_badge_cell`,
    :func:`first_cell_source`: the repository's address and the pinned release).
    """
    import jupytext  # optional ([dev] extra)

    written = []
    for py in paths or notebook_sources():
        set_badge_cell(py)
        set_first_cell(py)
        nb = read_py(py)
        nb.metadata.update(COLAB_METADATA)
        nb.metadata.setdefault("jupytext", {})["formats"] = PAIR_FORMATS
        for i, cell in enumerate(nb.cells):
            cell.id = f"cell-{i:03d}"  # stable ids: re-syncing an unchanged notebook changes nothing
            if cell.cell_type == "code":
                cell.outputs = []
                cell.execution_count = None
        target = py.with_suffix(".ipynb")
        jupytext.write(nb, target, fmt="ipynb")
        written.append(target)
    return written


def pair_problems(py: Path) -> list[str]:
    """What is wrong with a pair: missing ``.ipynb``, cells that drifted apart, committed outputs."""
    import nbformat  # optional ([dev] extra)

    ipynb = py.with_suffix(".ipynb")
    if not ipynb.exists():
        return [f"{ipynb.name} is missing: run `python -m helpers sync-notebooks`."]
    problems = []
    nb = nbformat.read(ipynb, as_version=4)
    src = read_py(py)
    if nb.metadata.get("jupytext", {}).get("formats") != PAIR_FORMATS:
        problems.append(f"{ipynb.name} is not paired ({PAIR_FORMATS!r} missing from its jupytext metadata).")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count")):
            problems.append(f"{ipynb.name} cell {i} has outputs or an execution count: committed notebooks carry none.")
    badge = badge_cell_source(ipynb.name, solved=True)
    if not src.cells or BADGE_TAG not in src.cells[0].metadata.get("tags", []) or src.cells[0].source != badge:
        problems.append(
            f"{py.name}'s first cell is not its badge cell (badges opening this very file at {colab.RELEASE}): "
            "run `python -m helpers sync-notebooks`."
        )
    a = [(c.cell_type, c.source.strip()) for c in nb.cells]
    b = [(c.cell_type, c.source.strip()) for c in src.cells]
    if a != b:
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        problems.append(
            f"{ipynb.name} and {py.name} have drifted apart (first difference at cell {first}; "
            f"{len(a)} vs {len(b)} cells): edit the .py, then run `python -m helpers sync-notebooks`."
        )
    return problems


# ----------------------------------------------------------------------------------------------
# in-process execution, for tests that poke at a notebook's functions and checks


@dataclass
class Cell:
    index: int
    source: str
    tags: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        first = self.source.strip().splitlines()[0] if self.source.strip() else ""
        return f"Cell({self.index}, tags={self.tags}, {first[:60]!r})"


def code_cells(path: Path | str) -> list[Cell]:
    """The code cells of a notebook's ``.py`` source (a number like ``"02"`` works too)."""
    path = Path(path)
    if not path.suffix:
        path = notebook_sources([str(path)])[0]
    path = path.with_suffix(".py")
    nb = read_py(path)
    cells = []
    for c in nb.cells:
        if c.cell_type == "code":
            cells.append(Cell(index=len(cells), source=c.source, tags=list(c.metadata.get("tags", []))))
    return cells


@contextlib.contextmanager
def quick_env(quick: bool = True):
    """QUICK=1 (or 0 for the full run) and the Agg backend while the block runs; the environment put back after."""
    old = runtime.environment_snapshot("QUICK", "MPLBACKEND")
    os.environ["QUICK"] = "1" if quick else "0"
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        yield
    finally:
        runtime.restore_environment(old)


def exec_cells(cells: list[Cell], namespace: dict | None = None, *, name: str = "notebook") -> dict:
    """Run cells in-process, in order, in ``namespace`` (quick mode, Agg backend); returns it.

    A failing cell raises its own exception, with the cell index in the traceback's file name.
    """
    import matplotlib  # slow start-up (pyplot 0.3 s)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # slow start-up (pyplot 0.3 s)

    ns = namespace if namespace is not None else {"__name__": "__notebook__"}
    with quick_env():
        for cell in cells:
            code = compile(cell.source, f"<{name} cell {cell.index}>", "exec")
            exec(code, ns)
            plt.close("all")
    return ns


# ----------------------------------------------------------------------------------------------
# headless execution with nbclient


class NotebookFailed(RuntimeError):
    pass


# Per-cell time limits. The slowest quick-mode cell takes seconds (see run_notebook's progress lines), so a
# cell still running after 5 minutes is stuck; full mode trains for real and keeps half an hour.
QUICK_CELL_TIMEOUT = 5 * 60
FULL_CELL_TIMEOUT = 30 * 60


class _Progress:
    """nbclient hooks: a progress line per code cell, and Ctrl-C / SIGTERM that shut the kernel down.

    One line per code cell, printed as it finishes: about 250 lines for the six notebooks in quick mode,
    each naming the cell, its section and its time, so a run never sits silent for long and a stuck cell
    is always the one after the last line.
    """

    def __init__(self, client, name: str):
        self.client, self.name = client, name
        self.total = sum(1 for c in client.nb.cells if c.cell_type == "code" and c.source.strip())
        self.number, self.section, self.first_line, self.t0, self.stopped_by = 0, "", "", 0.0, None
        client.on_notebook_start = self.on_notebook_start
        client.on_cell_start = self.on_cell_start
        client.on_cell_execute = self.on_cell_execute
        client.on_cell_executed = self.on_cell_executed

    def where(self) -> str:
        section = f' (section "{self.section}")' if self.section else ""
        return f"{self.name}: " + (f"cell {self.number}/{self.total}{section}" if self.number else "kernel start-up")

    def on_cell_start(self, cell, cell_index):
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
            heading = cell.source.strip().splitlines()[0].lstrip("#").strip()
            self.section = heading if len(heading) <= 40 else heading[:37] + "..."

    def on_cell_execute(self, cell, cell_index):
        self.number += 1
        self.first_line, self.t0 = cell.source.strip().splitlines()[0], time.perf_counter()

    def on_cell_executed(self, cell, cell_index, execute_reply):
        print(f"  {self.where()} {time.perf_counter() - self.t0:.1f} s", flush=True)

    def on_notebook_start(self, notebook):
        # nbclient's own SIGINT/SIGTERM handlers (installed just before this hook) shut the kernel down but let
        # the run go on into a dead kernel and an AssertionError. Ours replace them for the rest of the run:
        # cancel the run's tasks, so nbclient's setup_kernel context shuts the kernel down (its whole process
        # group, now) on the way out, and run_notebook turns that into a KeyboardInterrupt. A plain
        # signal.signal handler would not do: nbclient's event-loop handlers take precedence while it runs.

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(RuntimeError, ValueError):  # not in the main thread: no handlers
                loop.add_signal_handler(sig, self.stop, sig)

    def stop(self, sig):
        if self.stopped_by is None:  # a second Ctrl-C must not cancel the shutdown itself
            self.stopped_by = sig
            self.client.shutdown_kernel = "immediate"
            for task in asyncio.all_tasks():
                task.cancel()


def kernel_manager(client):
    """The client's kernel manager, with CurveZMQ transport encryption where the installed versions offer it.

    The kernel (ipykernel 7.4, as pinned) logs "Kernel is running over TCP without encryption" to our stderr
    unless its manager hands it CurveZMQ keys, which jupyter_client 8.10 does with
    ``transport_encryption="auto"`` for kernelspecs that declare curve support (ipykernel's does). Versions
    without that trait (Colab's, say) do not warn either; the check keeps them working.
    """
    import zmq  # optional ([dev] extra)

    km = client.create_kernel_manager()
    if km.has_trait("transport_encryption") and zmq.has("curve"):
        km.transport_encryption = "auto"
    return km


def run_notebook(path: Path, out_dir: Path | None = None, *, quick: bool = True, timeout: float | None = None) -> Path:
    """Execute one notebook headless; write the executed copy (also on failure) and return its path.

    Prints a line per code cell as it finishes. ``timeout`` is each cell's limit in seconds (default
    ``QUICK_CELL_TIMEOUT`` or ``FULL_CELL_TIMEOUT``). Ctrl-C or SIGTERM shut the kernel down and raise
    KeyboardInterrupt.
    """
    import nbclient  # optional ([dev] extra)
    import nbformat  # optional ([dev] extra)

    # optional ([dev] extra)
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    out_dir = Path(out_dir) if out_dir else runtime.reports_dir() / "executed"
    out_dir.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(path, as_version=4)
    target = out_dir / path.name
    timeout = timeout or (QUICK_CELL_TIMEOUT if quick else FULL_CELL_TIMEOUT)
    env_backup = runtime.environment_snapshot("QUICK", HEADLESS, "MPLBACKEND")
    os.environ["QUICK"] = "1" if quick else "0"  # the kernel inherits our environment
    os.environ[HEADLESS] = "1"  # no live widgets: nobody is there to move a slider (helpers.course.plotting)
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend, so figures are PNG outputs as in Colab
    os.environ.setdefault("REPORTS_DIR", str(runtime.reports_dir().resolve()))
    # past the time limit, interrupt the cell and stop at once with this error, rather than shut the kernel down
    # in the middle of the cell (it then logs a traceback on our stderr for the reply it can no longer send)
    limit = {"ename": "CellTimeLimit", "evalue": f"past {timeout:g} s", "traceback": []}
    client = nbclient.NotebookClient(
        nb,
        timeout=max(1, round(timeout)),
        interrupt_on_timeout=True,
        error_on_timeout=limit,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.km = kernel_manager(client)
    progress = _Progress(client, path.stem)
    try:
        client.execute()
    except BaseException as err:
        nbformat.write(nb, target)
        if progress.stopped_by is not None:  # our signal handler cancelled the run; the kernel is shut down
            raise KeyboardInterrupt(
                f"{progress.stopped_by.name} during {progress.where()}; the kernel was shut down and the "
                f"executed copy so far is {target}"
            ) from None
        if isinstance(err, CellExecutionError) and err.ename == limit["ename"]:
            raise NotebookFailed(
                f"{progress.where()} ran past the {timeout / 60:g}-minute cell time limit; its first line: "
                f"{progress.first_line!r}. If it is only slow here, rerun with a longer limit, e.g. "
                f"`python -m helpers run-notebooks --only {path} --cell-timeout {max(10, 4 * timeout / 60):g}`; "
                f"if it should be quick, it hangs: the executed copy {target} has its outputs and, as a rule, the line it hung on."
            ) from None
        if isinstance(err, DeadKernelError):
            raise NotebookFailed(
                f"The kernel died during {progress.where()} (often: out of memory); its first line: "
                f"{progress.first_line!r}. The executed copy {target} has the outputs so far."
            ) from None
        if isinstance(err, CellExecutionError):
            raise NotebookFailed(f"{path.name} failed; the executed copy with the error is {target}\n{err}") from None
        raise
    finally:
        runtime.restore_environment(env_backup)
    nbformat.write(nb, target)
    return target


def run_all(
    only: list[str] | None = None,
    *,
    quick: bool = True,
    out_dir: Path | None = None,
    cell_timeout: float | None = None,
) -> list[tuple[str, float]]:
    """Execute the notebooks in order, printing a line per code cell, one per notebook and the total time.

    ``only`` picks notebooks by number or name, or names ``.ipynb`` files anywhere (a student's copy);
    ``cell_timeout`` is each cell's limit in seconds (see :func:`run_notebook`).
    """
    files = [Path(o) for o in only or [] if str(o).endswith(".ipynb")]
    for f in files:
        if not f.is_file():
            raise FileNotFoundError(f"{f} is not a notebook file: give an existing .ipynb path, or a number like 01.")
    names = [o for o in only or [] if not str(o).endswith(".ipynb")]
    paths = (notebook_paths(names) if names or not files else []) + files
    if not paths:
        raise FileNotFoundError(f"No notebooks found in {notebooks_dir()}.")
    mode = "quick" if quick else "full"
    print(
        f"Running {len(paths)} notebook(s) headless in {mode} mode; reports go to {runtime.reports_dir()}", flush=True
    )
    times, start = [], time.perf_counter()
    for i, path in enumerate(paths, 1):
        t0 = time.perf_counter()
        try:
            run_notebook(path, out_dir, quick=quick, timeout=cell_timeout)
        except NotebookFailed:
            print(f"[{i}/{len(paths)}] {path.stem}: FAILED after {time.perf_counter() - t0:.1f}s", flush=True)
            raise
        dt = time.perf_counter() - t0
        times.append((path.stem, dt))
        # one whole line per notebook, printed when it ends, so kernel log lines cannot split it
        print(f"[{i}/{len(paths)}] {path.stem}: ok in {dt:.1f}s", flush=True)
    total = time.perf_counter() - start
    print(
        f"All {len(paths)} notebooks ran in {total:.1f}s. Figures: {runtime.figures_dir()}  Metrics: {runtime.metrics_dir()}",
        flush=True,
    )
    return times
