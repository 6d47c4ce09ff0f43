"""Exercises: numbered, with points; the student copy made from the solutions, and the grader.

In a notebook's ``.py`` source an exercise starts at a markdown heading such as
``## Exercise 2.3 · Multi-head attention (4 points)`` and runs to the next heading. What the student
writes sits between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` (or on one line ending in ``# SOLUTION``);
the exercise's ``check`` cells hold the asserts that decide it.

Written questions are markdown cells tagged ``question`` (``**Question 1.3.** ...``), each followed by a
markdown cell tagged ``your-answer`` (where the student writes; ``helpers.course.report`` puts it in the report),
usually a code cell where the student computes what supports the answer, and the model answer in cells
tagged ``answer``.

- :func:`build_student` writes the student notebooks: every solution becomes
  ``raise NotImplementedError("Exercise 2.3: ...")``, every cell tagged ``answer`` is removed, and
  everything else (signatures, docstrings, hints, asserts, questions) stays. Student copies are generated,
  never kept by hand, so they cannot drift.
- :func:`grade` runs a notebook (quick mode) cell by cell and reports each exercise as passed, failed
  (with the first failing message) or not attempted, with its points. When the course's own solved
  notebook is at hand (the reference), the run is the reference notebook with the student's solution
  cells swapped in, the reference's checks deciding, and after an exercise that fails or is not attempted
  the reference solution runs in its place: one early mistake does not cost the exercises after it (the
  original assignment's grader does the same). Hidden checks an instructor keeps apart (``--hidden DIR``)
  run at the end of their exercise, in the notebook's own namespace.
"""

from __future__ import annotations

import contextlib
import copy
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import runtime
from . import guard, notebooks, probes
from .executors import InProcess, Kernel  # how cells run: in this process, or in a kernel

BEGIN, END, ONE_LINE = "# BEGIN SOLUTION", "# END SOLUTION", "# SOLUTION"
_HEADING = re.compile(r"^#{1,6}\s+\S")
# "## Exercise 2.3 · Multi-head attention (3 points)" or "## 9. Why divide by √d · Exercise 1.4 (2 points)"
# "(3 points, full mode)": graded only when the grader runs the notebook in full mode (grade --full)
_EXERCISE = re.compile(
    r"^#{1,6}\s+(?P<head>.*?)\bExercise\s+(?P<number>\d+\.\d+)\b(?P<tail>.*?)"
    r"\((?P<points>\d+)\s+points?(?P<full>,\s*full mode)?\)\s*$"
)
NOT_GRADED = "not graded in quick mode"
_TITLE_EDGES = " ·:.-–—"
ANSWER, YOUR_ANSWER, QUESTION, CHECK, RUBRIC = "answer", "your-answer", "question", "check", "rubric"
BADGE = notebooks.BADGE_TAG
# "**Question 1.3 (2 points).**" (the points are what the manual grading sheet gives it; a question without them
# is refused in the course's notebooks by the tests, and counts 0 elsewhere)
_QUESTION = re.compile(r"^\*\*Question\s+(?P<number>\d+\.\d+)(?:\s*\((?P<points>\d+)\s+points?\))?\.?\*\*")
YOUR_ANSWER_PLACEHOLDER = "*Write your answer here: what you found, with the numbers from the cell below.*"
_HIDDEN_HEADER = re.compile(r"^# %%\s*Exercise\s+(?P<number>\d+\.\d+)\b")
_NOTE_EXERCISES = (
    '> **Student version.** Each exercise\'s code is replaced by `raise NotImplementedError("Exercise N.M: ...")`.\n'
    "> Write your code there, keep the signatures, and run the cell and the checks under it: an `assert` that\n"
    "> fails says what is wrong. *Run all* stops at the first exercise not yet done, with its number.\n"
    "> Grading: `python -m helpers grade NOTEBOOK` (the points are in each exercise's heading).\n"
)
_NOTE_QUESTIONS = (
    "> Each **Question** has a *Your answer* cell: write there, support it with numbers from the code cell under\n"
    "> it, and `helpers.course.report.export()` (the last cell) puts your answers into `reports/report.tex`.\n"
    "> Written answers earn the points in their question's first line, graded by hand with a rubric: say what you\n"
    "> found and why, with the numbers that show it."
)
STUDENT_NOTE = _NOTE_EXERCISES + _NOTE_QUESTIONS
# a notebook of written questions only (an appendix): nothing raises, Run all runs it all
QUESTIONS_ONLY_NOTE = (
    "> **Student version.** This notebook has no exercises, only written questions.\n" + _NOTE_QUESTIONS
)


class ExerciseMarkupError(ValueError):
    """The notebook's exercise markers are inconsistent (a block not closed, a solution outside any exercise, ...)."""


@dataclass
class Exercise:
    number: str  # "2.3"
    title: str
    points: int
    heading_cell: int  # index in the notebook's cells of the markdown cell that opens it
    cells: list[int] = field(default_factory=list)  # its code cells, in order
    full_mode: bool = False  # "(3 points, full mode)": graded in full mode only; quick mode leaves it out

    @property
    def label(self) -> str:
        return f"Exercise {self.number}"


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


@dataclass
class Question:
    number: str  # "1.3"
    cell: int  # the markdown cell tagged 'question'
    your_answer: int  # the markdown cell tagged 'your-answer' that follows it
    answers: list[int] = field(default_factory=list)  # cells tagged 'answer' before the next question
    points: int = 0  # from "(N points)" in the question's first line: graded by hand, by its rubric
    rubric: int = -1  # the cell tagged 'answer' and 'rubric' that grades it (-1: none)

    @property
    def label(self) -> str:
        return f"Question {self.number}"


def find_questions(nb) -> list[Question]:
    """The written questions of a notebook, each with its *Your answer* cell and its model-answer cells.

    A question without a *Your answer* cell after it, a *Your answer* cell without a question, or a
    repeated number is refused: the report could not pair the student's text with its question.
    """
    found: list[Question] = []
    pending: Question | None = None
    for index, cell in enumerate(nb.cells):
        cell_tags = tags(cell)
        if QUESTION in cell_tags:
            if cell.cell_type != "markdown":
                raise ExerciseMarkupError(f"cell {index} is tagged '{QUESTION}' but is not a markdown cell.")
            match = _QUESTION.match(cell.source.strip())
            if not match:
                raise ExerciseMarkupError(
                    f"cell {index} is tagged '{QUESTION}' but does not start with '**Question N.M.**': number it."
                )
            if pending is not None and pending.your_answer < 0:
                raise ExerciseMarkupError(f"Question {pending.number} has no '{YOUR_ANSWER}' cell after it.")
            pending = Question(match["number"], index, -1, points=int(match["points"] or 0))
            found.append(pending)
        elif YOUR_ANSWER in cell_tags:
            if pending is None or pending.your_answer >= 0:
                raise ExerciseMarkupError(f"cell {index} is tagged '{YOUR_ANSWER}' but follows no question.")
            pending.your_answer = index
        elif RUBRIC in cell_tags:
            if ANSWER not in cell_tags or cell.cell_type != "markdown":
                raise ExerciseMarkupError(
                    f"cell {index} is tagged '{RUBRIC}': a rubric is a markdown cell tagged '{ANSWER}' too, so that "
                    "the student copy leaves it out."
                )
            if pending is None or pending.your_answer < 0:
                raise ExerciseMarkupError(f"cell {index} is a rubric but follows no question and its answer cell.")
            if pending.rubric >= 0:
                raise ExerciseMarkupError(f"{pending.label} has two rubric cells: keep one.")
            pending.rubric = index
            pending.answers.append(index)
        elif ANSWER in cell_tags and pending is not None:
            pending.answers.append(index)
    if pending is not None and pending.your_answer < 0:
        raise ExerciseMarkupError(f"Question {pending.number} has no '{YOUR_ANSWER}' cell after it.")
    numbers = [q.number for q in found]
    repeated = sorted({n for n in numbers if numbers.count(n) > 1})
    if repeated:
        raise ExerciseMarkupError(f"Question {repeated[0]} appears twice: number each question once.")
    return found


def answer_lines(nb) -> list[str]:
    """Every line of the cells tagged 'answer' (the model answers the student copy leaves out)."""
    return [line for cell in nb.cells if ANSWER in tags(cell) for line in cell.source.splitlines()]


def _markdown_headings(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if _HEADING.match(line.strip())]


def find_exercises(nb, *, solved: bool = True) -> list[Exercise]:
    """The exercises of a notebook (an nbformat node), in order, with the code cells each one owns.

    An exercise owns the code cells from its heading to the next markdown heading of any level. A
    solution block in a cell no exercise owns, a repeated number or an exercise without a solution or
    without a ``check`` cell is refused: each would make a student copy or a grade that means nothing.
    ``solved=False`` reads a student copy, where the solutions are stubs.
    """
    exercises: list[Exercise] = []
    current: Exercise | None = None
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for line in _markdown_headings(cell.source):
                match = _EXERCISE.match(line)
                if match:
                    title = " ".join(part.strip(_TITLE_EDGES) for part in (match["head"], match["tail"])).strip()
                    current = Exercise(match["number"], title, int(match["points"]), index,
                                       full_mode=bool(match["full"]))  # fmt: skip
                    exercises.append(current)
                else:
                    current = None
        elif cell.cell_type == "code":
            has_solution = bool(solution_lines(cell.source, where=f"cell {index}"))
            if has_solution and ANSWER in tags(cell):
                raise ExerciseMarkupError(
                    f"cell {index} is tagged '{ANSWER}' and holds a solution block: the student copy removes answer "
                    "cells, so the exercise would vanish. Keep solutions in untagged cells."
                )
            if current is not None:
                current.cells.append(index)
            elif has_solution:
                raise ExerciseMarkupError(
                    f"cell {index} holds a solution block but no exercise heading comes before it: put it under a "
                    "heading like '## Exercise 2.3 · Title (4 points)'."
                )
    seen: set[str] = set()
    for ex in exercises:
        if ex.number in seen:
            raise ExerciseMarkupError(f"{ex.label} appears twice: number each exercise once.")
        seen.add(ex.number)
        cells = [nb.cells[i] for i in ex.cells]
        if solved and not any(solution_lines(c.source) for c in cells):
            raise ExerciseMarkupError(f"{ex.label} ({ex.title}) has no '{BEGIN}' block: there is nothing to write.")
        if not any(CHECK in tags(c) for c in cells):
            raise ExerciseMarkupError(f"{ex.label} ({ex.title}) has no cell tagged 'check': nothing can grade it.")
    return exercises


def _is_one_line_solution(line: str) -> bool:
    stripped = line.rstrip()
    return stripped.endswith(ONE_LINE) and not stripped.lstrip().startswith("#")


def solution_lines(source: str, where: str = "cell") -> list[str]:
    """The lines of ``source`` that are solution (inside a block, or ending in ``# SOLUTION``)."""
    out, inside = [], False
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ExerciseMarkupError(f"{where}, line {number}: '{BEGIN}' inside another block.")
            inside = True
        elif stripped == END:
            if not inside:
                raise ExerciseMarkupError(f"{where}, line {number}: '{END}' without a '{BEGIN}' before it.")
            inside = False
        elif inside or _is_one_line_solution(line):
            out.append(line)
    if inside:
        raise ExerciseMarkupError(f"{where}: '{BEGIN}' is never closed by '{END}'.")
    return out


def stub_message(ex: Exercise) -> str:
    """ "Exercise 2.9: How many parameters? Replace this line with your code." (no stop after a title's own ?, ! or .)"""
    title = ex.title if ex.title.endswith(("?", "!", ".")) else f"{ex.title}."
    return f"{ex.label}: {title} Replace this line with your code."


def where_in_student_code(error, sources: dict[str, str]) -> str:
    """The student's own lines an error passed through (the executors' ``CellError.student_frames``), deepest last,
    each with its text: what a failed exercise shows besides the check's message. Empty when there are none."""
    lines = []
    for label, line, name in getattr(error, "student_frames", []):
        text = sources.get(label, "").splitlines()
        code = text[line - 1].strip() if 0 < line <= len(text) else ""
        inside = f" in {name}" if name and name != "<module>" else ""
        lines.append(f"your {label}, line {line}{inside}: {code}" if code else f"your {label}, line {line}{inside}")
    return "\n".join(lines)


def strip_solutions(source: str, ex: Exercise, where: str = "cell") -> str:
    """``source`` with each solution block (or ``# SOLUTION`` line) replaced by one ``raise NotImplementedError``."""
    solution_lines(source, where)  # validates the markers first
    out, inside = [], False
    for line in source.splitlines():
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        stub = f"{indent}raise NotImplementedError({stub_message(ex)!r})"
        if stripped == BEGIN:
            inside = True
            out.append(stub)
        elif stripped == END:
            inside = False
        elif inside:
            continue
        elif _is_one_line_solution(line):
            out.append(stub)
        else:
            out.append(line)
    return "\n".join(out)


def notebook_path(notebook: str | Path) -> Path:
    """A notebook's path; a bare number or name (``"02"``) means the course's own ``.py`` source."""
    path = Path(notebook)
    if not path.exists() and len(path.parts) == 1 and path.suffix == "":
        return notebooks.notebook_sources([str(notebook)])[0]
    return path


def read_notebook(path: str | Path):
    """A notebook as an nbformat node, from its ``.py`` (jupytext percent) or ``.ipynb`` file."""
    import jupytext  # optional ([dev] extra)

    path = notebook_path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist: give a notebook's .ipynb or .py path (or its number, e.g. 02)."
        )
    return jupytext.read(path, fmt="py:percent" if path.suffix == ".py" else None)


def student_notebook(nb, *, keep_answers: bool = False):
    """A copy of ``nb`` with every solution replaced by a stub, every answer cell removed, and a note under the title.

    ``keep_answers`` keeps the model answers of the written questions (a handout for after the deadline).
    """

    import nbformat  # optional ([dev] extra)

    nb = copy.deepcopy(nb)
    find_questions(nb)  # refuses questions the report could not pair with an answer
    if not keep_answers:
        nb.cells = [cell for cell in nb.cells if ANSWER not in tags(cell)]
    exercises = find_exercises(nb)
    for ex in exercises:
        for index in ex.cells:
            cell = nb.cells[index]
            cell.source = strip_solutions(cell.source, ex, where=f"cell {index}")
    # under the title (the badge cell, when there is one, stays first)
    title = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and BADGE not in tags(c)), -1)
    nb.cells.insert(title + 1, nbformat.v4.new_markdown_cell(STUDENT_NOTE if exercises else QUESTIONS_ONLY_NOTE))
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def build_student(out: str | Path, only: list[str] | None = None, *, keep_answers: bool = False) -> list[Path]:
    """Write the student version of each notebook (``.ipynb`` for Colab and its ``.py`` pair) to ``out``.

    These are an instructor's private copies: the badge cell is left out (its badges open the course's own files,
    not wherever the copies will be shared from).
    """
    import jupytext  # optional ([dev] extra)

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for py in notebooks.notebook_sources(only):
        nb = student_notebook(notebooks.read_py(py), keep_answers=keep_answers)
        nb.cells = [cell for cell in nb.cells if BADGE not in tags(cell)]
        _finish(nb)
        target = out / py.with_suffix(".ipynb").name
        jupytext.write(nb, target, fmt="ipynb")
        jupytext.write(nb, out / py.name, fmt="py:percent")
        written.append(target)
    return written


def _finish(nb) -> None:
    """Colab's metadata and stable cell ids: rebuilding an unchanged notebook writes the same bytes."""
    nb.metadata.update(notebooks.COLAB_METADATA)
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:03d}"


def exercise_version_text(source: Path) -> str:
    """The exercise version of the solved ``source`` as the repository holds it (``notebooks/NN_name.ipynb``).

    The student version of :func:`student_notebook`, with the badge cell opening this file, not the solutions, and no
    jupytext pairing (it is generated, never edited: :func:`write_exercise_versions` rewrites it).
    """
    import jupytext  # optional ([dev] extra)

    nb = student_notebook(notebooks.read_py(source))
    badge = next(cell for cell in nb.cells if BADGE in tags(cell))
    badge.source = notebooks.badge_cell_source(source.with_suffix(".ipynb").name, solved=False)
    nb.metadata.pop("jupytext", None)
    _finish(nb)
    return jupytext.writes(nb, fmt="ipynb")


def write_exercise_versions(only: list[str] | None = None) -> list[Path]:
    """(Re)write ``notebooks/NN_name.ipynb``, the exercise version of each solved notebook; the changed ones."""
    written = []
    for source in notebooks.notebook_sources(only):
        target, text = notebooks.exercise_version(source), exercise_version_text(source)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written


def exercise_version_problems(source: Path, target: Path | None = None) -> list[str]:
    """What is wrong with the committed exercise version of ``source`` (or the file ``target``): missing, or not what
    the builder writes."""
    target = target or notebooks.exercise_version(source)
    if not target.exists():
        return [f"{target.name} (the exercise version) is missing: run `python -m helpers sync-notebooks`."]
    if target.read_text(encoding="utf-8") != exercise_version_text(source):
        return [
            f"{target.name} (the exercise version) differs from what the builder writes from {source.name}: it is "
            "generated, never edited. Edit the solved .py, then run `python -m helpers sync-notebooks`."
        ]
    return []


# ----------------------------------------------------------------------------------------------
# grading


@dataclass
class Result:
    number: str
    title: str
    points: int
    status: str  # "passed", "failed", "not attempted" or NOT_GRADED (a full-mode exercise in a quick run)
    message: str = ""
    # who decided a pass: "verifier" (its probes' values judged outside the kernel, helpers.course.probes) or
    # "kernel" (an exercise whose checks have no probe yet: its check cells' success in the kernel)
    decided: str = "kernel"

    @property
    def earned(self) -> int:
        return self.points if self.status == "passed" else 0


@dataclass
class Grade:
    notebook: str
    results: list[Result]
    stopped: str = ""  # why the run stopped early, when it did
    written_possible: int = 0  # the written questions' points, graded by hand (helpers.course.written)
    written: list | None = None  # their scores from a filled manual sheet (written.ManualScore), once read

    @property
    def total(self) -> int:
        """The auto-graded points earned (the exercises)."""
        return sum(r.earned for r in self.results)

    @property
    def possible(self) -> int:
        """The points this run could award: a full-mode exercise in a quick run is left out, not failed."""
        return sum(r.points for r in self.results if r.status != NOT_GRADED)

    @property
    def written_total(self) -> float | None:
        return None if self.written is None else sum(s.earned for s in self.written)

    def status_of(self, number: str) -> str:
        return next(r.status for r in self.results if r.number == number)

    def table(self) -> str:
        """Every exercise's line, then :meth:`summary`."""
        lines = [f"Grading {self.notebook}"]
        for r in self.results:
            mark = {"passed": "PASS", "failed": "FAIL", "not attempted": "----", NOT_GRADED: "n/a "}[r.status]
            line = f"  {mark}  Exercise {r.number:<5} {r.earned:>2}/{r.points:<2}  {r.title}"
            if r.message:
                line += "\n          " + f"{r.status}: {r.message}".replace("\n", "\n            ")
            lines.append(line)
        return "\n".join([*lines, self.summary()])

    def summary(self) -> str:
        """What follows the exercises' lines: why the run stopped, the written questions, the total. ``grade`` prints
        this alone after the run, since each exercise's line was printed as it ended."""
        lines = []
        if self.stopped:
            lines.append(f"  (stopped: {self.stopped})")
        for score in self.written or []:
            lines.append(
                f"  ----  Question {score.question:<5} {score.earned:>2g}/{score.possible:<2}  (graded by hand)"
            )
        if self.written is not None:
            overall = self.total + self.written_total
            lines.append(
                f"Total: {overall:g}/{self.possible + self.written_possible} points "
                f"({self.total}/{self.possible} auto-graded + {self.written_total:g}/{self.written_possible} written)"
            )
        else:
            lines.append(f"Total: {self.total}/{self.possible} points")
            if self.written_possible:
                lines.append(
                    f"Written questions: {self.written_possible} more points, graded by hand: fill in the manual "
                    "sheet's points column and run grade again with --manual SHEET.csv"
                )
        return "\n".join(lines)

    def to_dict(self) -> dict:
        out = {
            "notebook": self.notebook,
            "total": self.total,
            "possible": self.possible,
            "stopped": self.stopped,
            "exercises": [{**r.__dict__, "earned": r.earned} for r in self.results],
            "written_possible": self.written_possible,
        }
        if self.written is not None:
            out["written"] = [s.__dict__ for s in self.written]
            out["written_total"] = self.written_total
            out["overall_total"] = self.total + self.written_total
            out["overall_possible"] = self.possible + self.written_possible
        return out


def hidden_checks(hidden: str | Path | None, notebook_stem: str) -> dict[str, list[str]]:
    """Hidden checks for one notebook: ``DIR/<notebook stem>.py`` or ``DIR/<NN>_*.py``, cut at ``# %% Exercise N.M``.

    Each piece runs at the end of its exercise, in the notebook's namespace. Lines before the first
    header are refused: a check that belongs to no exercise could not be scored.
    """
    if hidden is None:
        return {}
    folder = Path(hidden)
    if not folder.is_dir():
        raise FileNotFoundError(f"--hidden {folder}: no such folder. Give the folder that holds the hidden checks.")
    number = notebook_stem[:2]
    files = sorted(p for p in folder.glob(f"{number}_*.py"))
    checks: dict[str, list[str]] = {}
    for path in files:
        current, lines = None, []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = _HIDDEN_HEADER.match(line)
            if match:
                if current:
                    checks.setdefault(current, []).append("\n".join(lines))
                current, lines = match["number"], []
            elif current is None:
                if line.strip() and not line.lstrip().startswith("#"):
                    raise ExerciseMarkupError(
                        f"{path}:{n}: code before the first '# %% Exercise N.M' line; put every hidden check under "
                        "the header of the exercise it grades."
                    )
            else:
                lines.append(line)
        if current:
            checks.setdefault(current, []).append("\n".join(lines))
    return checks


def _first_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


def notebook_number(path: str | Path) -> str | None:
    """Which course notebook the file at ``path`` is: the number its exercises carry ("2.3" -> "02"), else the one
    its name starts with; None when neither says."""
    try:
        found = find_exercises(read_notebook(path), solved=False)
    except Exception:  # noqa: BLE001  (unreadable, or its markup refused: the name may still say)
        found = []
    numbers = {ex.number.split(".")[0].zfill(2) for ex in found}
    if len(numbers) == 1:
        return numbers.pop()
    stem = Path(path).stem[:2]
    return stem if stem.isdigit() else None


def kernel_denied(reference: str | Path | None, hidden: str | Path | None) -> list[Path]:
    """What the graded kernel may not read (helpers.course.sandbox): the folder of the solved notebook it is graded
    against, the hidden checks, IPython's history and Jupyter's runtime folder, and, in the course's checkout, its
    history (.git holds every solution), its tests and the executed solved notebooks of ``run-notebooks``."""
    from jupyter_core.paths import jupyter_runtime_dir  # optional ([dev] extra)

    paths = [Path(p).resolve().parent for p in [reference] if p] + [Path(h).resolve() for h in [hidden] if h]
    # IPython's history (every cell a kernel ran: solved notebooks too) and Jupyter's runtime folder (the connection
    # files of other kernels, which would let code run outside the sandbox)
    paths += [Path.home() / ".ipython", Path(jupyter_runtime_dir())]
    root = runtime.repo_root()
    if root is not None:
        paths += [root / ".git", root / "tests", runtime.reports_dir() / "executed"]
    return [p for p in dict.fromkeys(paths) if p.exists()]


def reference_for(path: str | Path) -> Path | None:
    """The course's own solved source of the notebook at ``path`` (the same number: :func:`notebook_number`), or
    None. A student's copy renamed ``alice.ipynb`` still finds its reference by its exercises' numbers."""
    number = notebook_number(path)
    if number is None:
        return None
    try:
        found = notebooks.notebook_sources([number])
    except ValueError:
        return None
    return found[0] if found else None


@dataclass
class _Step:
    source: str
    label: str
    exercise: Exercise | None = None
    kind: str = "cell"  # "cell", "guard", "end" (the exercise is done) or "restore" (reference, after a failure)
    student: bool = False  # the student's own code: run under the guard's file name (see helpers.course.guard)
    check: bool = False  # the course's own cell of an exercise: its code objects noted (guard.compile_check)
    job: dict | None = None  # a probe's: the grader takes its values (probes.take) the moment the cell ends


_GUARD = "import helpers.course.guard as _tbb_guard\n_tbb_guard."


def _guarded(steps: list[_Step], ex: Exercise) -> list[_Step]:
    """An exercise's cells with the guard around them: begin, a check after each cell, end (see course.guard)."""
    out = [_Step(f"{_GUARD}begin({ex.number!r})", f"guard of {ex.label}", ex, "guard")]
    for step in steps:
        out += [step, _Step(f"{_GUARD}verify()", f"guard of {ex.label}", ex, "guard")]
    return out


@dataclass
class _Probes:
    """The probes a grading run sends (``helpers.course.probes``): where their values go, and the run's seed."""

    folder: Path
    seed: int
    jobs: dict[str, list[dict]] = field(default_factory=dict)  # exercise number -> its probes' jobs

    def steps(self, ex: Exercise, check_sources: list[str]) -> list[_Step]:
        out = []
        for source in check_sources:
            for call in probes.probe_calls(source):
                n = sum(len(j) for j in self.jobs.values())
                path = self.folder / f"{ex.number}-{n}.json"
                seed = (self.seed + 7919 * n) % 2**31  # each probe its own inputs
                self.jobs.setdefault(ex.number, []).append({"verify": call.verify, "path": str(path), "seed": seed})
                job = self.jobs[ex.number][-1]
                out.append(_Step(probes.probe_statement(call, path, seed), f"probe of {ex.label}", ex, job=job))
        return out


def _exercise_steps(ex, graded_nb, graded_ex, ref_nb, ref_ex, stem, extra, probing=None) -> list[_Step]:
    """The cells that run for one exercise: the student's solution cells, the reference's others, its probes (with
    ``probing``, a :class:`_Probes`); then a restore."""
    ref_cells = [i for i in ref_ex.cells if ANSWER not in tags(ref_nb.cells[i])]
    mine = [i for i in graded_ex.cells if ANSWER not in tags(graded_nb.cells[i])]
    steps: list[_Step] = []
    if len(mine) == len(ref_cells):  # the student kept the exercise's cells: swap in their solution cells only
        for g, r in zip(mine, ref_cells):
            if solution_lines(ref_nb.cells[r].source):
                steps.append(_Step(graded_nb.cells[g].source, f"{stem} cell {g}", ex, student=True))
            else:
                steps.append(_Step(ref_nb.cells[r].source, f"{stem} cell {g}", ex, check=True))
    else:  # cells added or removed: the student's own cells, then every check of the reference
        steps += [
            _Step(graded_nb.cells[g].source, f"{stem} cell {g}", ex, student=True)
            for g in mine
            if CHECK not in tags(graded_nb.cells[g])
        ]
        steps += [
            _Step(ref_nb.cells[r].source, f"check of {ex.label} (cell {r})", ex, check=True)
            for r in ref_cells
            if CHECK in tags(ref_nb.cells[r])
        ]
    steps += [
        _Step(src, f"hidden check of {ex.label} ({k})", ex, check=True)
        for k, src in enumerate(extra.get(ex.number, []))
    ]
    if probing is not None:
        steps += probing.steps(ex, [ref_nb.cells[r].source for r in ref_cells if CHECK in tags(ref_nb.cells[r])])
    steps = _guarded(steps, ex)
    steps.append(_Step(f"{_GUARD}end()", f"guard of {ex.label}", ex, "guard"))
    steps.append(_Step("", "end", ex, "end"))
    if ref_nb is not graded_nb:
        # after a failure the whole reference exercise runs again: its solution, and what its later cells define
        steps += [_Step(ref_nb.cells[r].source, f"reference solution of {ex.label}", ex, "restore") for r in ref_cells]
    return steps


def grade(
    notebook: str | Path,
    hidden: str | Path | None = None,
    *,
    executor=None,
    start_at: str | None = None,
    stop_after: str | None = None,
    echo=None,
    reference: str | Path | None | bool = None,
    quick: bool = True,
    seed: int | None = None,
    cell_timeout: float | None = None,
    sandbox: bool = True,
) -> Grade:
    """Run ``notebook`` (quick mode; ``quick=False``: the full run) and score its exercises; see the module's docstring.

    An exercise marked ``(N points, full mode)`` is left out of a quick run (:data:`NOT_GRADED`, its points out of
    the total): its check needs the full run's numbers. An executor passed in brings its own mode (``.quick``).

    ``reference`` is the solved notebook whose cells run around the student's solutions: by default the
    course's own source with the same number (:func:`reference_for`), ``False`` for none. Without one the
    notebook runs as it is and stops at the first error, as *Run all* does; a notebook whose exercises differ
    from its reference's (or name several notebooks) is refused (:class:`ExerciseMarkupError`). ``executor`` is a :class:`Kernel` (the default) or :class:`InProcess`. ``start_at``
    skips the cells before that exercise (the executor's namespace must then hold what they define; the
    exercises skipped count as not attempted) and ``stop_after`` ends the run after one: the tests use both
    to grade one exercise alone. ``echo`` (e.g. ``print``) is called with a line as each exercise ends.
    ``cell_timeout`` is the default kernel's limit per cell in seconds (quick mode 5 minutes, full 30): a cell past
    it, or one that kills the kernel, fails its exercise, and a fresh kernel rebuilds the reference's state.
    ``sandbox``: the default kernel confines itself where Linux has Landlock (:mod:`helpers.course.sandbox`);
    False runs it unconfined.

    With a reference, a pass is decided outside the kernel where the reference's checks have probes
    (:mod:`helpers.course.probes`): each probe runs in the kernel with this run's ``seed`` (fresh unless given) and
    saves plain values; once the kernel is shut down, this process, which ran none of the student's code, judges them
    with the reference's ``verify_X``. The kernel's own report can then only fail an exercise.
    """
    path = notebook_path(notebook)
    nb = read_notebook(path)
    exercises = find_exercises(nb, solved=False)
    if not exercises and not find_questions(nb):  # an appendix may hold written questions only (notebook 07)
        raise ExerciseMarkupError(f"{path.name} has no exercises and no written questions: nothing to grade.")
    named = sorted({ex.number.split(".")[0].zfill(2) for ex in exercises})
    if len(named) > 1:  # which course notebook it is would be ambiguous, and none would judge it
        raise ExerciseMarkupError(
            f"{path.name} has exercises of several notebooks ({', '.join(named)}): an exercise heading was changed or "
            "added. Put the headings back as they were handed out, then grade again."
        )
    extra = hidden_checks(hidden, path.stem)
    unknown = sorted(set(extra) - {ex.number for ex in exercises})
    if unknown:
        raise ExerciseMarkupError(
            f"hidden checks name {', '.join('Exercise ' + u for u in unknown)}, which {path.name} does not have."
        )
    numbers = [ex.number for ex in exercises]
    for name, value in (("start_at", start_at), ("stop_after", stop_after)):
        if value is not None and value not in numbers:
            raise ValueError(f"{name}={value!r}: {path.name} has exercises {', '.join(numbers)}.")
    ref_nb, ref_exercises = nb, exercises
    ref_path = reference_for(path) if reference is None else (reference or None)
    if ref_path is not None and Path(ref_path).resolve() != path.resolve():
        candidate = read_notebook(ref_path)
        found = find_exercises(candidate)
        if [e.number for e in found] != numbers:  # graded as it is, the copy's own checks would decide: refused
            raise ExerciseMarkupError(
                f"{path.name} has exercises {', '.join(numbers) or 'none'}, not those of the course's "
                f"{Path(ref_path).name} ({', '.join(e.number for e in found)}): an exercise heading was changed, "
                "added or removed. Put the headings back as they were handed out (the course's student copy has "
                "them), then grade again."
            )
        ref_nb, ref_exercises = candidate, found
    if ref_nb is nb and exercises and echo is not None:
        echo(f"(no course notebook has these exercises: {path.name} is graded as it is, its own checks deciding)")
    by_number = {ex.number: ex for ex in exercises}
    ref_by_number = {ex.number: ex for ex in ref_exercises}
    first_cell = ref_by_number[start_at].heading_cell if start_at else 0
    owner = {i: ex for ex in ref_exercises for i in ex.cells}
    status = {ex.number: ("not attempted", "") for ex in exercises}
    quick = getattr(executor, "quick", True) if executor is not None else quick
    # the grader decides, from the reference's markup and its own mode: no cell of the student's can ask for this
    skipped = {ex.number for ex in ref_exercises if ex.full_mode and quick}
    for number in skipped:
        status[number] = (NOT_GRADED, "its check needs the full run: grade --full grades it")
    for ex in ref_exercises:
        if ex.heading_cell < first_cell:
            status[ex.number] = ("not attempted", f"skipped: the run started at Exercise {start_at}")
    # the course's own checks (read now, before any student code runs) decide through probes; a copy's own cannot
    trusted = ref_nb is not nb or (ref_path is not None and Path(ref_path).resolve() == path.resolve())
    folder = Path(tempfile.mkdtemp(prefix="grade-probes-"))
    probing = _Probes(folder, secrets.randbelow(2**31) if seed is None else seed) if trusted else None
    code_cells = [c for c in ref_nb.cells if c.cell_type == "code"]
    reference_sources = [c.source for c in code_cells]  # what the verifier reads
    whole = {i for i, c in enumerate(code_cells) if probes.VERIFIER_TAG in tags(c)}
    plan: list[_Step] = []
    # what rebuilds the reference's state in a fresh kernel, exercise by exercise (after a kernel died)
    rebuild = {
        ex.number: [ref_nb.cells[i].source for i in ex.cells if ANSWER not in tags(ref_nb.cells[i])]
        for ex in ref_exercises
    }
    for index, cell in enumerate(ref_nb.cells):
        if cell.cell_type != "code" or index < first_cell:
            continue
        ex = owner.get(index)
        if ex is None:
            plan.append(_Step(cell.source, f"{path.stem} cell {index}"))
        elif ex.number in skipped:
            continue
        elif index == ex.cells[0]:
            plan += _exercise_steps(ex, nb, by_number[ex.number], ref_nb, ex, path.stem, extra, probing)
    if executor is None:  # a kernel of its own, in a working folder of its own, each cell under a time limit
        limit = cell_timeout or (notebooks.QUICK_CELL_TIMEOUT if quick else notebooks.FULL_CELL_TIMEOUT)
        denied = kernel_denied(ref_path, hidden) if sandbox else None
        # a reports folder of its own: the notebook's export neither reads the instructor's runs nor writes into them
        executor = Kernel(folder / "work", round(limit), quick=quick, denied=denied, reports=folder / "reports",
                          writable=[folder])  # fmt: skip
        executor.cwd.mkdir()
        if echo is not None and denied is not None and not executor.sandboxed:
            echo("note: no Landlock on this system, so the kernel is not confined: the student's code could read "
                 f"{', '.join(str(d) for d in denied)} and change the course's files (grade on Linux 5.19 or later)")  # fmt: skip
    stopped, failing = "", None
    student_sources: dict[str, str] = {}  # label -> the student's own cell, to quote the line an error went through
    state: list[str] = []  # the sources that made the kernel's state, as the reference would have it

    with executor.session(), contextlib.ExitStack() as stack:
        stack.callback(guard.end)  # in-process: nothing stays out of reach after an interrupted run
        for step in plan:
            ex = step.exercise
            if step.kind == "end":
                state += rebuild.get(ex.number, [])
                if failing is None:
                    status[ex.number] = ("passed", "")
                    if echo is not None and not (probing and probing.jobs.get(ex.number)):
                        echo(f"{ex.label}: passed ({ex.points} points)")
                elif ref_nb is nb:  # nothing to put in its place: stop, as Run all does
                    break
                if stop_after == ex.number:
                    break
                continue
            if step.kind == "guard" and (failing is ex or step.source.endswith("end()")):
                executor.run(step.source, step.label)  # after a failure: only end(), which puts everything back
                continue
            if step.kind == "restore":
                if failing is None:
                    continue
                error = executor.run(step.source, step.label)
                if error is not None:
                    stopped = f"the reference solution of {ex.label} failed after the student's: {error[0]}"
                    break
                continue
            if ex is not None and failing is ex:
                continue  # the rest of a failed exercise is skipped
            if ex is not None and failing is not None and failing is not ex:
                failing = None  # a new exercise starts afresh
            if step.job is not None:
                probes.take(step.job["path"])  # nothing the kernel wrote there before the probe counts
            error = (
                executor.run(step.source, step.label, student=step.student, check=step.check)
                if step.source.strip()
                else None
            )
            if step.job is not None:  # its values leave the kernel's reach now, while the exercise's guard is up
                step.job["taken"] = probes.take(step.job["path"])
            if step.student:
                student_sources[step.label] = step.source
            if error is None:
                if ex is None:
                    state.append(step.source)
                continue
            if getattr(executor, "died", False):  # a fresh kernel, in the reference's state of before this step
                if echo is not None:
                    echo(f"the kernel {'died' if error[0] == 'DeadKernelError' else 'was stopped'} during "
                         f"{step.label}: restarting it with the reference's state")  # fmt: skip
                executor.restart()
                broken = next((e for s in state if (e := executor.run(s, "reference state")) is not None), None)
                if broken is not None:
                    stopped = f"the reference's state could not be rebuilt after the kernel died: {broken[0]}"
                    break
            ename, evalue = error
            message = f"{ename}: {_first_line(evalue)}" if _first_line(evalue) else ename
            where = where_in_student_code(error, student_sources)
            if where and not (ename == "NotImplementedError" and ex is not None and evalue.startswith(ex.label)):
                message += "\n" + where
            if ex is None:
                stopped = f"{step.label}, outside any exercise, raised {message}"
                if echo is not None:
                    echo(f"stopped: {stopped}")
                break
            if ename == "NotImplementedError" and evalue.startswith(f"{ex.label}:"):
                status[ex.number] = ("not attempted", "the stub is still in place")
                note = f"{ex.label} is not written yet"
            else:
                status[ex.number] = ("failed", message)
                note = f"{ex.label} failed"
            failing = ex
            if ref_nb is nb:
                stopped = note
            if echo is not None:
                first, *rest = message.split("\n")
                after = "" if ref_nb is nb else " (the reference solution takes its place)"
                echo("\n    ".join([f"{note}: {first}{after}", *rest]))
    decided = {}
    if probing is not None:  # the kernel is shut down: this process judges what the probes saved
        try:
            decided = dict.fromkeys(probing.jobs, "verifier")
            # the kernel's report can fail an exercise, never pass it: only the passed ones are judged again
            judged = [
                {"taken": None, **job, "exercise": n}  # a probe that never ran took nothing: the folder is not read
                for n, jobs in probing.jobs.items()
                if status[n][0] == "passed"
                for job in jobs
            ]
            verdicts = probes.verify_saved(reference_sources, judged, whole=whole, quick=quick) if judged else []
            for number in dict.fromkeys(job["exercise"] for job in judged):
                failed = [v for v in verdicts if v["exercise"] == number and not v["ok"]]
                label = ref_by_number[number].label
                if failed:
                    status[number] = ("failed", f"{failed[0]['message']} (judged outside the kernel, on fresh inputs)")
                if echo is not None:
                    points = ref_by_number[number].points
                    echo(f"{label}: failed: {status[number][1]}" if failed else f"{label}: passed ({points} points)")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)
    results = [  # the title and the points are the reference's: a copy's heading cannot change what it is worth
        Result(ex.number, ex.title, ex.points, *status[ex.number], decided=decided.get(ex.number, "kernel"))
        for ex in ref_exercises
    ]
    written_possible = sum(q.points for q in find_questions(ref_nb))
    return Grade(path.name, results, stopped, written_possible)


def run_solved(notebook: str | Path, executor=None) -> dict:
    """Grade a solved notebook in-process and return its namespace; fails unless every point is earned.

    The notebook tests start from this: one run both proves "the solutions get full marks" and gives the
    namespace whose functions and checks the tests then poke at. ``executor`` (an :class:`InProcess` by
    default) may be one that also records what it ran.
    """
    executor = executor if executor is not None else InProcess()
    result = grade(notebook, executor=executor)
    if result.total != result.possible or result.stopped:
        raise AssertionError(f"the solved notebook does not get full marks:\n{result.table()}")
    return executor.namespace
