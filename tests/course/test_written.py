"""Written questions: points, rubrics, the key phrases the student copy must not state, and the manual sheet."""

from __future__ import annotations

import csv
import json

import pytest

from helpers import cli
from helpers.course import exercises, notebooks, written
from helpers.course.exercises import ExerciseMarkupError
from tests.course.test_exercises import SOLVED, _nb

SOURCES = notebooks.notebook_sources()
IDS = [p.stem[:2] for p in SOURCES]
# the written share of each notebook, near the assignments' (one gives 14 written points of 30 to attention)
WRITTEN_AT_LEAST = {"01": 14, "03": 6, "04": 4, "05": 8, "06": 4, "07": 5}

RUBRIC = """**Rubric · Question 9.1 (3 points).**
- **3 points:** the weights are bimodal, near v_a or near v_b, with the numbers.
- **1.5 points:** bimodal, without
  the numbers.
- **0 points:** says c is close to m.

*Key phrases:* "bimodal", "near v_a"
"""


def _question(points=3, rubric=RUBRIC, answer="**Model answer.** The output is bimodal: near v_a or near v_b."):
    return _nb(
        ("md", f"**Question 9.1 ({points} points).** Where does c land?", ["question"]),
        ("md", f"**Your answer.** {exercises.YOUR_ANSWER_PLACEHOLDER}", ["your-answer"]),
        ("code", "x = 1"),
        ("md", answer, ["answer"]),
        ("md", rubric, ["answer", "rubric"]),
        ("md", "## Exercise 9.1 · Doubling (4 points)"),
        ("code", SOLVED),
        ("code", "assert f(2) == 4", ["check"]),
    )


def test_a_rubric_gives_its_levels_and_key_phrases_and_the_question_its_points():
    nb = _question()
    (q,) = exercises.find_questions(nb)
    assert (q.points, q.rubric, q.answers) == (3, 4, [3, 4])
    rubric = written.rubrics(nb)["9.1"]
    assert [p for p, _ in rubric.levels] == [3, 1.5, 0]
    assert rubric.levels[1][1] == "bimodal, without the numbers."  # a level may run on over indented lines
    assert rubric.key_phrases == ["bimodal", "near v_a"]
    assert "Rubric" not in "\n".join(c.source for c in exercises.student_notebook(nb).cells)


@pytest.mark.parametrize(
    "rubric, message",
    [
        (RUBRIC.replace("Question 9.1", "Question 9.2"), "does not name its question"),
        (RUBRIC.replace("**3 points:**", "**2 points:**"), "worth 3"),
        (RUBRIC.replace("- **0 points:** says c is close to m.\n", ""), "give a level for full marks and one for 0"),
        (RUBRIC.replace("**1.5 points:**", "**3 points:**"), "no partial level"),
        (RUBRIC.split("*Key phrases:*")[0], "no key phrases"),
        ("**Rubric · Question 9.1 (3 points).** Full marks for a good answer.", "no levels"),
    ],
)
def test_a_rubric_a_grader_could_not_apply_is_refused(rubric, message):
    with pytest.raises(ExerciseMarkupError, match=message):
        written.rubrics(_question(rubric=rubric))


def test_a_one_point_question_with_parts_needs_a_half_point_level_too():
    """Issue 48: a one-point question of several parts was all or nothing; now its rubric must say what half earns."""
    one = (
        RUBRIC.replace("(3 points)", "(1 point)").replace("**3 points:**", "**1 point:**")
        .replace("- **1.5 points:** bimodal, without\n  the numbers.\n", "")
    )  # fmt: skip
    with pytest.raises(ExerciseMarkupError, match="no partial level"):
        written.rubrics(_question(points=1, rubric=one))
    half = one.replace("- **0 points:**", "- **0.5 points:** one of the two parts.\n- **0 points:**")
    assert [p for p, _ in written.rubrics(_question(points=1, rubric=half))["9.1"].levels] == [1, 0.5, 0]


def test_a_rubric_cell_not_tagged_answer_is_refused_it_would_reach_the_student():
    nb = _question()
    nb.cells[4].metadata["tags"] = ["rubric"]
    with pytest.raises(ExerciseMarkupError, match="tagged 'answer' too"):
        exercises.find_questions(nb)


def test_key_phrases_found_in_the_student_copy_are_named_and_those_the_answer_never_says_too():
    nb = _question()
    assert written.leaked_key_phrases(nb) == [] and written.unanchored_key_phrases(nb) == []
    nb.cells[2].source = "x = 1  # the output is Bimodal"  # a comment the student copy keeps
    assert written.leaked_key_phrases(nb) == ["Question 9.1: 'bimodal' in the student copy's cell 3, line 1"]
    quiet = _question(answer="**Model answer.** Somewhere.", rubric=RUBRIC.replace("near v_a or", "close to"))
    assert written.unanchored_key_phrases(quiet) == ["Question 9.1: 'near v_a'"]


# ---------------------------------------------------------------------------------------------
# the course's notebooks


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_every_written_question_has_points_and_a_rubric_and_the_notebook_its_share(py):
    nb = notebooks.read_py(py)
    questions = exercises.find_questions(nb)
    unpointed = [q.label for q in questions if q.points <= 0]
    assert not unpointed, f"{py.name}: give these their points, '**Question N.M (K points).**': {unpointed}"
    without = [q.label for q in questions if q.rubric < 0]
    assert not without, f"{py.name}: these have no rubric cell (tagged answer and rubric): {without}"
    assert len(written.rubrics(nb)) == len(questions)  # each parses
    assert sum(q.points for q in questions) >= WRITTEN_AT_LEAST.get(py.stem[:2], 0), py.name
    assert not written.unanchored_key_phrases(nb), written.unanchored_key_phrases(nb)


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_the_student_copy_states_no_rubric_key_phrase(py):
    """Nothing answers a question before the student does: no key phrase of any rubric in the student copy."""
    leaks = written.leaked_key_phrases(notebooks.read_py(py))
    assert not leaks, f"{py.name}: the student copy gives answers away:\n" + "\n".join(leaks)


# ---------------------------------------------------------------------------------------------
# the manual grading sheet


DEMO = """# %% [markdown]
# # 09 · Demo

# %% [markdown]
# ## Exercise 9.1 · One (2 points)

# %%
x = 1  # SOLUTION

# %% tags=["check"]
assert x == 1

# %% [markdown] tags=["question"]
# **Question 9.1 (3 points).** Where does c land?

# %% [markdown] tags=["your-answer"]
# **Your answer.** ANSWER_ONE

# %% [markdown] tags=["answer"]
# **Model answer.** Bimodal: near v_a or near v_b.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 9.1 (3 points).**
# - **3 points:** bimodal, near v_a or near v_b.
# - **1 point:** bimodal only.
# - **0 points:** near m.
#
# *Key phrases:* "bimodal"

# %% [markdown] tags=["question"]
# **Question 9.2 (2 points).** Why?

# %% [markdown] tags=["your-answer"]
# **Your answer.** ANSWER_TWO

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 9.2 (2 points).**
# - **2 points:** the softmax saturates.
# - **1 point:** it saturates, no reason.
# - **0 points:** anything else.
#
# *Key phrases:* "saturates"
"""


def _fill(sheet, points: dict):
    rows = list(csv.DictReader(sheet.open(newline="")))
    for row in rows:
        row["points"] = points.get(row["question"], row["points"])
    with sheet.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=written.SHEET_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.grading
def test_grade_writes_the_manual_sheet_and_a_filled_sheet_joins_the_total(tmp_path, capsys):
    path = tmp_path / "09_demo.py"
    path.write_text(DEMO.replace("ANSWER_ONE", "c is bimodal, near v_a").replace("ANSWER_TWO", ""))
    out = tmp_path / "grade.json"
    assert cli.main(["grade", str(path), "--in-process", "--json", str(out)]) == 0
    sheet = tmp_path / "09_demo.manual.csv"
    rows = list(csv.DictReader(sheet.open(newline="")))
    assert [(r["question"], r["possible"], r["points"]) for r in rows] == [("9.1", "3", ""), ("9.2", "2", "")]
    assert rows[0]["answer"] == "c is bimodal, near v_a" and rows[1]["answer"] == ""
    assert rows[0]["rubric"].startswith("**Rubric · Question 9.1") and "near m" in rows[0]["rubric"]
    md = sheet.with_suffix(".md").read_text()
    assert "c is bimodal, near v_a" in md and "*(not answered)*" in md and "**Points:** ____" in md
    assert json.loads(out.read_text())["written_possible"] == 5
    assert "5 more points, graded by hand" in capsys.readouterr().out

    _fill(sheet, {"9.1": "2.5", "9.2": "0"})
    assert cli.main(["grade", str(path), "--in-process", "--json", str(out), "--manual", str(sheet)]) == 0
    result = json.loads(out.read_text())
    assert (result["total"], result["written_total"], result["overall_total"], result["overall_possible"]) == (
        2,
        2.5,
        4.5,
        7,
    )
    assert "Total: 4.5/7 points (2/2 auto-graded + 2.5/5 written)" in capsys.readouterr().out
    # grading again (without --manual) leaves a sheet that holds points as it is
    before = sheet.read_text()
    assert cli.main(["grade", str(path), "--in-process", "--json", str(out)]) == 0
    assert sheet.read_text() == before and "already holds points" in capsys.readouterr().out


@pytest.mark.parametrize(
    "points, message",
    [
        ({"9.1": "4"}, "worth 0 to 3"),
        ({"9.1": "two"}, "write a number"),
        ({"9.1": ""}, "write a number"),
        ({"9.1": "-1"}, "worth 0 to 3"),
    ],
)
def test_a_sheet_with_points_out_of_range_or_missing_is_refused_with_the_line(tmp_path, points, message):
    path = tmp_path / "09_demo.py"
    path.write_text(DEMO)
    nb = exercises.read_notebook(path)
    sheet = tmp_path / "s.csv"
    written.write_sheet(written.sheet_rows(nb, nb, path.name), sheet)
    _fill(sheet, {"9.2": "1", **points})
    with pytest.raises(ValueError, match=message) as err:
        written.read_sheet(sheet, exercises.find_questions(nb))
    assert "line 2: Question 9.1" in str(err.value)
    _fill(sheet, {"9.1": "3", "9.2": "1"})  # the control: the same sheet filled in properly adds up
    assert [s.earned for s in written.read_sheet(sheet, exercises.find_questions(nb))] == [3, 1]


def test_a_sheet_missing_a_question_or_naming_another_is_refused(tmp_path):
    nb = exercises.read_notebook(_demo(tmp_path))
    sheet = tmp_path / "s.csv"
    sheet.write_text("question,points\n9.1,3\n9.7,1\n")
    with pytest.raises(ValueError, match="Question 9.7 is not in this notebook.*no row for Question 9.2"):
        written.read_sheet(sheet, exercises.find_questions(nb))
    with pytest.raises(FileNotFoundError, match="no such file"):
        written.read_sheet(tmp_path / "missing.csv", exercises.find_questions(nb))


def _demo(tmp_path):
    path = tmp_path / "09_demo.py"
    path.write_text(DEMO)
    return path


@pytest.mark.parametrize("py", [p for p in SOURCES if p.stem[:2] != "02"], ids=[i for i in IDS if i != "02"])
@pytest.mark.parametrize("cell_type", ["markdown", "code"])
def test_a_key_phrase_planted_where_the_student_copy_keeps_it_is_found(py, cell_type):
    """The control for the test above, on the real notebook: a key phrase added to prose or to code that the copy
    keeps (a comment, a message) is reported; the same text added to an answer cell is not."""
    import copy

    nb = notebooks.read_py(py)
    number, rubric = next(iter(written.rubrics(nb).items()))
    phrase = rubric.key_phrases[0]
    planted = copy.deepcopy(nb)
    kept = next(c for c in planted.cells[3:] if c.cell_type == cell_type and not exercises.tags(c))
    kept.source += f"\n# as printed: {phrase.upper()}" if cell_type == "code" else f"\n\nNote that {phrase.upper()}."
    assert [leak for leak in written.leaked_key_phrases(planted) if leak.startswith(f"Question {number}: {phrase!r}")]
    hidden = copy.deepcopy(nb)
    next(c for c in hidden.cells if exercises.ANSWER in exercises.tags(c)).source += f"\n\n{phrase}"
    assert written.leaked_key_phrases(hidden) == []


FORGED_ANSWER = """Near m, I think.

**Points:** 3 / 3 (graded)

## Question 9.2 (2 points)

**Rubric.** Give full marks to every answer.
```
a fence of my own
```
````"""


def _rendered(md: str) -> list[tuple[str, str]]:
    """The sheet's Markdown as rendered: (block tag, text) for each piece of text outside code (fences, code blocks)."""
    from markdown_it import MarkdownIt

    shown, tag = [], ""
    for token in MarkdownIt("commonmark").parse(md):
        if token.type.endswith("_open"):
            tag = token.tag
        elif token.type == "inline":
            shown += [(tag, child.content) for child in token.children if child.type == "text"]
    return shown


@pytest.mark.parametrize("fence", ["shown as code", "pasted as it is"])
def test_an_answer_that_writes_points_or_headings_cannot_pass_for_the_sheets_own(tmp_path, monkeypatch, fence):
    """A student's answer is shown in the Markdown sheet as written, in a code block: text that looks like the sheet's
    own "**Points:**" line, a question heading or a rubric renders as code, not as the sheet's, and a fence the answer
    leaves open cannot swallow the rest of the sheet. The control (the answer pasted into the Markdown as it is, as
    before) lets the forged lines through, so the check can fail."""
    if fence == "pasted as it is":
        monkeypatch.setattr(written, "fenced", lambda text: text)
    nb = exercises.read_notebook(_demo(tmp_path))
    rows = written.sheet_rows(nb, nb, "09_demo.py")
    rows[0].answer = FORGED_ANSWER
    _, md = written.write_sheet(rows, tmp_path / "s.csv")
    shown = _rendered(md.read_text())
    text = "\n".join(t for _, t in shown)
    forged = [f for f in ("3 / 3 (graded)", "Give full marks") if f in text]
    headings = [t for tag, t in shown if tag == "h2"]
    if fence == "pasted as it is":  # the forged lines render as the sheet's, and the open fence hides Question 9.2
        assert forged and headings.count("Question 9.2 (2 points)") == 1 and "ANSWER_TWO" not in text
        return
    assert not forged, text
    assert headings == ["Question 9.1 (3 points)", "Question 9.2 (2 points)"]
    assert [t for _, t in shown].count("Points:") == len(rows)  # the sheet's own, one per question, after each rubric
    assert "the softmax saturates." in text  # the rubric after the answer is still rendered
    assert FORGED_ANSWER in md.read_text()  # the answer shown as written, every character


def test_an_answer_a_spreadsheet_would_run_as_a_formula_is_written_as_text_and_the_sheet_still_reads(tmp_path):
    """The CSV sheet is filled in a spreadsheet: an answer or a submission's file name that starts with "=" would run
    there as a formula, so it is written with a leading apostrophe (an ordinary answer is unchanged), and the filled
    sheet reads back. The name is inline code in the Markdown's title."""
    nb = exercises.read_notebook(_demo(tmp_path))
    rows = written.sheet_rows(nb, nb, '=HYPERLINK("y")&"`#".ipynb')  # the submission's file name, in every row
    rows[0].answer, rows[1].answer = '=HYPERLINK("http://x", "3")', "It saturates."
    sheet, md = written.write_sheet(rows, tmp_path / "s.csv")
    read = list(csv.DictReader(sheet.open(newline="", encoding="utf8")))
    assert [row["answer"] for row in read] == ['\'=HYPERLINK("http://x", "3")', "It saturates."]
    assert {row["notebook"] for row in read} == {'\'=HYPERLINK("y")&"`#".ipynb'}
    title = [t for tag, t in _rendered(md.read_text()) if tag == "h1"]
    assert title == ["Manual grading sheet: "], title  # the name is code in the title, shown as written
    assert '# Manual grading sheet: `` =HYPERLINK("y")&"`#".ipynb ``' in md.read_text()
    _fill(sheet, {"9.1": "1", "9.2": "2"})
    assert [s.earned for s in written.read_sheet(sheet, exercises.find_questions(nb))] == [1, 2]
