"""Written questions graded by hand: points, rubrics, and the manual grading sheet.

A written question carries its points in its first line (``**Question 1.3 (2 points).**``) and is graded
by a rubric: a markdown cell tagged ``answer`` and ``rubric`` after its *Your answer* cell, so the student
copy leaves it out (as it leaves out the model answer)::

    **Rubric · Question 1.3 (2 points).**
    - **2 points:** what a full answer says.
    - **1 point:** what a partial answer says (or gets wrong).
    - **0 points:** what a wrong answer says.

    *Key phrases:* "phrase one", "phrase two"

The key phrases are what the answer states and nothing before it may: the tests build the student copy and
fail if any of them appears in it. ``grade`` writes a manual grading sheet (Markdown to read, CSV to fill in):
per question the student's answer (as written, in a code block: it cannot pass for the sheet's own text), the
rubric and an empty points column. ``grade --manual SHEET.csv`` reads it
back, refuses a row left empty or over the question's points, and adds the written points to the total
(the model: nbgrader's manually graded answers, Otter's manual questions).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from .exercises import YOUR_ANSWER_PLACEHOLDER, ExerciseMarkupError, Question, find_questions, student_notebook

_LEVEL = re.compile(r"^[-*]\s+\*\*(?P<points>\d+(?:\.5)?)\s+points?:?\*\*:?\s*(?P<text>.*)$")
_KEY_PHRASES = re.compile(r"^\*Key phrases:?\*:?\s*(?P<list>.*)$", re.I)
_YOUR_ANSWER_PREFIX = re.compile(r"^\*\*Your answer\.?\*\*\s*", re.I)
SHEET_COLUMNS = ["notebook", "question", "possible", "points", "comment", "answer", "rubric"]


@dataclass
class Rubric:
    question: str
    points: int
    levels: list[tuple[float, str]]  # (points, what an answer worth them says), most first
    key_phrases: list[str]
    text: str  # the cell as written (for the sheet)


def parse_rubric(source: str, question: Question) -> Rubric:
    """The levels and key phrases of a rubric cell; refuses one a grader could not apply."""
    levels, phrases, lines = [], [], source.splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        match = _LEVEL.match(stripped)
        if match:
            text = [match["text"]]
            for follow in lines[index + 1 :]:  # a level's text may run on over indented lines
                if follow.startswith("  ") and follow.strip() and not _LEVEL.match(follow.strip()):
                    text.append(follow.strip())
                else:
                    break
            levels.append((float(match["points"]), " ".join(t for t in text if t)))
        keys = _KEY_PHRASES.match(stripped)
        if keys:
            phrases += re.findall(r'"([^"]+)"', keys["list"])
    where = f"the rubric of {question.label}"
    if f"Question {question.number}" not in source:
        raise ExerciseMarkupError(f"{where} does not name its question: start it with '**Rubric · {question.label}'.")
    if not levels:
        raise ExerciseMarkupError(f"{where} has no levels: write lines like '- **2 points:** what a full answer says'.")
    points = [p for p, _ in levels]
    if max(points) != question.points or min(points) != 0:
        raise ExerciseMarkupError(
            f"{where} runs from {min(points):g} to {max(points):g} points; the question is worth {question.points}: "
            "give a level for full marks and one for 0."
        )
    if not any(0 < p < question.points for p in points):  # a one-point question too: 0.5 for one part of it
        raise ExerciseMarkupError(f"{where} has no partial level: say what an answer worth part of the points says.")
    if not phrases:
        raise ExerciseMarkupError(
            f"{where} has no key phrases: add a line '*Key phrases:* \"...\"' with what only the answer may state."
        )
    levels.sort(key=lambda level: -level[0])
    return Rubric(question.number, question.points, levels, phrases, source.strip())


def rubrics(nb) -> dict[str, Rubric]:
    """Every question's rubric in a solved notebook, by question number (questions without one are left out)."""
    return {q.number: parse_rubric(nb.cells[q.rubric].source, q) for q in find_questions(nb) if q.rubric >= 0}


def answer_text(nb, question: Question) -> str:
    """What the student wrote in a question's *Your answer* cell ('' when it still holds the placeholder)."""
    text = _YOUR_ANSWER_PREFIX.sub("", nb.cells[question.your_answer].source.strip()).strip()
    return "" if text == YOUR_ANSWER_PLACEHOLDER else text


@dataclass
class SheetRow:
    notebook: str
    question: str
    possible: int
    points: str  # empty until the grader fills it in
    comment: str
    answer: str
    rubric: str


def sheet_rows(graded_nb, reference_nb, notebook: str) -> list[SheetRow]:
    """One row per written question of the reference: its points and rubric, and the student's answer from
    ``graded_nb`` (empty when the student's copy lost the question: the grader sees that and gives 0)."""
    mine = {q.number: q for q in find_questions(graded_nb)}
    found = rubrics(reference_nb)
    rows = []
    for q in find_questions(reference_nb):
        rubric = found.get(q.number)
        answer = answer_text(graded_nb, mine[q.number]) if q.number in mine else ""
        text = rubric.text if rubric else "(no rubric: grade by the model answer)"
        rows.append(SheetRow(notebook, q.number, q.points, "", "", answer, text))
    return rows


def filled(path: str | Path) -> bool:
    """Whether a sheet at ``path`` already holds points someone wrote (so it must not be overwritten)."""
    path = Path(path)
    if not path.exists():
        return False
    with path.open(newline="", encoding="utf8") as f:
        return any((row.get("points") or "").strip() for row in csv.DictReader(f))


def _ticks_around(text: str, at_least: int) -> str:
    """A run of backticks longer than any in ``text`` (and at least ``at_least``): nothing inside can close it."""
    return "`" * max(at_least, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)


def code_span(text: str) -> str:
    """``text`` (a submission's file name) as inline Markdown code, shown as written."""
    ticks = _ticks_around(text, 1)
    return f"{ticks} {text} {ticks}"


def fenced(text: str) -> str:
    """``text`` as a Markdown code block, shown as written and rendered as nothing: a student's answer that holds
    "**Points:** 2" or "## Question 1.5" cannot pass for the sheet's own headings, rubric or points."""
    fence = _ticks_around(text, 3)
    return f"{fence}text\n{text}\n{fence}"


def as_text(value):
    """A cell a spreadsheet shows as text: a string that starts with ``=``, ``+``, ``-``, ``@`` or a tab would be
    read as a formula (a submission named ``=HYPERLINK(...).ipynb``, an answer that starts ``=1+1``), so it gets a
    leading apostrophe. Used for every cell a student's file or text fills, here and in the gradebook."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def write_sheet(rows: list[SheetRow], csv_path: str | Path) -> tuple[Path, Path]:
    """The manual grading sheet as CSV (to fill in: the 'points' column) and Markdown (to read), side by side."""
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="", encoding="utf8") as f:
        writer = csv.DictWriter(f, fieldnames=SHEET_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({key: as_text(value) for key, value in row.__dict__.items()})  # the file's name too
    md_path = csv_path.with_suffix(".md")
    lines = [
        f"# Manual grading sheet: {code_span(rows[0].notebook) if rows else '(no written questions)'}",
        "",
        f"Fill in the `points` column of `{csv_path.name}` for each question (the rubric says how many), then run "
        f"`python -m helpers grade NOTEBOOK --manual {csv_path.name}` for the total.",
        "",
    ]
    for row in rows:
        lines += [f"## Question {row.question} ({row.possible} points)", "", "**The student's answer.**", ""]
        lines += [fenced(row.answer) if row.answer else "*(not answered)*", "", "**Rubric.**", "", row.rubric, ""]
        lines += ["**Points:** ____", ""]
    md_path.write_text("\n".join(lines), encoding="utf8")
    return csv_path, md_path


@dataclass
class ManualScore:
    question: str
    possible: int
    earned: float
    comment: str = ""


def read_sheet(path: str | Path, questions: list[Question]) -> list[ManualScore]:
    """A filled sheet's points, checked against the notebook's questions: every question once, 0 <= points <= possible."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"--manual {path}: no such file. Give the .csv sheet that grade wrote, with its points column filled in."
        )
    with path.open(newline="", encoding="utf8") as f:
        reader = csv.DictReader(f)
        missing_columns = {"question", "points"} - set(reader.fieldnames or [])
        if missing_columns:
            raise ValueError(
                f"{path}: no column {', '.join(sorted(missing_columns))}. Use the sheet grade wrote, columns "
                f"{', '.join(SHEET_COLUMNS)}."
            )
        rows = list(reader)
    possible = {q.number: q.points for q in questions}
    scores, problems, seen = [], [], set()
    for line, row in enumerate(rows, 2):
        number = (row.get("question") or "").strip()
        if number not in possible:
            problems.append(f"line {line}: Question {number or '(empty)'} is not in this notebook")
            continue
        if number in seen:
            problems.append(f"line {line}: Question {number} appears twice")
            continue
        seen.add(number)
        text = (row.get("points") or "").strip()
        try:
            earned = float(text)
        except ValueError:
            problems.append(f"line {line}: Question {number} has points {text!r}; write a number from the rubric")
            continue
        if not 0 <= earned <= possible[number]:
            problems.append(
                f"line {line}: Question {number} has {earned:g} points; it is worth 0 to {possible[number]}"
            )
            continue
        scores.append(ManualScore(number, possible[number], earned, (row.get("comment") or "").strip()))
    absent = [n for n in possible if n not in seen]
    if absent:
        problems.append(f"no row for Question {', '.join(absent)}")
    if problems:
        raise ValueError(f"{path} cannot be added up: " + "; ".join(problems) + ".")
    return scores


def leaked_key_phrases(nb) -> list[str]:
    """Each rubric key phrase of solved notebook ``nb`` that its student copy still states, with where.

    The student copy is searched whole (markdown, code, comments, docstrings, messages), case-insensitively:
    a copy that says what a question asks the student to find gives the answer away before it is written.
    """
    copy = student_notebook(nb)
    found = []
    for number, rubric in rubrics(nb).items():
        for phrase in rubric.key_phrases:
            for index, cell in enumerate(copy.cells):
                at = cell.source.lower().find(phrase.lower())
                if at >= 0:
                    line = cell.source[: at + 1].count("\n") + 1
                    found.append(f"Question {number}: {phrase!r} in the student copy's cell {index}, line {line}")
    return found


def unanchored_key_phrases(nb) -> list[str]:
    """Each key phrase that neither the model answer nor a rubric level states: such a phrase checks nothing."""
    found = []
    for q in find_questions(nb):
        if q.rubric < 0:
            continue
        rubric = parse_rubric(nb.cells[q.rubric].source, q)
        said = [nb.cells[i].source for i in q.answers if i != q.rubric] + [text for _, text in rubric.levels]
        said = "\n".join(said).lower()
        found += [f"Question {q.number}: {p!r}" for p in rubric.key_phrases if p.lower() not in said]
    return found
