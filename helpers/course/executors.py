"""How the grader runs a notebook's cells: in this process (fast; the tests) or in a Jupyter kernel (as a notebook
runs; the grader's default). A student's own cell runs under a file name the guard recognises
(``helpers.course.guard``), so that the package's reference is out of its direct reach."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

import torch

from .. import runtime
from . import sandbox
from .guard import STUDENT_FILE, check_source, compile_check, student_source
from .notebooks import kernel_manager, quick_env
from .plotting import HEADLESS

try:
    import resource  # POSIX: the kernel's memory limit
except ImportError:  # Windows: no limit
    resource = None


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
        with quick_env(self.quick):
            yield self

    def run(self, source: str, label: str, *, student: bool = False, check: bool = False) -> tuple[str, str] | None:
        import matplotlib  # slow start-up (pyplot 0.3 s)

        matplotlib.use("Agg")
        # slow start-up (pyplot 0.3 s)
        import matplotlib.pyplot as plt

        filename = f"{STUDENT_FILE} {label}>" if student else f"<{label}>"
        try:
            exec(compile_check(source, label) if check else compile(source, filename, "exec"), self.namespace)
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
    """Runs cells in a Jupyter kernel with nbclient, as a notebook runs: the grader's default.

    The kernel is a process of its own (the grader's process runs none of the student's code) in a working folder of
    its own (the notebook's folder unless ``cwd`` says otherwise), with a time limit per cell (``timeout`` seconds)
    and, on Linux, a memory limit (``memory_bytes``, RLIMIT_AS). A cell that kills the kernel or runs past its limit
    is an error of that cell; :meth:`restart` gives a fresh kernel. On leaving :meth:`session` (and at each restart)
    every process the kernel started is killed, detached ones included (on Linux this process is made a
    "subreaper", so that they stay its descendants): none outlives the grade, and none can touch what the grader
    writes afterwards.
    """

    def __init__(
        self,
        cwd: Path,
        timeout: int = 1800,
        *,
        quick: bool = True,
        memory_bytes: int | None = None,
        denied: list[Path] | None = None,
        reports: Path | None = None,
        writable: list[Path] | None = None,
    ):
        self.cwd, self.timeout, self.quick = Path(cwd), timeout, quick
        self.memory_bytes = memory_bytes if memory_bytes is not None else default_memory_limit()
        self.died = False  # the last cell killed the kernel, or ran past its limit: restart() before going on
        # None: no sandbox; else the kernel runs confined (helpers.course.sandbox), these paths unreadable to it
        self.denied = None if denied is None else [Path(d) for d in denied]
        self.sandboxed = self.denied is not None and sandbox.abi() > 0  # confined: asked for, and Landlock is there
        self.reports = reports  # the kernel's REPORTS_DIR (the grader gives it one of its own); None: as it is set
        # confined, the kernel writes beneath these (and /dev, the caches); its temporary folder is the first's tmp/
        self.writable = [Path(w) for w in writable] if writable else [self.cwd]

    @contextlib.contextmanager
    def session(self):
        env = runtime.environment_snapshot("QUICK", "REPORTS_DIR", HEADLESS, *KERNEL_FOLDERS)
        os.environ["QUICK"] = "1" if self.quick else "0"
        os.environ[HEADLESS] = "1"
        if self.reports is not None:
            os.environ["REPORTS_DIR"] = str(self.reports)
        if self.sandboxed:  # the kernel's own folders, in the grade's
            for variable, name in KERNEL_FOLDERS.items():
                os.environ[variable] = str(self.writable[0] / name)
        os.environ.setdefault("REPORTS_DIR", str(runtime.reports_dir().resolve()))
        become_subreaper()
        dumpable = set_dumpable(False)  # no debugger attaches to the grader from the kernel, even unconfined
        self._before = descendants()
        try:
            self._start()
            yield self
        finally:
            try:
                self._stop()
            finally:
                runtime.restore_environment(env)
                if dumpable:
                    set_dumpable(True)

    def _start(self) -> None:
        import nbclient  # optional ([dev] extra)
        import nbformat  # optional ([dev] extra)

        self._nb = nbformat.v4.new_notebook()
        self._client = nbclient.NotebookClient(
            self._nb, timeout=self.timeout, kernel_name="python3", resources={"metadata": {"path": str(self.cwd)}}
        )
        self._client.km = kernel_manager(self._client)  # encrypted: no "running over TCP" warning
        self._client.output = kept_output(self._client.output, OUTPUT_BYTES)
        self._fresh_folders()
        if self.sandboxed:  # the kernel confines itself before it starts: see helpers.course.sandbox
            km, launch = self._client.km, self._client.km.format_kernel_cmd
            km.format_kernel_cmd = lambda extra_arguments=None: sandbox.command(
                [*launch(extra_arguments), "--HistoryManager.enabled=False"],  # no record of the reference's cells
                self.denied,
                [*kernel_writable(self.writable), Path(km.connection_file)],
                [km.shell_port, km.iopub_port, km.stdin_port, km.control_port, km.hb_port],
                kernel_readable(),
                self.writable[0] / "kernel.log",  # not the grader's terminal or log: a student could print there
            )
        self._context = self._client.setup_kernel()
        self._context.__enter__()
        self.died = False
        pid = getattr(getattr(self._client.km, "provisioner", None), "pid", None)
        if pid is not None and self.memory_bytes and hasattr(resource, "prlimit"):
            with contextlib.suppress(OSError):
                resource.prlimit(pid, resource.RLIMIT_AS, (self.memory_bytes, self.memory_bytes))

    def _stop(self) -> None:
        try:
            with contextlib.suppress(Exception):  # a dead kernel's shutdown may fail: the processes are killed below
                self._context.__exit__(None, None, None)
        finally:
            kill_descendants(self._before)

    def restart(self) -> None:
        """A fresh kernel (the old one and everything it started killed); its namespace is empty, and, confined, its
        working, temporary, IPython and cache folders too: the grader replays the reference's solutions in it, so
        nothing the old kernel wrote (a startup script, a module named like torch in the working folder) may run."""
        self._stop()
        self._start()

    def _fresh_folders(self) -> None:
        if not self.sandboxed:
            return
        for folder in [self.cwd, *(Path(os.environ[v]) for v in KERNEL_FOLDERS)]:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)

    def run(self, source: str, label: str, *, student: bool = False, check: bool = False) -> tuple[str, str] | None:
        import nbformat  # optional ([dev] extra)

        # optional ([dev] extra)
        from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

        wrapped = student_source(source, label) if student else check_source(source, label) if check else source
        cell = nbformat.v4.new_code_cell(wrapped)
        self._nb.cells.append(cell)
        try:
            self._client.execute_cell(cell, len(self._nb.cells) - 1)
        except CellTimeoutError as err:
            self.died = True
            return CellError("TimeoutError", f"{label} ran longer than {self.timeout} s ({_first_line(err)})")
        except DeadKernelError:
            self.died = True
            return CellError(
                "DeadKernelError", f"the kernel died while {label} ran (os._exit, a crash, or out of memory)"
            )
        except CellExecutionError as err:
            return CellError(err.ename, err.evalue, student_frames_of_traceback(str(err.traceback)))
        return None


# what the grader keeps of one cell's output: it grades values and errors, never what a cell prints, and nbclient
# keeps every output in the grader's memory (a helper's cell printed 1.5 GB, and the grader grew to 2.4 GB)
OUTPUT_BYTES = 1 << 20


def kept_output(output, limit: int):
    """nbclient's ``output`` (one output message of a cell into its outputs) keeping at most ``limit`` bytes of a
    cell's outputs; past that, one line says how much was left out."""
    kept: dict[int, int] = {}

    def keep(outs, msg, display_id, cell_index):
        size = len(json.dumps(msg.get("content", {}), default=str))
        before = kept.get(cell_index, 0)
        kept[cell_index] = before + size
        if before + size <= limit:
            return output(outs, msg, display_id, cell_index)
        if before <= limit:  # the first output past the limit: a line instead
            import nbformat  # optional ([dev] extra)

            note = f"[the grader keeps the first {limit:,} bytes of a cell's output]\n"
            outs.append(nbformat.v4.new_output("stream", name="stderr", text=note))
        return None

    return keep


# a confined kernel's folders of its own, made afresh at each start: its temporary files; IPython's settings and history
# (~/.ipython holds every cell any kernel ran, solutions too, and its startup scripts run in every later kernel); the
# caches (~/.cache outlives a grade: what one kernel saved there, the reference's cells, another would read)
KERNEL_FOLDERS = {
    "TMPDIR": "tmp",
    "IPYTHONDIR": "ipython",
    "XDG_CACHE_HOME": "cache",
    "MPLCONFIGDIR": "matplotlib",
    "HF_HOME": "huggingface",  # full mode downloads its models again, into the grade's folder
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
}


# the devices a kernel writes to (a discarded output, random bytes); not /dev/shm or /dev/mqueue, which outlive the
# grade (a kernel wrote the reference solutions restored into it there and the next grade read them back: a helper's
# 19/22 on notebook 01, 2026-12-07), nor a terminal (/dev/tty, /dev/pts: the instructor's, where a kernel could print)
KERNEL_DEVICES = ("null", "zero", "full", "random", "urandom")


def kernel_writable(folders: list[Path]) -> list[Path]:
    """Where a confined kernel may write: ``folders`` (the grader's: the kernel's working folder and its
    :data:`KERNEL_FOLDERS`, the probes' values), the :data:`KERNEL_DEVICES` and the reports folder (the grader gives
    each grade one of its own); not the machine's temporary folder, where a course checkout may lie, nor anything that
    outlives the grade (~/.cache, ~/.ipython, Jupyter's folders, /dev/shm)."""
    return [*folders, *(Path("/dev") / name for name in KERNEL_DEVICES), runtime.reports_dir()]


def kernel_readable() -> list[Path]:
    """Where a confined kernel may read (the denied paths cut out): Python and its packages (this interpreter's
    prefixes and import path), the system's folders, the course (its checkout: helpers/, data/, ...) and the data
    beside it; not the rest of the disk, where other copies of the solutions may lie (another checkout, a test's
    temporary copy, a download)."""
    system = ["/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev", "/run"]
    here = Path.cwd().resolve()  # on the import path of `python -m helpers`: where the instructor happens to be
    imports = (p for p in sys.path if p and Path(p).resolve() != here)
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *imports}
    course = [Path(__file__).resolve().parents[2]]  # the folder that holds helpers/: the checkout, or site-packages
    root = runtime.repo_root()
    if root is not None:
        course += [root, root.parent / "shared" / "data"]
    files = [os.environ["TATOEBA_PATH"]] if os.environ.get("TATOEBA_PATH") else []
    return [Path(p) for p in [*system, *sorted(python), *course, *files]]


def set_dumpable(on: bool) -> bool:
    """Linux: whether another process of this user may attach a debugger to this one, or read its memory (prctl
    PR_SET_DUMPABLE). True if it was changed; False where the system has no such switch."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(4, int(on), 0, 0, 0) == 0  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        return False


def default_memory_limit() -> int:
    """The kernel's address-space limit: three quarters of this machine's memory, at least 8 GiB (torch reserves
    address space it never touches); none where a CUDA GPU is visible, whose driver reserves address space far
    beyond the machine's memory (a limit would stop CUDA from starting in the kernel)."""
    if torch.cuda.is_available():
        return 0
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0  # unknown here: no limit
    return max(8 << 30, total * 3 // 4)


def become_subreaper() -> bool:
    """Linux: orphaned descendants (a detached daemon) are re-parented to this process instead of init, so that
    :func:`kill_descendants` still finds them. False where the system has no such thing."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def descendants() -> set[int]:
    """The pids of this process's descendants (Linux: read from /proc; elsewhere the empty set)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text(encoding="utf-8")
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(text.rsplit(")", 1)[1].split()[1])  # the field after the state
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def kill_descendants(keep: set[int] = frozenset(), rounds: int = 5) -> list[int]:
    """SIGKILL every descendant of this process that is not in ``keep``, until none is left; reap them. Returns
    the pids killed."""
    killed: list[int] = []
    for _ in range(rounds):
        doomed = descendants() - set(keep)
        if not doomed:
            break
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += sorted(doomed)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and descendants() & doomed:
            for pid in doomed:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
            time.sleep(0.02)
    return killed
