"""The package itself: one dependency list, what the notebooks import, and the layout of helpers/."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

from helpers import colab

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> list[str]:
    return [re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in requirements]


def test_colab_installs_exactly_pyprojects_dependencies_except_torch():
    wanted = [n for n in _names(_pyproject()["project"]["dependencies"]) if n != "torch"]
    assert "torch" in _names(_pyproject()["project"]["dependencies"])
    assert colab.required_packages() == wanted, "helpers.colab must read pyproject.toml's list, torch left out"


def test_every_dependency_imports_under_its_pip_name():
    # colab.missing_packages looks modules up by pip name: a package such as scikit-learn (import sklearn)
    # would need a mapping there, and this test would say so
    for name in colab.required_packages():
        assert importlib.util.find_spec(name) is not None, f"{name} does not import as {name!r}"


def test_requirements_txt_adds_only_the_torch_pin_to_the_package():
    lines = [ln.strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    assert lines == ["torch==2.13.0", "-e .[dev]"], f"requirements.txt lists packages of its own: {lines}"
    dev = _names(_pyproject()["project"]["optional-dependencies"]["dev"])
    assert {"pytest", "ruff", "nbclient", "jupytext"} <= set(dev)


def test_helpers_modules_stay_readable():
    """One concern per module, each short enough to read top to bottom (the bundled data excepted)."""
    sizes = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "helpers").glob("*.py")}
    too_long = {name: n for name, n in sizes.items() if n > 650}
    assert not too_long, f"split these modules by concern: {too_long}"


def test_readme_describes_every_helpers_module():
    """The README's module table is how a newcomer finds their way: a new module without a row is lost."""
    readme = (ROOT / "README.md").read_text()
    modules = {p.stem for p in (ROOT / "helpers").glob("*.py") if not p.stem.startswith("__")}
    missing = sorted(m for m in modules if f"| `{m}` |" not in readme)
    assert not missing, f"add a row to README.md's table of helpers modules for: {missing}"
