"""The notebook series as a whole: pairs in sync, no outputs, the shared first cell, headless runs.

Per-notebook content (each notebook's asserts and their failure cases) is tested in
tests/test_notebookNN.py.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from helpers import colab, notebooks, runtime

ROOT = Path(__file__).resolve().parent.parent
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
def test_first_code_cell_is_the_shared_setup(py):
    """Tagged `parameters`, reads QUICK from the environment, installs helpers from REPO_URL on Colab only."""
    first = notebooks.code_cells(py)[0]
    assert "parameters" in first.tags, "the first code cell must carry the papermill tag `parameters`"
    assert "QUICK = runtime.quick_mode()" in first.source
    assert "colab.setup()" in first.source
    assert 'if "google.colab" in sys.modules' in first.source, "install only on Colab"
    urls = re.findall(r"git\+(https://[^\"']+)", first.source)
    assert urls == [colab.REPO_URL], (
        f"{py.name}: the install URL {urls} differs from helpers.colab.REPO_URL ({colab.REPO_URL}); "
        "the repository address is set once, there"
    )
    assert "torch" not in first.source.split("pip")[-1].split("\n")[0], "never reinstall torch on Colab"


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_no_ipython_magics(py):
    """Cells must also run under plain exec (the tests do), so no % or ! lines."""
    for cell in notebooks.code_cells(py):
        for line in cell.source.splitlines():
            assert not re.match(r"^\s*[%!]", line), f"{py.name} cell {cell.index} uses a magic: {line!r}"


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_colab_badge_in_readme(py):
    readme = (ROOT / "README.md").read_text()
    assert f"notebooks/{py.with_suffix('.ipynb').name}" in readme, f"README lacks an Open-in-Colab badge for {py.name}"


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


def test_quick_mode_parsing(monkeypatch):
    monkeypatch.setenv("QUICK", "1")
    assert runtime.quick_mode() is True
    monkeypatch.setenv("QUICK", "0")
    assert runtime.quick_mode() is False
    monkeypatch.delenv("QUICK")
    assert runtime.quick_mode() is False
    monkeypatch.setenv("QUICK", "maybe")
    with pytest.raises(ValueError, match="QUICK=1"):
        runtime.quick_mode()


def test_save_figure_writes_pdf_and_png(tmp_path):
    import matplotlib.pyplot as plt

    from helpers.plotting import save_figure

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    pdf, png = save_figure(fig, "99_test_line", folder=tmp_path)
    assert pdf.read_bytes()[:4] == b"%PDF" and png.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="01_copying_sharpness"):
        save_figure(fig, "Bad Name.png", folder=tmp_path)
    plt.close(fig)


def test_interactive_headless_calls_once_with_defaults():
    from helpers.plotting import interactive

    calls = []
    interactive(lambda beta, n: calls.append((beta, n)), beta=(0.0, 10.0, 0.5, 3.0), n=(2, 64, 1, 8))
    assert calls == [(3.0, 8)]
    with pytest.raises(ValueError, match="min, max, step, default"):
        interactive(lambda beta: None, beta=(0, 1))


def test_accelerator_report_on_cpu():
    acc = colab.setup(quiet=True)
    import torch

    if not torch.cuda.is_available():
        assert acc.device == "cpu" and not acc.fp16_native
        assert acc.bf16_native == runtime.cpu_has_native_bf16(), "one bf16 check for the report and the presets"
    assert "bf16 native" in acc.describe()
    json.dumps(acc.as_dict())


# ---------------------------------------------------------------------------------------------
# every notebook, headless, in quick mode (what `python -m helpers run-notebooks` does)


@pytest.mark.notebook
@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_notebook_runs_headless_in_quick_mode(py, tmp_path):
    out = notebooks.run_notebook(py.with_suffix(".ipynb"), tmp_path / "executed", quick=True)
    nb = nbformat.read(out, as_version=4)
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
    figures = runtime.figures_dir()
    prefix = py.stem[:2] + "_"
    pdfs = {p.stem for p in figures.glob(prefix + "*.pdf")}
    pngs = {p.stem for p in figures.glob(prefix + "*.png")}
    assert pdfs, f"{py.stem} saved no figure to {figures}"
    assert pdfs == pngs, f"every figure needs both PDF and PNG: {sorted(pdfs ^ pngs)}"
