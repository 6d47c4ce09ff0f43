"""Each notebook executed once per test run: in-process, solutions in place, into the session's reports folder.

The notebook tests poke at its namespace, the figure tests read what it saved, and the grading catalogue starts each
exercise from the namespace as it stood when that exercise's heading was reached.

Under pytest-xdist (the README's test command: two workers, ``--dist loadgroup``) every test that reads notebook NN's
solved run carries the mark ``reads_solved("NN")``, an ``xdist_group``: xdist sends a group to one worker, so each
notebook still runs once, and shares every other test out one by one. A test that reads a run without the mark fails
(``_claim_solved_run``) instead of running the notebook a second time on the other worker.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.course import exercises, notebooks


def reads_solved(number: str) -> pytest.MarkDecorator:
    """The mark of a test that reads notebook ``number``'s solved run (``solved(number)``)."""
    return pytest.mark.xdist_group(f"notebook-{number}")


def per_notebook(cases, number_of, ids=None) -> list:
    """``cases`` for ``parametrize``, each marked with the notebook whose solved run it reads (``number_of(case)``,
    or None for a case that reads none)."""
    ids = ids or [None] * len(cases)
    params = []
    for case, name in zip(cases, ids):
        number = number_of(case)
        values = case if isinstance(case, tuple) else (case,)
        params.append(pytest.param(*values, id=name, marks=[reads_solved(number)] if number else []))
    return params


class _Snapshotting(exercises.InProcess):
    """An in-process executor that also keeps the namespace as it was right before each exercise's first cell."""

    def __init__(self, starts: dict[int, str]):
        super().__init__()
        self.starts = sorted(starts.items())  # (heading cell index, exercise number)
        self.snapshots: dict[str, dict] = {}

    def run(self, source: str, label: str, *, student: bool = False, check: bool = False):
        index = label.rsplit(" cell ", 1)[-1]
        if index.isdigit():
            for heading, number in self.starts:
                if heading < int(index) and number not in self.snapshots:
                    self.snapshots[number] = dict(self.namespace)
        return super().run(source, label, student=student, check=check)


def _claim_solved_run(number: str) -> None:
    """Under pytest-xdist, fail when a second worker starts notebook ``number``'s solved run: a test that reads it
    lacks the mark ``reads_solved(number)``, and the notebook would run twice (it did once, for notebook 05's tricks:
    four minutes of CI)."""
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
            f"but lacks the mark tests.solved.reads_solved({number!r}) (or the run is not under --dist loadgroup)."
        )


class SolvedRun:
    def __init__(self, namespace: dict, snapshots: dict[str, dict], path):
        self.namespace, self.snapshots, self.path = namespace, snapshots, path


SOLVED_RUNS: dict[str, SolvedRun] = {}


def solved(number: str) -> SolvedRun:
    """Notebook ``number`` run once in-process with full marks (``exercises.run_solved``), cached."""
    if number not in SOLVED_RUNS:
        import torch

        _claim_solved_run(number)

        path = notebooks.notebook_sources([number])[0]
        found = exercises.find_exercises(notebooks.read_py(path))
        starts = {e.heading_cell: e.number for e in found if not e.full_mode}  # full-mode ones do not run in quick mode
        executor = _Snapshotting(starts)
        threads = torch.get_num_threads()  # quick mode may set one thread for a tiny model
        try:
            exercises.run_solved(path, executor=executor)  # fails unless every point is earned
        finally:
            torch.set_num_threads(threads)
        missing = set(starts.values()) - set(executor.snapshots)
        assert not missing, f"no snapshot before exercises {sorted(missing)}"
        SOLVED_RUNS[number] = SolvedRun(executor.namespace, executor.snapshots, path)
    return SOLVED_RUNS[number]
