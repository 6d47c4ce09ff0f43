"""Every ``--help`` works, and the README's notebook table renders as one table.

The subcommands are read from the parser object itself (argparse's ``_SubParsersAction``), so a command added
to :func:`helpers.cli.build_parser` is covered without touching this file. Each check is shown to fail on a
planted mistake: a help string with a bare ``%`` (argparse formats help with ``%``: it crashes ``--help``
only, never a normal run), and a blank line inside the table (Markdown then renders two tables, the second
as plain text).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cli

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------- --help


def command_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """``()`` for the parser itself, then the argv prefix of every subcommand, nested ones included."""
    paths = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths += command_paths(sub, (*path, name))
    return paths


def help_failures(parser: argparse.ArgumentParser) -> dict[str, str]:
    """``--help`` of the parser and of every subcommand, in-process: ``{command: what went wrong}``, empty if
    every one exits 0 with a usage line that names its command."""
    failures = {}
    for path in command_paths(parser):
        label = " ".join(path) or "(top level)"
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                parser.parse_args([*path, "--help"])
            failures[label] = "--help did not exit"
            continue
        except SystemExit as stop:
            code = stop.code
        except Exception as err:  # noqa: BLE001 (argparse's own formatting errors: ValueError, TypeError, KeyError)
            failures[label] = f"--help crashed: {type(err).__name__}: {err}"
            continue
        text = out.getvalue()
        usage = text.split("\n\n", 1)[0]
        if code not in (0, None):
            failures[label] = f"exit code {code}"
        elif not usage.startswith(f"usage: {' '.join((parser.prog, *path))}"):
            failures[label] = f"the usage does not name the command: {usage[:120]!r}"
    return failures


def test_every_help_works_and_names_its_command():
    parser = cli.build_parser()
    paths = command_paths(parser)
    assert len(paths) > 10 and ("train",) in paths and ("finetune",) in paths, paths
    assert help_failures(parser) == {}


def test_help_check_catches_a_bare_percent_and_a_wrong_usage():
    parser = argparse.ArgumentParser(prog="python -m helpers")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fine", help="100%% fine").add_argument("--share", help="a share, in %%")
    sub.add_parser("broken").add_argument("--share", help="keep 50% of the pairs")
    sub.add_parser("renamed", prog="something else")
    failures = help_failures(parser)
    assert set(failures) == {"broken", "renamed"}, failures
    assert "crashed" in failures["broken"] and "does not name" in failures["renamed"]


def test_help_runs_as_a_command():
    proc = subprocess.run(
        [sys.executable, "-m", "helpers", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m helpers")
    for (name,) in [p for p in command_paths(cli.build_parser()) if len(p) == 1]:
        assert name in proc.stdout, name


# ---------------------------------------------------------------------------------------------- the README's table


def notebook_table_problems(readme: str, notebooks: list[str]) -> list[str]:
    """What keeps the table under ``## The notebooks`` from rendering as one table with a row per notebook:
    the header, the separator, then one row per notebook, contiguous, each with the header's number of cells."""
    section = readme.split("\n## The notebooks\n", 1)
    if len(section) < 2:
        return ["no '## The notebooks' section"]
    lines = section[1].split("\n## ", 1)[0].strip("\n").split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if start is None:
        return ["no table in the section"]
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    rest = [line for line in lines[start + len(table) :] if line.startswith("|")]

    def cells(row: str) -> list[str]:
        return [c.strip() for c in row.strip().strip("|").split("|")]

    problems = []
    if rest:
        problems.append(f"the table is split: {len(rest)} row(s) after a line that is not a row, from {rest[0][:60]!r}")
    if len(table) < 2 or not all(re.fullmatch(r":?-+:?", c) for c in cells(table[1])):
        return [*problems, "no separator row under the header"]
    width = len(cells(table[0]))
    for row in table[1:]:
        if len(cells(row)) != width:
            problems.append(f"{len(cells(row))} cells instead of {width}: {row[:60]!r}")
    linked = [m for row in table[2:] for m in re.findall(r"\]\(notebooks/([^)]+\.ipynb)\)", row.split("|")[2])]
    if linked != sorted(notebooks):
        problems.append(f"rows name {linked}, the notebooks are {sorted(notebooks)}")
    if len(table) - 2 != len(notebooks):
        problems.append(f"{len(table) - 2} rows for {len(notebooks)} notebooks")
    return problems


def _readme_and_notebooks() -> tuple[str, list[str]]:
    return (ROOT / "README.md").read_text(encoding="utf-8"), [p.name for p in (ROOT / "notebooks").glob("*.ipynb")]


def test_readme_notebook_table_is_one_table_with_a_row_per_notebook():
    readme, notebooks = _readme_and_notebooks()
    assert len(notebooks) >= 6
    assert notebook_table_problems(readme, notebooks) == []


@pytest.mark.parametrize(
    "mutation",
    ["blank line inside", "prose line inside", "a cell missing", "a notebook without a row", "no separator"],
)
def test_readme_table_check_catches_a_broken_table(mutation):
    readme, notebooks = _readme_and_notebooks()
    rows = [line for line in readme.split("\n## The notebooks\n", 1)[1].split("\n") if line.startswith("| 0")]
    third = rows[2]
    broken = {
        "blank line inside": readme.replace(third, "\n" + third),
        "prose line inside": readme.replace(third, "(see below)\n" + third),
        "a cell missing": readme.replace(third, third.rsplit("|", 2)[0] + "|"),
        "a notebook without a row": readme,
        "no separator": readme.replace(
            "\n|---|----------|-------------|-------|--------|---------------------|", "", 1
        ),
    }[mutation]
    names = [*notebooks, "07_new.ipynb"] if mutation == "a notebook without a row" else notebooks
    assert broken != readme or mutation == "a notebook without a row"
    assert notebook_table_problems(broken, names), mutation
