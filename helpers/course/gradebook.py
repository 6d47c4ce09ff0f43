"""Grading a class: a folder of submissions (or several files) into one gradebook and a feedback file per student.

Each submission is graded by ``python -m helpers grade`` in a process of its own (``jobs`` at a time): its own
kernel, killed with everything it started before that process writes its JSON, so one submission's crash, hang or
trick touches no other. A file that is not a notebook, is empty, cannot be read, holds no exercise of the course, or
is another notebook than the one asked for (``expected``) gets a row saying why, and the rest are graded.

What lands in ``out``: ``gradebook.csv`` (one row per submission: file, notebook, status, each exercise's points,
auto-graded total, written points where a filled manual sheet exists, total, and the reason a file was not graded),
``feedback/<file>.md`` (for the student: what passed, the first failing message of each failed exercise, what was
not attempted), ``sheets/<file>.manual.csv`` (the written questions to grade by hand: fill one in and grade again,
its points join that row), ``json/`` and ``logs/`` (each grade's JSON and output).
"""

from __future__ import annotations

import concurrent.futures
import csv
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import exercises, notebooks, written

NOTEBOOK_SUFFIXES = (".ipynb", ".py")
CERTIFIES = (
    "What this grade certifies: your code gave correct results on inputs it had never seen, checked outside your "
    "notebook. It does not certify that the code is your own."
)


@dataclass
class Submission:
    path: Path
    number: str | None = None  # the course notebook it is ("02")
    problem: str = ""  # why it is not graded; empty when it is

    @property
    def key(self) -> str:
        """A name for its files in ``out``: the file's name, made safe."""
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.path.name)


def collect(paths: list[str | Path]) -> list[Path]:
    """The files named, and every file directly inside the folders named (hidden files and sheets left out)."""
    found = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith(".")
                            and not f.name.endswith((".manual.csv", ".manual.md")))  # fmt: skip
        elif p.exists():
            found.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or folder. Give the submissions' folder or files.")
    return found


def identify(path: Path, expected: str | None = None) -> Submission:
    """Which notebook ``path`` is, or why it cannot be graded."""
    if path.suffix not in NOTEBOOK_SUFFIXES:
        return Submission(path, problem=f"not a notebook: a {path.suffix or 'file without extension'}, not .ipynb")
    if path.stat().st_size == 0:
        return Submission(path, problem="empty file")
    try:
        nb = exercises.read_notebook(path)
        found = exercises.find_exercises(nb, solved=False)
    except Exception as err:  # noqa: BLE001  (whatever a broken file raises, it is named in the gradebook)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return Submission(path, problem=f"not a readable notebook ({type(err).__name__}: {first[:200]})")
    numbers = sorted({ex.number.split(".")[0].zfill(2) for ex in found})
    if not numbers:
        return Submission(path, problem="no exercise of the course in it: is it a notebook of this course?")
    if len(numbers) > 1:
        return Submission(path, problem=f"exercises of several notebooks ({', '.join(numbers)}) in one file")
    number = numbers[0]
    if expected is not None and number != expected.zfill(2):
        return Submission(path, number, f"notebook {number}, not notebook {expected.zfill(2)} (another week's?)")
    try:
        notebooks.notebook_sources([number])
    except ValueError:
        return Submission(path, number, f"notebook {number} is not in this course")
    return Submission(path, number)


def _grade_one(sub: Submission, out: Path, options: list[str], timeout: float | None) -> dict:
    """``python -m helpers grade`` on one submission, in its own process; its JSON, or the reason it has none."""
    json_path, sheet = out / "json" / f"{sub.key}.json", out / "sheets" / f"{sub.key}.manual.csv"
    command = [sys.executable, "-m", "helpers", "grade", str(sub.path), "--json", str(json_path), "--sheet", str(sheet)]
    if written.filled(sheet):
        command += ["--manual", str(sheet)]
    try:
        done = subprocess.run(
            [*command, *options], capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"problem": f"grading took longer than {timeout:g} s"}
    (out / "logs" / f"{sub.key}.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0 or not json_path.exists():
        last = (done.stderr or done.stdout).strip().splitlines()
        return {"problem": f"the grader failed: {last[-1] if last else 'no output'} (logs/{sub.key}.txt)"}
    return json.loads(json_path.read_text(encoding="utf-8"))


def feedback(sub: Submission, result: dict) -> str:
    """The feedback a student reads: each exercise, the first failing message of a failed one, the total."""
    lines = [f"# Feedback on {sub.path.name} (notebook {sub.number})", ""]
    if "problem" in result:
        return "\n".join([*lines, f"Not graded: {result['problem']}.", ""])
    for ex in result["exercises"]:
        head = f"- **Exercise {ex['number']} · {ex['title']}** ({ex['earned']}/{ex['points']}):"
        if ex["status"] == "passed":
            lines.append(f"{head} passed.")
        elif ex["status"] == "failed":
            lines.append(f"{head} failed. {ex['message'].splitlines()[0]}")
        elif ex["status"] == "not attempted":
            lines.append(f"{head} not attempted (the stub is still in place, or the cell was left out).")
        else:
            lines.append(f"{head} not graded in this run ({ex['message']}).")
    total = f"{result['total']}/{result['possible']} auto-graded points"
    if "written_total" in result:
        total += f", {result['written_total']:g}/{result['written_possible']} written"
    elif result.get("written_possible"):
        total += f"; the written questions ({result['written_possible']} points) are graded by hand"
    return "\n".join([*lines, "", f"Total: {total}.", "", CERTIFIES, ""])


def grade_class(
    paths: list[str | Path],
    out: str | Path,
    *,
    expected: str | None = None,
    jobs: int = 1,
    options: list[str] = (),
    timeout: float | None = None,
    echo=print,
) -> Path:
    """Grade every submission in ``paths`` into ``out`` (see the module's docstring); the gradebook's path."""
    out = Path(out)
    for sub_dir in ("json", "logs", "feedback", "sheets"):
        (out / sub_dir).mkdir(parents=True, exist_ok=True)
    submissions = [identify(p, expected) for p in collect(paths)]
    keys = [s.key for s in submissions]
    for s in submissions:
        if keys.count(s.key) > 1:
            raise ValueError(f"two submissions share the name {s.key}: rename one")
    good = [s for s in submissions if not s.problem]
    echo(f"{len(submissions)} files: {len(good)} to grade, {len(submissions) - len(good)} not gradable")
    results: dict[str, dict] = {s.key: {"problem": s.problem} for s in submissions if s.problem}
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:  # each grade is a process of its own
        futures = {pool.submit(_grade_one, s, out, list(options), timeout): s for s in good}
        for future in concurrent.futures.as_completed(futures):
            sub = futures[future]
            results[sub.key] = result = future.result()
            said = result.get("problem") or f"{result['total']}/{result['possible']}"
            echo(f"  {sub.path.name}: {said}")
    for sub in submissions:
        (out / "feedback" / f"{sub.key}.md").write_text(feedback(sub, results[sub.key]), encoding="utf-8")
    return write_gradebook(out / "gradebook.csv", submissions, results)


def write_gradebook(path: Path, submissions: list[Submission], results: dict[str, dict]) -> Path:
    """One row per submission; a column per exercise of the notebooks graded, in course order."""
    numbers: list[str] = []
    for sub in submissions:
        for ex in results[sub.key].get("exercises", []):
            if ex["number"] not in numbers:
                numbers.append(ex["number"])
    numbers.sort(key=lambda n: tuple(int(x) for x in n.split(".")))
    header = ["file", "notebook", "status", *[f"exercise {n}" for n in numbers], "auto", "auto possible",
              "written", "written possible", "total", "problem"]  # fmt: skip
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for sub in submissions:
            r = results[sub.key]
            if "problem" in r:
                w.writerow([written.as_text(sub.path.name), sub.number or "", "not graded", *[""] * len(numbers), "", "", "",
                            "", "", written.as_text(r["problem"])])  # fmt: skip
                continue
            earned = {ex["number"]: ex["earned"] for ex in r["exercises"]}
            written_total = r.get("written_total")
            total = r["total"] + (written_total or 0)
            w.writerow([written.as_text(sub.path.name), sub.number, "graded", *[earned.get(n, "") for n in numbers],
                        r["total"], r["possible"], "" if written_total is None else f"{written_total:g}",
                        r["written_possible"], f"{total:g}", written.as_text(r.get("stopped", ""))])  # fmt: skip
    return path
