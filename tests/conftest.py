"""Shared test set-up: quick mode, no display, no network, reports in a temporary folder."""

import os
from pathlib import Path

os.environ["QUICK"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")
# Nothing may reach a hub during tests (rule 3): these make the HF libraries fail fast instead.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest  # noqa: E402

from helpers.course import exercises  # noqa: E402  (after the environment above)


@pytest.fixture(scope="session", autouse=True)
def _newer_sentences(tmp_path_factory):
    """The newer-sentence development file is beside the repository on our machines but not in CI: tests see a
    small stand-in of invented pairs instead, everywhere, so notebook 03 scores a third set the same way in both."""
    from helpers import runtime
    from helpers.text.corpus import builtin_corpus

    path = tmp_path_factory.mktemp("newer") / "dev.fr-en.tsv"
    path.write_text("".join(f"{fr}\t{en}\n" for fr, en in builtin_corpus(60, seed=99, difficulty=2)), encoding="utf-8")
    old = runtime.environment_snapshot("TATOEBA_NEWER_DEV")
    os.environ["TATOEBA_NEWER_DEV"] = str(path)
    yield path
    runtime.restore_environment(old)


@pytest.fixture(scope="session", autouse=True)
def _reports_dir(tmp_path_factory):
    """Figures and metrics written by tests go to a temporary folder, not the checkout's reports/."""
    from helpers import runtime

    path = tmp_path_factory.mktemp("reports")
    old = runtime.environment_snapshot("REPORTS_DIR")
    os.environ["REPORTS_DIR"] = str(path)
    yield path
    runtime.restore_environment(old)


# ---------------------------------------------------------------------------------------------
# each notebook executed once per test run: in-process, solutions in place, into the session's reports folder.
# The notebook tests poke at its namespace, the figure tests read what it saved, and the grading catalogue
# starts each exercise from the namespace as it stood when that exercise's heading was reached.


class _Snapshotting(exercises.InProcess):
    """An in-process executor that also keeps the namespace as it was right before each exercise's first cell."""

    def __init__(self, starts: dict[int, str]):
        super().__init__()
        self.starts = sorted(starts.items())  # (heading cell index, exercise number)
        self.snapshots: dict[str, dict] = {}

    def run(self, source: str, label: str, *, student: bool = False):
        index = label.rsplit(" cell ", 1)[-1]
        if index.isdigit():
            for heading, number in self.starts:
                if heading < int(index) and number not in self.snapshots:
                    self.snapshots[number] = dict(self.namespace)
        return super().run(source, label, student=student)


def _claim_solved_run(number: str) -> None:
    """Under pytest-xdist, fail when a second worker starts notebook ``number``'s solved run: a test that reads it
    was not routed to the worker that runs it (``notebook_of`` below), and the notebook would run twice (it did, for
    notebook 05's tricks: four minutes of CI)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    shared = os.environ.get("SOLVED_RUNS_DIR")
    if not worker or not shared:
        return
    mine = Path(shared) / f"{number}.{worker}"
    others = [p.name for p in Path(shared).glob(f"{number}.*") if p != mine]
    mine.touch()
    if others:
        raise AssertionError(
            f"notebook {number}'s solved run started on {worker} after {others[0].split('.')[1]}: this test reads it "
            "but tests/conftest.py's notebook_of does not route it to that worker; add its name there."
        )


class SolvedRun:
    def __init__(self, namespace: dict, snapshots: dict[str, dict], path):
        self.namespace, self.snapshots, self.path = namespace, snapshots, path


_SOLVED: dict[str, SolvedRun] = {}


def solved(number: str) -> SolvedRun:
    """Notebook ``number`` run once in-process with full marks (``exercises.run_solved``), cached."""
    if number not in _SOLVED:
        import torch

        from helpers.course import notebooks

        _claim_solved_run(number)

        path = notebooks.notebook_sources([number])[0]
        starts = {e.heading_cell: e.number for e in exercises.find_exercises(notebooks.read_py(path))}
        executor = _Snapshotting(starts)
        threads = torch.get_num_threads()  # quick mode may set one thread for a tiny model
        try:
            exercises.run_solved(path, executor=executor)  # fails unless every point is earned
        finally:
            torch.set_num_threads(threads)
        missing = set(starts.values()) - set(executor.snapshots)
        assert not missing, f"no snapshot before exercises {sorted(missing)}"
        _SOLVED[number] = SolvedRun(executor.namespace, executor.snapshots, path)
    return _SOLVED[number]


# Under pytest-xdist (the README's test command runs two workers) every test that reads notebook NN's solved run
# goes to the worker that runs it, so each notebook still runs once; every other test is shared out one by one.
def notebook_of(nodeid: str) -> str | None:
    """The notebook whose solved run the test ``nodeid`` reads: from its file (test_notebookNN.py) or its
    parameters (``[03-3.1]``, ``[3.2-labels not shifted]``, ``[03]``); None for a test that reads none."""
    import re

    file, _, rest = nodeid.partition("::")
    found = re.fullmatch(r"tests/test_notebook(\d\d)\.py", file)
    if found:
        return found.group(1)
    if file not in ("tests/test_exercises.py", "tests/test_notebooks.py"):
        return None
    fixed = {"test_the_no_other_half": "02", "test_report_command": "03"}
    for prefix, number in fixed.items():
        if rest.startswith(prefix):
            return number
    reads = ("test_an_exercise_graded_alone", "test_each_wrong_answer", "test_each_trick_passes",
             "test_every_notebook_saves", "test_every_saved_figure", "test_quick_mode_figures")  # fmt: skip
    found = re.search(r"\[(\d\d)(?:-\d+\.\d+|_\w+)?\]$", rest) or re.search(r"\[(\d)\.\d+-", rest)
    return found.group(1).zfill(2) if found and rest.startswith(reads) else None


# Not xdist's own `--dist loadgroup` with xdist_group marks: with pytest 9.2 it silently stops grouping (it writes the
# group into a node id field pytest no longer reads: pytest-dev/pytest-xdist#1386, fix proposed in #1388), and each
# notebook would run on both workers. When that is fixed, marks can replace notebook_of.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerPerSolvedNotebook(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            number = notebook_of(nodeid)
            return f"notebook-{number}" if number else nodeid

    return OneWorkerPerSolvedNotebook(config, log)


def pytest_configure(config):
    """The controller makes one folder that its workers share, where each solved run is claimed."""
    if not os.environ.get("PYTEST_XDIST_WORKER") and getattr(config.option, "numprocesses", None):
        import tempfile

        os.environ["SOLVED_RUNS_DIR"] = tempfile.mkdtemp(prefix="solved-runs-")


if os.environ.get("PYTEST_XDIST_WORKER"):  # two workers on two cores: one torch thread each, not two
    import torch

    torch.set_num_threads(1)
    # and the same for what a test starts (the CLI in a subprocess, torchrun's ranks, a Jupyter kernel): a process
    # with two threads beside a busy worker waits at every operation (the tiny preset's training steps ran 15 times
    # slower: 618 against 9,544 target tokens/s)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_sessionfinish(session, exitstatus):
    import shutil

    for run in _SOLVED.values():  # run folders the notebooks made outside the reports folder
        for key in ("RUN_DIR", "RUNS", "stand_ins"):
            if isinstance(run.namespace.get(key), (str, os.PathLike)):
                shutil.rmtree(run.namespace[key], ignore_errors=True)
