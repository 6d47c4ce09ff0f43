"""Exercises: the markup, the student copy, the grader, and a catalogue of wrong answers each exercise must catch.

The catalogue is the point: for every coding exercise, at least three plausible wrong implementations are
written into the notebook's source in place of the solution, and grading must fail that exercise, and no
other. (The solved notebooks' full marks are asserted where the notebook tests run them: exercises.run_solved.)
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
import torch

from helpers import cli, runtime
from helpers.course import exercises, notebooks, probes, report
from helpers.course.exercises import BEGIN, END, ExerciseMarkupError
from tests.solved import per_notebook, reads_solved, solved

ROOT = Path(__file__).resolve().parents[2]
SOURCES = notebooks.notebook_sources()
IDS = [p.stem[:2] for p in SOURCES]
APPENDICES = {"07"}  # notebook 03's appendix asks written questions only
WITH_EXERCISES = [p for p in SOURCES if p.stem[:2] not in APPENDICES]


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    for kind, source, *tags in cells:
        cell = nbformat.v4.new_markdown_cell(source) if kind == "md" else nbformat.v4.new_code_cell(source)
        if tags:
            cell.metadata["tags"] = tags[0]
        nb.cells.append(cell)
    return nb


SOLVED = f"def f(x):\n    '''Twice x.'''\n    {BEGIN}\n    y = 2 * x\n    return y\n    {END}\n"


# ---------------------------------------------------------------------------------------------
# markup


def test_exercise_headings_number_title_points_and_own_cells_until_the_next_heading():
    nb = _nb(
        ("md", "# Title"),
        ("code", "x = 1"),
        ("md", "## Exercise 9.1 · Doubling (4 points)"),
        ("code", SOLVED),
        ("code", "assert f(2) == 4", ["check"]),
        ("md", "## 3. Something · Exercise 9.2 (1 point)"),
        ("code", "z = 3  # SOLUTION"),
        ("code", "assert z == 3", ["check"]),
        ("md", "## Not an exercise"),
        ("code", "print(z)"),
    )
    found = exercises.find_exercises(nb)
    assert [(e.number, e.title, e.points, e.cells) for e in found] == [
        ("9.1", "Doubling", 4, [3, 4]),
        ("9.2", "3. Something", 1, [6, 7]),
    ]


@pytest.mark.parametrize(
    "cells, message",
    [
        ((("code", SOLVED),), "no exercise heading"),
        (
            (("md", "## Exercise 1.1 · A (1 point)"), ("code", "x = 1"), ("code", "assert x", ["check"])),
            "nothing to write",
        ),
        ((("md", "## Exercise 1.1 · A (1 point)"), ("code", SOLVED)), "no cell tagged 'check'"),
        (
            (
                ("md", "## Exercise 1.1 · A (1 point)"),
                ("code", SOLVED, ["check"]),
                ("md", "## Exercise 1.1 · B (1 point)"),
                ("code", SOLVED, ["check"]),
            ),
            "appears twice",
        ),
        ((("md", "## Exercise 1.1 · A (1 point)"), ("code", f"{BEGIN}\nx = 1", ["check"])), "never closed"),
        ((("md", "## Exercise 1.1 · A (1 point)"), ("code", f"x = 1\n{END}", ["check"])), "without a"),
    ],
)
def test_inconsistent_markup_is_refused_with_what_to_fix(cells, message):
    with pytest.raises(ExerciseMarkupError, match=message):
        exercises.find_exercises(_nb(*cells))


def test_strip_solutions_keeps_signature_docstring_and_indentation_and_names_the_exercise():
    ex = exercises.Exercise("9.1", "Doubling", 4, 0)
    out = exercises.strip_solutions(SOLVED + "z = g(1)  # SOLUTION\n# a comment ending in # SOLUTION\n", ex)
    assert out.splitlines() == [
        "def f(x):",
        "    '''Twice x.'''",
        "    raise NotImplementedError('Exercise 9.1: Doubling. Replace this line with your code.')",
        "raise NotImplementedError('Exercise 9.1: Doubling. Replace this line with your code.')",
        "# a comment ending in # SOLUTION",
    ]
    ast.parse(out)


def test_every_notebook_has_exercises_with_points_and_every_solution_under_one():
    numbers = []
    for py in SOURCES:
        nb = notebooks.read_py(py)
        found, questions = exercises.find_exercises(nb), exercises.find_questions(nb)
        assert bool(found) is (py.stem[:2] not in APPENDICES), f"{py.name}: exercises {[e.number for e in found]}"
        assert found or questions, f"{py.name} has neither exercises nor written questions"
        assert all(e.number.split(".")[0] == str(int(py.stem[:2])) for e in found + questions), f"{py.name}: N.M"
        numbers += [e.number for e in found]
    assert len(numbers) == len(set(numbers))


def test_a_notebook_of_written_questions_only_grades_its_cells_and_one_with_nothing_is_refused(tmp_path):
    question = (
        ("md", "**Question 9.1 (3 points).** Why?", ["question"]),
        ("md", f"**Your answer.** {exercises.YOUR_ANSWER_PLACEHOLDER}", ["your-answer"]),
    )
    py = tmp_path / "09_demo.ipynb"
    nbformat.write(_nb(("code", "x = 2"), *question, ("code", "assert x == 2")), py)
    result = exercises.grade(py, executor=exercises.InProcess(), reference=False)
    assert (result.total, result.possible, result.written_possible, result.stopped) == (0, 0, 3, "")
    nbformat.write(_nb(("code", "x = 2"), *question, ("code", "assert x == 3")), py)
    assert "raised AssertionError" in exercises.grade(py, executor=exercises.InProcess(), reference=False).stopped
    copy = exercises.student_notebook(nbformat.read(py, as_version=4))  # its note speaks of questions only
    notes = [c.source for c in copy.cells if c.source.startswith("> **Student version.**")]
    assert notes == [exercises.QUESTIONS_ONLY_NOTE] and "NotImplementedError" not in notes[0]
    nbformat.write(_nb(("code", "x = 2")), py)
    with pytest.raises(ExerciseMarkupError, match="no exercises and no written questions"):
        exercises.grade(py, executor=exercises.InProcess(), reference=False)


def test_the_readme_states_every_notebooks_exercises_and_points():
    table = report.points_table()
    readme = (ROOT / "README.md").read_text()
    assert table in readme, f"README.md's exercise table is out of date; put this table there:\n{table}"


def test_the_points_table_changes_when_an_exercise_does(tmp_path):
    py = tmp_path / "09_demo.py"
    py.write_text(
        "# %% [markdown]\n# ## Exercise 9.1 · One (2 points)\n\n# %%\nx = 1  # SOLUTION\n\n# %% tags=['check']\nassert x\n"
    )
    before = report.points_table([py])
    py.write_text(py.read_text().replace("(2 points)", "(3 points)"))
    assert before != report.points_table([py]) and "| 09 | 3 | 0 | 9.1 One (3) | none |" in report.points_table([py])
    py.write_text(
        py.read_text() + "\n# %% [markdown] tags=['question']\n# **Question 9.1 (4 points).** Why?\n\n"
        "# %% [markdown] tags=['your-answer']\n# **Your answer.**\n"
    )
    assert "| 09 | 3 | 4 | 9.1 One (3) | 9.1 (4) |" in report.points_table([py])


# ---------------------------------------------------------------------------------------------
# the student copy


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    assert cli.main(["student", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_student_copy_has_no_solution_line_and_every_cell_parses(student, py):
    solved = notebooks.read_py(py)
    solution = {
        line.strip()
        for c in solved.cells
        if c.cell_type == "code"
        for line in exercises.solution_lines(c.source)
        if len(line.strip()) > 12
    }
    dummy = exercises.Exercise("0.0", "", 0, 0)
    elsewhere = {  # lines that also occur outside the solutions (a loop header, say) may stay
        line.strip() for c in solved.cells for line in exercises.strip_solutions(c.source, dummy).splitlines()
    }
    copy = nbformat.read(student / py.with_suffix(".ipynb").name, as_version=4)
    text = "\n".join(c.source for c in copy.cells)
    for marker in (BEGIN, END):
        assert marker not in text
    leaked = [line for line in text.splitlines() if line.strip() in solution and line.strip() not in elsewhere]
    assert not leaked, f"solution lines in the student copy of {py.name}: {leaked[:3]}"
    for cell in copy.cells:
        if cell.cell_type == "code":
            ast.parse(cell.source)  # every cell still parses
            assert not cell.outputs
    found = exercises.find_exercises(copy, solved=False)
    stubs = len(re.findall(r"raise NotImplementedError\(['\"]Exercise ", text))  # repr quotes "...'s..." with "
    assert stubs >= len(found), "each exercise keeps at least one stub"
    for cell in solved.cells:
        if "check" in cell.metadata.get("tags", []):
            assert cell.source in text, "every check stays in the student copy, word for word"
    assert (student / py.name).exists(), "the .py pair is written too"


@pytest.mark.grading
def test_running_a_student_copy_stops_at_its_first_stub_with_that_exercises_message(student, tmp_path):
    with pytest.raises(notebooks.NotebookFailed) as err:
        notebooks.run_notebook(student / "02_transformer_from_scratch.ipynb", tmp_path)
    assert "NotImplementedError" in str(err.value)
    assert "Exercise 2.1: Positions: a fixed table, and a rotation" in str(err.value)


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_student_copy_holds_no_line_unique_to_a_model_answer(student, py):
    solved = notebooks.read_py(py)
    questions = exercises.find_questions(solved)
    answers = {line.strip() for line in exercises.answer_lines(solved) if len(line.strip()) > 12}
    elsewhere = {
        line.strip()
        for cell in solved.cells
        if exercises.ANSWER not in exercises.tags(cell)
        for line in cell.source.splitlines()
    }
    copy = nbformat.read(student / py.with_suffix(".ipynb").name, as_version=4)
    text = "\n".join(c.source for c in copy.cells)
    leaked = [line for line in text.splitlines() if line.strip() in answers - elsewhere]
    assert not leaked, f"model-answer lines in the student copy of {py.name}: {leaked[:3]}"
    assert not [c for c in copy.cells if exercises.ANSWER in exercises.tags(c)]
    kept = exercises.find_questions(copy)
    assert [q.number for q in kept] == [q.number for q in questions], "every question and its answer cell stay"


def test_the_answer_leak_check_can_fail_and_keep_answers_keeps_them():
    nb = _nb(
        ("md", "**Question 9.1.** Why?", ["question"]),
        ("md", f"**Your answer.** {exercises.YOUR_ANSWER_PLACEHOLDER}", ["your-answer"]),
        ("code", "x = 1"),
        ("md", "**Model answer.** Because the softmax normalises over the keys.", ["answer"]),
        ("md", "## Exercise 9.1 · Doubling (4 points)"),
        ("code", SOLVED),
        ("code", "assert f(2) == 4", ["check"]),
    )
    secret = "**Model answer.** Because the softmax normalises over the keys."
    assert secret not in "\n".join(c.source for c in exercises.student_notebook(nb).cells)
    kept = exercises.student_notebook(nb, keep_answers=True)
    assert secret in "\n".join(c.source for c in kept.cells)  # what the leak test looks for is really there
    (question,) = exercises.find_questions(nb)
    assert (question.number, question.cell, question.your_answer, question.answers) == ("9.1", 0, 1, [3])


@pytest.mark.parametrize(
    "cells, message",
    [
        ((("md", "**Question 1.1.** Why?", ["question"]), ("code", "x = 1")), "no 'your-answer' cell"),
        ((("md", "Why?", ["question"]), ("md", "**Your answer.**", ["your-answer"])), "does not start with"),
        ((("md", "**Your answer.**", ["your-answer"]),), "follows no question"),
        (
            (
                ("md", "**Question 1.1.** A", ["question"]),
                ("md", "**Your answer.**", ["your-answer"]),
                ("md", "**Question 1.1.** B", ["question"]),
                ("md", "**Your answer.**", ["your-answer"]),
            ),
            "appears twice",
        ),
    ],
)
def test_questions_without_their_answer_cell_or_numbered_twice_are_refused(cells, message):
    with pytest.raises(ExerciseMarkupError, match=message):
        exercises.find_questions(_nb(*cells))


def test_a_solution_inside_an_answer_cell_is_refused():
    nb = _nb(("md", "## Exercise 9.1 · Doubling (4 points)"), ("code", SOLVED, ["answer", "check"]))
    with pytest.raises(ExerciseMarkupError, match="tagged 'answer'"):
        exercises.find_exercises(nb)


@pytest.mark.grading
@pytest.mark.parametrize("py", WITH_EXERCISES, ids=[p.stem[:2] for p in WITH_EXERCISES])
def test_a_student_copy_run_as_it_is_stops_at_its_first_stub(student, py):
    """Without the reference (reference=False) a copy runs as Run all does: it stops at the first stub."""
    result = exercises.grade(student / py.with_suffix(".ipynb").name, executor=exercises.InProcess(), reference=False)
    assert result.possible > 0 and result.total == 0
    first = result.results[0]
    assert (first.status, first.message) == ("not attempted", "the stub is still in place")
    assert all(r.status in ("not attempted", exercises.NOT_GRADED) for r in result.results)
    assert result.stopped == f"Exercise {first.number} is not written yet"


@pytest.mark.grading
def test_grading_a_student_copy_in_a_kernel_runs_every_exercise_on_the_reference_and_gives_zero(student):
    result = exercises.grade(student / "02_transformer_from_scratch.ipynb")  # in a kernel, as instructors run it
    assert result.total == 0 and result.possible == 27 and not result.stopped, result.table()
    assert all((r.status, r.message) == ("not attempted", "the stub is still in place") for r in result.results)


@pytest.mark.grading
@pytest.mark.parametrize(
    "number, exercise, old, new",
    [
        ("02", "2.1", "torch.arange(max_len, dtype", "torch.arange(1, max_len + 1, dtype"),
        # a new exercise of the pipeline: the driver (6.5) and the word vectors (6.6) after it still earn theirs
        ("06", "6.4", 'rng = random.Random(f"{seed}-{epoch}")', 'rng = random.Random(f"{seed}-0")'),
    ],
    ids=["02-2.1", "06-6.4"],
)
def test_one_mistake_costs_only_its_own_points(number, exercise, old, new, tmp_path, monkeypatch):
    """One exercise wrong, the rest right, graded as a whole notebook: only its points are lost (the reference
    solution runs in its place for what follows)."""
    path = notebooks.notebook_sources([number])[0]
    source = path.read_text()
    assert source.count(old) == 1
    wrong = tmp_path / path.name
    wrong.write_text(source.replace(old, new))
    monkeypatch.setenv("REPORTS_DIR", str(tmp_path / "reports"))
    result = exercises.grade(wrong, executor=exercises.InProcess())
    missed = [r.number for r in result.results if r.status not in ("passed", exercises.NOT_GRADED)]
    assert missed == [exercise], result.table()
    points = {r.number: r.points for r in result.results}
    assert result.total == result.possible - points[exercise] and not result.stopped
    # the control: without the reference the same copy stops at that exercise: the points above come from the restore
    alone = exercises.grade(wrong, executor=exercises.InProcess(), reference=False)
    assert alone.stopped == f"Exercise {exercise} failed" and alone.status_of(exercise) == "failed"


@pytest.mark.grading
def test_the_reference_checks_decide_not_the_students_copy_of_them(tmp_path):
    """A copy whose check cells were emptied still fails: the grader runs the reference's checks."""
    path = notebooks.notebook_sources(["02"])[0]
    nb = notebooks.read_py(path)
    target = next(e for e in exercises.find_exercises(nb) if e.number == "2.2")
    source = path.read_text().replace("scores.softmax(dim=-1)", "scores.softmax(dim=-2)", 1)
    for i in target.cells:
        if "check" in nb.cells[i].metadata.get("tags", []):
            source = source.replace(nb.cells[i].source, "pass  # checks deleted")
    wrong = tmp_path / path.name
    wrong.write_text(source)
    result = exercises.grade(wrong, executor=exercises.InProcess(), stop_after="2.2")
    assert result.status_of("2.2") == "failed", result.table()
    alone = exercises.grade(wrong, executor=exercises.InProcess(), reference=False, stop_after="2.2")
    assert alone.status_of("2.2") == "passed"  # the control: its own (deleted) checks would have let it through


@pytest.mark.grading
def test_grade_command_with_hidden_checks_reports_each_exercise_and_writes_json(student, tmp_path, capsys):
    """Hidden checks run at the end of their exercise: one that fails on the solution fails that exercise only."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "02_extra.py").write_text(
        "# hidden checks for notebook 02\n"
        "# %% Exercise 2.1\n"
        "assert sinusoidal_positions(3, 4).shape == (3, 4)\n"
        "# %% Exercise 2.2\n"
        "assert False, 'a hidden check the solution fails'\n"
    )
    out = tmp_path / "grade.json"
    args = ["grade", str(ROOT / "notebooks" / "solutions" / "02_transformer_from_scratch.py"), "--hidden", str(hidden)]
    assert cli.main([*args, "--json", str(out), "--in-process"]) == 0
    result = json.loads(out.read_text())
    status = {e["number"]: (e["status"], e["message"]) for e in result["exercises"]}
    assert status["2.1"] == ("passed", "")
    assert status["2.2"] == ("failed", "AssertionError: a hidden check the solution fails")
    assert all(s == "not attempted" for n, (s, _) in status.items() if n not in ("2.1", "2.2"))
    assert result["total"] == 4 and result["possible"] == 27
    printed = capsys.readouterr().out
    assert "Exercise 2.1: passed (4 points)" in printed and "Total: 4/27 points" in printed
    assert not list(student.rglob("02_extra.py")), "the student build never contains hidden checks"


def test_hidden_checks_outside_an_exercise_or_naming_an_unknown_one_are_refused(tmp_path):
    (tmp_path / "02_a.py").write_text("assert True\n# %% Exercise 2.1\nassert True\n")
    with pytest.raises(ExerciseMarkupError, match="before the first"):
        exercises.hidden_checks(tmp_path, "02_transformer_from_scratch")
    (tmp_path / "02_a.py").write_text("# %% Exercise 2.99\nassert True\n")
    with pytest.raises(ExerciseMarkupError, match="2.99"):
        exercises.grade(
            ROOT / "notebooks" / "solutions" / "02_transformer_from_scratch.py",
            tmp_path,
            executor=exercises.InProcess(),
        )
    with pytest.raises(FileNotFoundError, match="no such folder"):
        exercises.hidden_checks(tmp_path / "missing", "02_x")


@pytest.mark.grading
def test_an_error_outside_any_exercise_stops_the_run_and_is_reported(tmp_path):
    path = tmp_path / "09_demo.py"
    path.write_text(
        "# %% [markdown]\n# ## Exercise 9.1 · One (2 points)\n\n"
        "# %%\nx = 1  # SOLUTION\n\n# %% tags=['check']\nassert x == 1\n\n"
        "# %% [markdown]\n# ## Between\n\n# %%\nraise ValueError('broken set-up')\n\n"
        "# %% [markdown]\n# ## Exercise 9.2 · Two (3 points)\n\n"
        "# %%\ny = 2  # SOLUTION\n\n# %% tags=['check']\nassert y == 2\n"
    )
    result = exercises.grade(path, executor=exercises.InProcess())
    assert [r.status for r in result.results] == ["passed", "not attempted"]
    assert "outside any exercise" in result.stopped and "broken set-up" in result.stopped
    assert result.total == 2 and "Total: 2/5 points" in result.table()


# ---------------------------------------------------------------------------------------------
# the catalogue of wrong answers: each entry replaces text inside one exercise's solution


def _load_catalogue() -> list[tuple]:
    """Every tests/notebooks/catalogue_NN.py's CATALOGUE, notebook by notebook (one file each, so notebooks change apart)."""
    entries = []
    for path in sorted((Path(__file__).parents[1] / "notebooks").glob("catalogue_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        entries += module.CATALOGUE
    return entries


CATALOGUE = _load_catalogue()


def test_the_catalogue_has_three_wrong_answers_for_every_exercise():
    per_exercise = {}
    for nb, number, *_ in CATALOGUE:
        per_exercise.setdefault((nb, number), 0)
        per_exercise[(nb, number)] += 1
    # a full-mode exercise is not graded in the quick runs these grade: its check is tested on planted numbers
    # (tests/notebooks/test_notebook06.py), and its catalogue would need the full run
    every = {
        (py.stem[:2], e.number)
        for py in SOURCES
        for e in exercises.find_exercises(notebooks.read_py(py))
        if not e.full_mode
    }
    assert set(per_exercise) == every, f"exercises without wrong answers: {sorted(every - set(per_exercise))}"
    assert min(per_exercise.values()) >= 3, per_exercise


def _following(number: str, exercise: str) -> str | None:
    """The exercise after ``exercise`` in notebook ``number`` (None for the last)."""
    found = [  # a full-mode exercise is left out of the quick runs these grade
        e.number
        for e in exercises.find_exercises(notebooks.read_py(notebooks.notebook_sources([number])[0]))
        if not e.full_mode
    ]
    i = found.index(exercise)
    return found[i + 1] if i + 1 < len(found) else None


def _grade_alone(
    number: str, exercise: str, source: str, tmp_path: Path, through: str | None = None
) -> exercises.Grade:
    """Grade ``exercise`` (and on through the exercise ``through``) from the namespace as the solved notebook's
    one run had it when that exercise began. What it writes goes to ``tmp_path``: its own reports folder and a
    copy of the notebook's run folder, so the solved run's files, which the notebook tests read, stay as they were."""
    path = tmp_path / notebooks.notebook_sources([number])[0].name
    path.write_text(source)
    namespace = dict(solved(number).snapshots[exercise])
    for key in ("RUN_DIR", "RUNS"):
        if isinstance(namespace.get(key), Path):
            copy = tmp_path / key.lower()
            if namespace[key].is_dir():
                shutil.copytree(namespace[key], copy)
            namespace[key] = copy
    old = runtime.environment_snapshot("REPORTS_DIR")
    os.environ["REPORTS_DIR"] = str(tmp_path / "reports")
    try:
        executor = exercises.InProcess(namespace)
        return exercises.grade(path, executor=executor, start_at=exercise, stop_after=through or exercise)
    finally:
        runtime.restore_environment(old)


# "and no other" is the grader's restore at work: after a failed exercise it puts the reference back, so the next
# exercise runs on sound inputs. It is checked on each exercise's first wrong answer (the restore is the same step
# whatever the mistake; a mistake that changes something shared instead is the guard's to catch, tests/course/test_guard.py),
# and its control is test_the_no_other_half_fails_when_the_grader_does_not_restore_the_reference. Following every
# wrong answer through the next exercise doubled the catalogue's cost in CI (196 gradings, most through figure cells).


def _first_entry(exercise: str) -> str:
    return next(name for _, number, name, *_ in CATALOGUE if number == exercise)


# the two longest gradings alone (about 40 s and 30 s on 2 cores): -m slow, to keep CI under 15 minutes on the slower
# machine; their wrong answers still run in CI (the catalogue above), and the other snapshots cover notebooks 03, 04
SLOW_SNAPSHOTS = {("03", "3.1"), ("04", "4.1")}


def _slow_where(params: list, slow: set) -> list:
    return [pytest.param(*p.values, id=p.id, marks=[*p.marks, pytest.mark.slow]) if tuple(p.values) in slow else p
            for p in params]  # fmt: skip


@pytest.mark.grading
@pytest.mark.parametrize(
    "number, exercise",
    _slow_where(
        per_notebook(
            [
                ("01", "1.1"),
                ("01", "1.4"),
                ("02", "2.1"),
                ("02", "2.5"),
                ("02", "2.11"),
                ("03", "3.1"),
                ("03", "3.2"),
                ("03", "3.3"),
                ("03", "3.4"),
                ("03", "3.5"),
                ("04", "4.1"),
                ("04", "4.2"),
                ("04", "4.3"),
                ("04", "4.4"),
                ("05", "5.1"),
                ("05", "5.2"),
                ("05", "5.3"),
                ("05", "5.4"),
                ("06", "6.1"),
                ("06", "6.2"),
                ("06", "6.3"),
                ("06", "6.4"),
                ("06", "6.5"),
                ("06", "6.7"),
            ],
            number_of=lambda case: case[0],
        ),
        SLOW_SNAPSHOTS,
    ),
)
def test_an_exercise_graded_alone_from_its_snapshot_passes_with_the_solution(number, exercise, tmp_path):
    """The control for the catalogue: the starting namespace is sound, so a failure below is the mistake's."""
    source = notebooks.notebook_sources([number])[0].read_text()
    result = _grade_alone(number, exercise, source, tmp_path)
    assert result.status_of(exercise) == "passed", result.table()


@pytest.mark.grading
@pytest.mark.parametrize(
    "number, exercise, name, replacements, error",
    per_notebook(
        [(*entry, "AssertionError") if len(entry) == 4 else entry for entry in CATALOGUE],
        number_of=lambda entry: entry[0],
        ids=[f"{e[1]}-{e[2]}" for e in CATALOGUE],
    ),
)
def test_each_wrong_answer_fails_its_own_exercise_and_no_other(number, exercise, name, replacements, error, tmp_path):
    path = notebooks.notebook_sources([number])[0]
    source = path.read_text()
    nb = notebooks.read_py(path)
    target = next(e for e in exercises.find_exercises(nb) if e.number == exercise)
    solution = "\n".join(line for i in target.cells for line in exercises.solution_lines(nb.cells[i].source))
    for old, new in replacements:
        assert source.count(old) == 1, f"{old!r} should occur once in {path.name}"
        first_line = old.strip().splitlines()[0].strip()
        assert first_line in solution, f"{old!r} is not in Exercise {exercise}'s solution"
        source = source.replace(old, new)
    # the first wrong answer of each exercise is graded on through the next: the restored reference lets it pass
    following = _following(number, exercise) if name == _first_entry(exercise) else None
    result = _grade_alone(number, exercise, source, tmp_path, through=following)
    failed = [r.number for r in result.results if r.status == "failed"]
    assert failed == [exercise], f"{name}: expected Exercise {exercise} alone to fail\n{result.table()}"
    if following is not None:
        assert result.status_of(following) == "passed", f"{name} broke Exercise {following}\n{result.table()}"
    assert result.results[[r.number for r in result.results].index(exercise)].message.startswith(error), result.table()


# Right answers written another way than the solution, in what an exercise's text leaves to the student: each must
# pass, so that a check holding an answer to the reference run number for number holds it to the task, not to the
# solution's incidental choices.
OTHER_RIGHT_ANSWERS = [
    # 6.1's rule inferred from the table alone: the marks its rows show stripped, not all of string.punctuation
    ("06", "6.1", "only the marks the table shows stripped", [('text.strip().strip(string.punctuation + " ")', "text.strip().strip('.!?,;\"() ')")]),
    ("06", "6.5", "the pretrained model trained first", [('for name in ("scratch", "pretrained"):\n        model = knowledge.new_model', 'for name in ("pretrained", "scratch"):\n        model = knowledge.new_model')]),
    ("06", "6.5", "fine-tuning examples made by a function of the epoch", [("knowledge.ExampleBatcher(questions, max_tokens, seed=seed)", "knowledge.ExampleBatcher(lambda epoch: questions, max_tokens, seed=seed)")]),
]  # fmt: skip


@pytest.mark.grading
@pytest.mark.parametrize(
    "number, exercise, name, replacements",
    per_notebook(
        OTHER_RIGHT_ANSWERS, number_of=lambda entry: entry[0], ids=[f"{e[1]}-{e[2]}" for e in OTHER_RIGHT_ANSWERS]
    ),
)
def test_a_right_answer_written_another_way_passes(number, exercise, name, replacements, tmp_path):
    source = notebooks.notebook_sources([number])[0].read_text()
    for old, new in replacements:
        assert source.count(old) == 1, f"{old!r} should occur once"
        source = source.replace(old, new)
    result = _grade_alone(number, exercise, source, tmp_path)
    assert result.status_of(exercise) == "passed", f"{name}\n{result.table()}"


@pytest.mark.grading
@reads_solved("02")
def test_the_no_other_half_fails_when_the_grader_does_not_restore_the_reference(tmp_path, monkeypatch):
    """Control for the catalogue's "and no other": without the restore after a failure, a wrong 2.2 (attention)
    breaks 2.3 (multi-head attention uses it), and the catalogue's check on the following exercise says so."""
    number, exercise = "02", "2.2"
    source = notebooks.notebook_sources([number])[0].read_text()
    wrong = source.replace("scores.softmax(dim=-1)", "scores.softmax(dim=-2)")
    assert wrong.count("scores.softmax(dim=-2)") == 1
    following = _following(number, exercise)
    assert _grade_alone(number, exercise, wrong, tmp_path, through=following).status_of(following) == "passed"
    steps = exercises._exercise_steps
    monkeypatch.setattr(exercises, "_exercise_steps", lambda *a: [s for s in steps(*a) if s.kind != "restore"])
    assert _grade_alone(number, exercise, wrong, tmp_path, through=following).status_of(following) == "failed"


TRICKS = [entry for entry in CATALOGUE if entry[2].startswith("trick:")]


def test_the_tricks_are_catalogued_for_three_exercises_each_both_ways():
    """Calling what computes the answer, and patching what the checks use: both, for three exercises or more."""
    by_exercise = {}
    for _, number, _, _, error in TRICKS:
        by_exercise.setdefault(number, set()).add(error)
    both = [n for n, errors in by_exercise.items() if errors == {"ReferenceOutOfReach", "TamperError"}]
    assert len(both) >= 3, by_exercise


@pytest.mark.grading
@pytest.mark.parametrize(
    "number, exercise, name, replacements, error",
    per_notebook(TRICKS, number_of=lambda entry: entry[0], ids=[f"{e[1]}-{e[2]}" for e in TRICKS]),
)
def test_each_trick_passes_its_exercise_when_the_grader_has_no_guard(
    number, exercise, name, replacements, error, tmp_path, monkeypatch
):
    """The control for the tricks above: without the guard they earn the points, so their failure is the guard's."""
    from helpers.course import guard

    source = notebooks.notebook_sources([number])[0].read_text()
    for old, new in replacements:
        source = source.replace(old, new)
    import builtins
    import math

    import torch

    patched = [(builtins, "abs"), (math, "isclose"), (torch, "allclose")]  # what the tricks replace
    originals = [getattr(owner, name) for owner, name in patched]
    monkeypatch.setattr(guard, "REFERENCES", {})
    monkeypatch.setattr(guard, "INSIDE", {})
    monkeypatch.setattr(guard, "verify", lambda: None)
    try:
        result = _grade_alone(number, exercise, source, tmp_path)
    finally:  # nothing guards this run: put back what the trick patched, for the tests after this one
        for (owner, name), original in zip(patched, originals):
            setattr(owner, name, original)
    assert result.status_of(exercise) == "passed", f"{name} no longer passes unguarded:\n{result.table()}"


@pytest.mark.grading
@reads_solved("01")
def test_the_empty_tensors_forgery_passes_when_the_verifier_lets_allclose_broadcast(tmp_path, monkeypatch):
    """The control for 1.1's forgery (catalogue_forgeries.py): with torch's broadcasting comparisons in the verifier
    and in the notebook's check (probes.close), tensors with a dimension of size 0 earn the points, so the entry's
    failure is the strict comparisons'. With the verifier's alone switched off the check cell fails it already."""
    number, exercise, name, replacements, _ = next(e for e in CATALOGUE if e[2].startswith("forgery: empty tensors"))
    source = notebooks.notebook_sources([number])[0].read_text()
    for old, new in replacements:
        source = source.replace(old, new)
    monkeypatch.setattr(probes, "strict_comparisons", contextlib.nullcontext)
    (tmp_path / "check").mkdir()
    (tmp_path / "neither").mkdir()
    result = _grade_alone(number, exercise, source, tmp_path / "check")
    assert result.status_of(exercise) == "failed" and "shape (0, 1, 1, 1, 1)" in result.table(), result.table()
    monkeypatch.setattr(probes, "close", lambda a, b, **tolerances: torch.allclose(a, b, **tolerances))
    result = _grade_alone(number, exercise, source, tmp_path / "neither")
    assert result.status_of(exercise) == "passed", (
        f"{name} no longer passes without strict comparisons:\n{result.table()}"
    )


@pytest.mark.grading
@reads_solved("01")
def test_a_copy_s_heading_cannot_change_what_an_exercise_is_worth(tmp_path):
    """A helper attacking the grader (2026-12-07) raised Exercise 1.1 to 30 points in its heading and got 30/30 (the
    points came from the copy's headings): they are the reference's."""
    source = notebooks.notebook_sources(["01"])[0].read_text()
    heading = "### Exercise 1.1 · Softmax attention (3 points)"
    assert source.count(heading) == 1
    result = _grade_alone("01", "1.1", source.replace(heading, heading.replace("(3 points)", "(30 points)")), tmp_path)
    graded = result.results[0]
    assert (graded.number, graded.status, graded.points, graded.earned) == ("1.1", "passed", 3, 3), result.table()
    assert result.possible == sum(e.points for e in exercises.find_exercises(notebooks.read_py(SOURCES[0]))), (
        result.table()
    )


def test_a_copy_whose_exercise_headings_differ_from_the_course_s_is_refused_not_graded_by_its_own_checks(tmp_path):
    """The same helper added a heading "Exercise 1.99 · Bonus (1 point)" with an empty check: the grader then graded
    the copy as it was, its own checks deciding, and a wrong attend passed 1.1. A copy of a course notebook whose
    exercises are not the course's is refused, with what to do."""
    source = notebooks.notebook_sources(["01"])[0].read_text()
    copy = tmp_path / "01_bonus.py"
    copy.write_text(source + '\n# %% [markdown]\n# ### Exercise 1.99 · Bonus (1 point)\n\n# %% tags=["check"]\npass\n')
    with pytest.raises(ExerciseMarkupError, match=r"has exercises 1\.1, .*1\.99, not those of the course's .*Put the "):
        exercises.grade(copy, executor=exercises.InProcess())
    renamed = tmp_path / "alice.py"  # renamed, with a heading of another notebook: which is it? refused too
    renamed.write_text(
        source + '\n# %% [markdown]\n# ### Exercise 9.1 · Bonus (1 point)\n\n# %% tags=["check"]\npass\n'
    )
    with pytest.raises(ExerciseMarkupError, match=r"exercises of several notebooks \(01, 09\)"):
        exercises.grade(renamed, executor=exercises.InProcess())
    missing = tmp_path / "01_missing.py"  # a heading deleted: its solution is under no heading, refused too
    missing.write_text(source.replace("### Exercise 1.1 · Softmax attention (3 points)", "### Softmax attention"))
    with pytest.raises(ExerciseMarkupError, match="holds a solution block but no exercise heading"):
        exercises.grade(missing, executor=exercises.InProcess())


@pytest.mark.grading
@pytest.mark.parametrize("entry", [e for e in TRICKS if e[1] == "2.1"], ids=lambda e: e[2])
def test_in_a_jupyter_kernel_as_instructors_grade_the_tricks_fail_and_the_solution_passes(entry, tmp_path):
    """The guard works where grading really runs (a kernel: the student's cells wrapped, the guard's own cells)."""
    number, exercise, name, replacements, error = entry
    path = notebooks.notebook_sources([number])[0]
    source = path.read_text()
    for old, new in replacements:
        source = source.replace(old, new)
    tricked = tmp_path / path.name
    tricked.write_text(source)
    result = exercises.grade(tricked, stop_after=exercise, reference=path)
    assert result.status_of(exercise) == "failed" and result.results[0].message.startswith(error), result.table()
    honest = exercises.grade(path, stop_after=exercise)  # the control: the solution, the same way
    assert honest.status_of(exercise) == "passed", honest.table()


def test_a_stub_message_reads_cleanly_after_a_question_mark():
    ask = exercises.Exercise("2.9", "How many parameters?", 2, 0)
    assert exercises.stub_message(ask) == "Exercise 2.9: How many parameters? Replace this line with your code."
    plain = exercises.Exercise("2.3", "Multi-head attention", 3, 0)
    assert exercises.stub_message(plain) == "Exercise 2.3: Multi-head attention. Replace this line with your code."


def _failing_inside(tmp_path):
    """A reference notebook, and a student's copy whose solution raises inside the function the check calls."""
    reference = _nb(
        ("md", "## Exercise 9.1 · Doubling (4 points)"), ("code", SOLVED), ("code", "assert f(2) == 4", ["check"])
    )
    student = _nb(
        ("md", "## Exercise 9.1 · Doubling (4 points)"),
        ("code", "def f(x):\n    '''Twice x.'''\n    halves = [x / 2]\n    return halves[1] * 4\n"),
        ("code", "assert f(2) == 4", ["check"]),
    )
    return _reference_and_copy(tmp_path, "09_double.ipynb", reference, student)


def _reference_and_copy(tmp_path, name, reference, student):
    """The reference under tmp_path/ref/ and the student's copy beside it: (copy, reference) paths."""
    ref, mine = tmp_path / "ref" / name, tmp_path / name
    ref.parent.mkdir()
    nbformat.write(reference, ref)
    nbformat.write(student, mine)
    return mine, ref


def test_a_failed_exercise_names_the_students_line_and_the_grade_prints_each_exercise_once(tmp_path, capsys):
    mine, ref = _failing_inside(tmp_path)
    lines = []
    result = exercises.grade(mine, executor=exercises.InProcess(), reference=ref, echo=lines.append)
    (r,) = result.results
    assert r.status == "failed" and r.message.startswith("IndexError: list index out of range")
    assert "your 09_double cell 1, line 4 in f: return halves[1] * 4" in r.message, r.message
    assert len(lines) == 1 and "line 4 in f" in lines[0], lines
    assert "Exercise 9.1" not in result.summary() and "Total: 0/4 points" in result.summary()
    assert result.table().count("Exercise 9.1") == 1


def _full_mode_notebooks(tmp_path, student_heading="## Exercise 9.2 · Reach the threshold (3 points)"):
    reference = _nb(
        ("md", "## Exercise 9.1 · Doubling (4 points)"),
        ("code", SOLVED),
        ("code", "assert f(2) == 4", ["check"]),
        ("md", "## Exercise 9.2 · Reach the threshold (3 points, full mode)"),
        ("code", f"def g():\n    {BEGIN}\n    return 0.6\n    {END}\n"),
        ("code", "import os\nassert os.environ['QUICK'] == '0' and g() >= 0.35", ["check"]),
    )
    student = _nb(
        ("md", "## Exercise 9.1 · Doubling (4 points)"),
        ("code", "def f(x):\n    return 0\n"),
        ("code", "assert f(2) == 4", ["check"]),
        ("md", student_heading),
        ("code", "def g():\n    return 0.2\n"),
        ("code", "pass", ["check"]),
    )
    return _reference_and_copy(tmp_path, "09_x.ipynb", reference, student)


def test_a_full_mode_exercise_is_left_out_of_a_quick_grade_and_graded_in_a_full_one(tmp_path):
    mine, ref = _full_mode_notebooks(tmp_path)
    quick = exercises.grade(mine, executor=exercises.InProcess(), reference=ref)
    assert quick.status_of("9.1") == "failed" and quick.status_of("9.2") == exercises.NOT_GRADED
    assert (quick.total, quick.possible) == (0, 4), "its points leave the total with it"
    assert "n/a   Exercise 9.2" in quick.table() and "grade --full" in quick.table()
    full = exercises.grade(mine, executor=exercises.InProcess(quick=False), reference=ref)
    assert full.status_of("9.2") == "failed" and full.possible == 7  # graded: the student's g() reaches 0.2
    solved_full = exercises.grade(ref, executor=exercises.InProcess(quick=False), reference=ref)
    assert (solved_full.total, solved_full.possible) == (7, 7)


def test_a_student_cannot_mark_an_exercise_full_mode_to_leave_it_out(tmp_path):
    """The reference's markup decides which exercises a quick run leaves out, not the student's copy."""
    mine, ref = _full_mode_notebooks(tmp_path)
    text = mine.read_text().replace("Doubling (4 points)", "Doubling (4 points, full mode)")
    mine.write_text(text)
    result = exercises.grade(mine, executor=exercises.InProcess(), reference=ref)
    assert result.status_of("9.1") == "failed" and result.possible == 4


def test_grade_command_leaves_a_full_mode_exercise_out_unless_asked_for_the_full_run(tmp_path, capsys):
    _, ref = _full_mode_notebooks(tmp_path)  # the solved notebook, graded as it is (no course notebook numbered 09)
    out = tmp_path / "grade.json"
    assert cli.main(["grade", str(ref), "--in-process", "--json", str(out)]) == 0
    quick = json.loads(out.read_text(encoding="utf-8"))
    assert (quick["total"], quick["possible"]) == (4, 4)
    assert [e["status"] for e in quick["exercises"]] == ["passed", exercises.NOT_GRADED]
    assert "in quick mode" in capsys.readouterr().out
    assert cli.main(["grade", str(ref), "--in-process", "--full", "--json", str(out)]) == 0
    full = json.loads(out.read_text(encoding="utf-8"))
    assert (full["total"], full["possible"]) == (7, 7) and "in full mode" in capsys.readouterr().out
