"""The notebook series as a whole: pairs in sync, no outputs, the shared first cell, headless runs.

Per-notebook content (each notebook's asserts and their failure cases) is tested in
tests/test_notebookNN.py.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import zipfile
from pathlib import Path

import jupytext
import nbformat
import pytest

from helpers import runtime
from helpers.course import colab, exercises, notebooks
from tests.solved import per_notebook, reads_solved, solved

ROOT = Path(__file__).resolve().parents[2]
SOURCES = notebooks.notebook_sources()
IDS = [p.stem for p in SOURCES]


def test_there_are_notebooks():
    assert SOURCES, "no notebooks/NN_*.py found"
    numbers = [p.stem[:2] for p in SOURCES]
    assert numbers == sorted(set(numbers)), f"notebook numbers must be unique and ordered: {numbers}"


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_pair_in_sync_and_without_outputs(py):
    assert notebooks.pair_problems(py) == []


def _copy_pair(py: Path, tmp_path: Path) -> Path:
    shutil.copy(py, tmp_path / py.name)
    shutil.copy(py.with_suffix(".ipynb"), tmp_path / py.with_suffix(".ipynb").name)
    return tmp_path / py.name


def test_sync_is_deterministic(tmp_path):
    """Re-syncing an unchanged notebook rewrites the same bytes, so diffs show only real edits."""
    py = _copy_pair(SOURCES[0], tmp_path)
    notebooks.sync([py])
    first = py.with_suffix(".ipynb").read_bytes()
    notebooks.sync([py])
    assert py.with_suffix(".ipynb").read_bytes() == first


def test_pair_check_catches_drift_and_outputs(tmp_path):
    """The pairing check can fail: an edited .py, an output left in the .ipynb, a missing .ipynb."""
    py = _copy_pair(SOURCES[0], tmp_path)
    assert notebooks.pair_problems(py) == []

    ipynb = py.with_suffix(".ipynb")
    nb = nbformat.read(ipynb, as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello")]
    code.execution_count = 3
    nbformat.write(nb, ipynb)
    assert any("outputs" in p for p in notebooks.pair_problems(py))

    notebooks.sync([py])
    assert notebooks.pair_problems(py) == [], "sync must strip outputs"
    py.write_text(py.read_text() + "\n# %%\nprint('a cell only the .py has')\n")
    assert any("drifted apart" in p for p in notebooks.pair_problems(py))

    ipynb.unlink()
    assert any("missing" in p for p in notebooks.pair_problems(py))


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_no_ipython_magics(py):
    """Cells must also run under plain exec (the tests do), so no % or ! lines."""
    for cell in notebooks.code_cells(py):
        for line in cell.source.splitlines():
            assert not re.match(r"^\s*[%!]", line), f"{py.name} cell {cell.index} uses a magic: {line!r}"


# ---------------------------------------------------------------------------------------------
# the doors: exercise versions where learners look first, badges that open them, solutions one click away


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_the_exercise_version_is_what_the_builder_writes(py):
    assert exercises.exercise_version_problems(py) == []


def test_the_exercise_version_check_catches_a_planted_edit_and_a_missing_file(tmp_path):
    source = SOURCES[1]
    copy = tmp_path / notebooks.exercise_version(source).name
    shutil.copy(notebooks.exercise_version(source), copy)
    assert exercises.exercise_version_problems(source, copy) == []
    nb = nbformat.read(copy, as_version=4)
    stub = next(c for c in nb.cells if "raise NotImplementedError(" in c.source)
    stub.source = stub.source.replace("raise NotImplementedError(", "return None  # (", 1)  # a hand edit
    nbformat.write(nb, copy)
    assert any("differs from what the builder writes" in p for p in exercises.exercise_version_problems(source, copy))
    copy.unlink()
    assert any("missing" in p for p in exercises.exercise_version_problems(source, copy))


def _badge_targets(markdown: str) -> list[tuple[str, str]]:
    """(service, repository path) for each Colab or Kaggle link in ``markdown``."""
    colab_links = re.findall(r"https://colab\.research\.google\.com/github/[^)\s]+", markdown)
    kaggle_links = re.findall(r"https://kaggle\.com/kernels/welcome\?src=[^)\s]+", markdown)
    return [("colab", u) for u in colab_links] + [("kaggle", u) for u in kaggle_links]


def badge_problems(markdown: str, path: str) -> list[str]:
    """Each Colab/Kaggle link in ``markdown`` must open the repository file ``path`` at the release, and both must
    be there."""
    want = {"colab": colab.open_in_colab(path), "kaggle": colab.open_in_kaggle(path)}
    found = _badge_targets(markdown)
    problems = [f"{service} link {url} does not open {path} at {colab.RELEASE}" for service, url in found
                if url != want[service]]  # fmt: skip
    problems += [f"no {s} badge for {path}" for s in want if s not in {service for service, _ in found}]
    return problems


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_each_notebook_s_badges_open_that_same_file(py):
    solved = notebooks.read_py(py).cells[0]
    assert notebooks.BADGE_TAG in solved.metadata.get("tags", [])
    name = py.with_suffix(".ipynb").name
    assert badge_problems(solved.source, notebooks.course_path(name, solved=True)) == []
    assert "**Solutions**" in solved.source
    exercise = nbformat.read(notebooks.exercise_version(py), as_version=4).cells[0]
    assert badge_problems(exercise.source, notebooks.course_path(name, solved=False)) == []
    assert "solutions/" not in exercise.source, "the exercise version never points at the solutions"


def test_the_badge_check_catches_another_release_another_file_and_a_missing_badge():
    path = "notebooks/01_attention_math.ipynb"
    good = colab.badges(path)
    assert badge_problems(good, path) == []
    assert badge_problems(good.replace(f"/blob/{colab.RELEASE}/", "/blob/main/"), path)
    assert badge_problems(good.replace("notebooks/01", "notebooks/solutions/01"), path)
    assert badge_problems(good.split(") [")[0] + ")", path) == [f"no kaggle badge for {path}"]


def test_a_drifted_badge_cell_is_caught_and_sync_rewrites_it(tmp_path):
    py = _copy_pair(SOURCES[0], tmp_path)
    text = py.read_text(encoding="utf-8")
    py.write_text(text.replace(f"/blob/{colab.RELEASE}/", "/blob/v0.0.1/"), encoding="utf-8")
    assert any("badge cell" in p for p in notebooks.pair_problems(py))
    notebooks.sync([py])
    assert notebooks.pair_problems(py) == [] and f"/blob/{colab.RELEASE}/" in py.read_text(encoding="utf-8")
    assert "v0.0.1" not in py.read_text(encoding="utf-8")


def readme_door_problems(readme: str, names: list[str]) -> list[str]:
    """README's notebook table: each row's badges open that notebook's exercise version at the release, and a
    "solutions" link opens the solved one; no badge anywhere in the README opens a solved notebook."""
    problems = []
    for name in names:
        row = next((line for line in readme.splitlines() if line.startswith("| ") and f"](notebooks/{name})" in line),
                   None)  # fmt: skip
        if row is None:
            problems.append(f"no row links notebooks/{name}")
            continue
        problems += badge_problems(row, f"notebooks/{name}")
        if f"[solutions](notebooks/solutions/{name})" not in row:
            problems.append(f"the row of {name} has no [solutions](notebooks/solutions/{name}) link")
    problems += [f"a badge opens a solved notebook: {url}" for _, url in _badge_targets(readme) if "/solutions/" in url]
    return problems


def test_readme_badges_open_the_exercise_versions_and_solutions_are_one_labelled_click_away():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    names = [notebooks.exercise_version(py).name for py in SOURCES]
    assert readme_door_problems(readme, names) == []
    # red on what the README had before: badges opening the solved notebooks (then at main), no solutions column
    name = names[0]
    before = (f"| 01 | [x](notebooks/{name}) | y | [![Open In Colab]({colab.COLAB_BADGE})]"
              f"(https://colab.research.google.com/github/transformers-by-building/course/blob/main/notebooks/{name}) |")  # fmt: skip
    assert len(readme_door_problems(before, [name])) == 3
    solved_badge = f"| 01 | [x](notebooks/{name}) | {colab.badges('notebooks/solutions/' + name)} | [solutions](notebooks/solutions/{name}) |"
    assert any("opens a solved notebook" in p for p in readme_door_problems(solved_badge, [name]))


@pytest.mark.notebook  # a Jupyter kernel runs the exercise version until its first exercise
def test_run_top_to_bottom_the_exercise_version_stops_at_its_first_exercise_with_its_message(tmp_path):
    """The learner's first run of notebook 02's exercise version: every cell before Exercise 2.1 runs, and the first
    error is the stub's NotImplementedError naming the exercise, as the learner sees it."""
    path = notebooks.exercise_version(notebooks.notebook_sources(["02"])[0])
    with pytest.raises(notebooks.NotebookFailed, match="NotImplementedError"):
        notebooks.run_notebook(path, tmp_path, quick=True)
    cells = [c for c in nbformat.read(tmp_path / path.name, as_version=4).cells if c.cell_type == "code"]
    errors = [(i, o) for i, c in enumerate(cells) for o in c.get("outputs", []) if o.output_type == "error"]
    assert len(errors) == 1, errors
    i, error = errors[0]
    assert error.ename == "NotImplementedError"
    assert (
        error.evalue == "Exercise 2.1: Positions: a fixed table, and a rotation. Replace this line with your code."
    ), error.evalue
    assert all(c.get("execution_count") for c in cells[:i]), "every cell above the first exercise ran"
    assert not any(c.get("execution_count") for c in cells[i + 1 :]), "Run all stops at the first exercise"


# ---------------------------------------------------------------------------------------------
# notebooks keep only what they teach: short code cells, no project history in the text

MAX_CELL_LINES = 60  # non-blank source lines of a code cell; a longer check belongs in helpers.course.checks
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)


def cell_size_and_history_problems(text: str) -> list[str]:
    """Code cells longer than MAX_CELL_LINES non-blank lines, and "issue NN" anywhere in
    the notebook's text (prose, comments, strings): the learner never saw the course's issues."""
    nb = jupytext.reads(text, fmt="py:percent")
    problems = []
    for k, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            lines = sum(1 for line in cell.source.splitlines() if line.strip())
            if lines > MAX_CELL_LINES:
                problems.append(f"cell {k} ({cell.source.strip().splitlines()[0][:60]!r}...) has {lines} lines")
        for hit in ISSUE_NUMBER.finditer(cell.source):
            problems.append(f"cell {k} names {hit.group(0)!r}: say what is meant instead")
    return problems


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_code_cells_are_short_and_the_text_names_no_issue(py):
    problems = cell_size_and_history_problems(py.read_text())
    assert not problems, f"{py.name}: " + "; ".join(problems)


def test_the_cell_size_and_issue_check_finds_planted_problems():
    first = "# %%\n" + "x = 1\n" * 5
    fine = first + "# %% [markdown]\n# Prose about an issue of scale.\n\n# %%\n" + "y = 2\n\n" * MAX_CELL_LINES
    assert cell_size_and_history_problems(fine) == []  # the control: 60 lines (blank ones not counted) pass
    too_long = fine + "# %%\n" + "z = 3\n" * (MAX_CELL_LINES + 1)
    assert [p for p in cell_size_and_history_problems(too_long) if "61 lines" in p]
    for planted in ("# %% [markdown]\n# Measured in issue 28.\n", "# %%\nx = 1  # see Issue #14\n"):
        assert [p for p in cell_size_and_history_problems(fine + planted) if "names" in p], planted


# ---------------------------------------------------------------------------------------------
# README and CI


def _run_it_locally_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Run it locally", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", section, flags=re.S)
    return [
        line.strip()
        for block in blocks
        for line in block.strip().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def test_readme_has_exactly_two_commands_and_ci_runs_the_test_one():
    commands = _run_it_locally_commands()
    assert len(commands) == 2, f"'Run it locally' must hold exactly two commands, found {commands}"
    main_job, tests = commands
    assert "pip install" in main_job and "run-notebooks" in main_job
    assert "pip install" in tests and "pytest" in tests, "the test command installs, then runs pytest"
    assert "ruff check" in tests and "ruff format --check" in tests, "CI lints and checks formatting first"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "Run it locally" in ci and "README.md" in ci, ".ci/run must take its command from the README"


# ---------------------------------------------------------------------------------------------
# every notebook, solved, once per test run (tests.solved): what they save, and how a headless kernel shows it


def _notebook_figures(reports: Path, py: Path) -> dict[str, dict]:
    """The figures' metadata notebook ``py`` saved (other tests save figures of their own names beside them)."""
    return {p.stem: json.loads(p.read_text()) for p in (reports / "figures").glob(f"{py.stem[:2]}_*.json")}


def _solved_reports(py: Path) -> Path:
    """The reports folder after notebook ``py`` ran, solved, in this test run (once: tests.solved)."""
    solved(py.stem[:2])
    return runtime.reports_dir()


@pytest.mark.notebook
@pytest.mark.parametrize("py", per_notebook(SOURCES, number_of=lambda py: py.stem[:2], ids=IDS))
def test_every_notebook_saves_its_figures_as_pdf_and_png(py):
    figures = _solved_reports(py) / "figures"
    prefix = py.stem[:2] + "_"
    pdfs = {p.stem for p in figures.glob(prefix + "*.pdf")}
    pngs = {p.stem for p in figures.glob(prefix + "*.png")}
    assert pdfs, f"{py.stem} saved no figure to {figures}"
    assert pdfs == pngs, f"every figure needs both PDF and PNG: {sorted(pdfs ^ pngs)}"


def _saved_names(py: Path) -> set[str]:
    """The figure names a notebook's source saves (the string right after save_figure(fig, / save_then_explore(f,)."""
    return set(re.findall(r'save_(?:figure|then_explore)\(\s*\w+,\s*"(\d\d_[a-z0-9_]+)"', py.read_text()))


def test_the_notebooks_save_at_least_twenty_figures():
    assert len(set().union(*map(_saved_names, SOURCES))) >= 20


@pytest.mark.notebook
@pytest.mark.parametrize("py", per_notebook(SOURCES, number_of=lambda py: py.stem[:2], ids=IDS))
def test_every_saved_figure_is_titled_captioned_and_large_enough(py):
    from helpers.course.plotting import MIN_HEIGHT_IN, MIN_WIDTH_IN

    expected = _saved_names(py)
    metas = _notebook_figures(_solved_reports(py), py)
    assert set(metas) == expected, f"figures without metadata, or unexpected ones: {sorted(set(metas) ^ expected)}"
    for name, meta in metas.items():
        assert meta["title"], f"{name} has no title"
        assert meta["question"].endswith("?"), f"{name}: the question it answers, as a question"
        assert len(meta["caption"]) > 40, f"{name}: a caption that says what is shown"
        width, height = meta["size_inches"]
        assert width >= MIN_WIDTH_IN and height >= MIN_HEIGHT_IN, f"{name} is {width} x {height} in"


@pytest.mark.notebook
def test_in_a_headless_kernel_each_figure_is_one_png_output_and_no_widget_is_built(tmp_path, monkeypatch):
    """What run-notebooks does with a figure cell, a slider cell (save_then_explore) and a cell that ends on the
    figure: one PNG output each (the static default figure, not widget state, not twice), no widget view."""
    monkeypatch.setenv("REPORTS_DIR", str(tmp_path / "reports"))
    cells = [
        "import matplotlib.pyplot as plt\nfrom helpers.course.plotting import save_figure, save_then_explore",
        "def draw(scale=1.0):\n    fig, ax = plt.subplots(figsize=(6, 4))\n    ax.plot([0, 1], [0, scale])\n"
        "    ax.set_title('a line')\n    return fig",
        "fig = draw()\nsave_figure(fig, '99_line', question='Does a figure become one PNG output?',\n"
        "            caption='A straight line, drawn to check that a saved figure is shown exactly once.')",
        "save_then_explore(draw, '99_slider', question='Does a slider cell show one static figure?',\n"
        "                  caption='The same line with a slider, which a headless kernel shows as its default.',\n"
        "                  scale=(0.5, 2.0, 0.5, 1.0))",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    path = tmp_path / "99_demo.ipynb"
    nbformat.write(nb, path)
    done = nbformat.read(notebooks.run_notebook(path, tmp_path / "executed"), as_version=4)
    for cell in done.cells[2:]:
        images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        assert len(images) == 1, f"{len(images)} PNG outputs from {cell.source.splitlines()[0]!r}"
        if "save_then_explore(" in cell.source:
            assert not [o for o in cell.outputs if o.get("output_type") == "execute_result"], "its value shown too"
        assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.outputs)


@pytest.mark.notebook
@pytest.mark.parametrize("py", per_notebook(SOURCES, number_of=lambda py: py.stem[:2], ids=IDS))
def test_quick_mode_figures_carry_the_mark(py):
    metas = list(_notebook_figures(_solved_reports(py), py).values())
    assert metas and all(m["quick_mode"] is True for m in metas)


@pytest.mark.notebook
@reads_solved("03")
def test_report_command_writes_the_zip_and_an_index_listing_every_figure_once(capsys):
    executed = _solved_reports(next(p for p in SOURCES if p.stem.startswith("03_")))  # figures and metrics
    from helpers import cli
    from helpers.course import report

    assert cli.main(["report"]) == 0
    said = capsys.readouterr().out
    assert "figures, " in said and "executed notebooks in" in said, said
    index = (executed / "index.md").read_text()
    names = sorted(p.stem for p in (executed / "figures").glob("*.pdf"))
    for name in names:
        assert index.count(f"## {name}: ") == 1, f"{name} should be listed once"
        meta = json.loads((executed / "figures" / f"{name}.json").read_text())
        assert meta["caption"] in index
        assert f"\\includegraphics[width=\\linewidth]{{figures/{name}.pdf}}" in index
    with zipfile.ZipFile(executed / "report.zip") as z:
        inside = set(z.namelist())
    assert {"index.md", "figures.tex"} <= inside
    assert all(f"figures/{n}.pdf" in inside and f"figures/{n}.png" in inside for n in names)
    assert any(n.startswith("metrics/03_") for n in inside), "the metrics JSON files are in the zip too"
    tex = (executed / "figures.tex").read_text()
    assert tex.count("\\begin{figure}") == len(names)
    assert report.latex_text("a_b 50% $\\sqrt{d_k}$") == "a\\_b 50\\% $\\sqrt{d_k}$"


def names_only_answers_define(cells) -> set[str]:
    """The names a code cell outside the model answers reads that only answer cells define: the student copy,
    which drops the answer cells, would fail on them."""
    in_answers, elsewhere, read_elsewhere = set(), set(), set()
    for cell in cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        stored |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        stored |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}  # a parameter is the cell's own name
        if exercises.ANSWER in exercises.tags(cell):
            in_answers |= stored
        else:
            elsewhere |= stored
            read_elsewhere |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return (in_answers - elsewhere) & read_elsewhere


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_no_cell_outside_the_model_answers_reads_a_name_only_they_define(py):
    """The student copy drops the answer cells; it must still run."""
    assert not names_only_answers_define(notebooks.read_py(py).cells)


def test_the_answer_name_check_finds_a_cell_that_reads_an_answers_name():
    planted = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("def read(rows):\n    return rows", metadata={"tags": [exercises.ANSWER]}),
            nbformat.v4.new_code_cell("floor = 1.0", metadata={"tags": [exercises.ANSWER]}),
            nbformat.v4.new_code_cell("print(read([floor]))"),
        ]
    )
    assert names_only_answers_define(planted.cells) == {"read", "floor"}
    planted.cells[1].metadata["tags"] = []  # defined outside the answers too: the copy still runs
    assert names_only_answers_define(planted.cells) == {"read"}
