"""Tests of the course notebooks, one module per notebook (the catalogues of wrong answers beside them)."""

from pathlib import Path

from helpers.course import exercises
from helpers.course.notebooks import read_py


def student_cells(solved_py: Path) -> list[str]:
    """The sources of the student copy's cells, as the course builds it from the solved notebook ``solved_py``."""
    return [cell.source for cell in exercises.student_notebook(read_py(solved_py)).cells]
