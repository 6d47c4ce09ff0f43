"""Colab detection and set-up, Google Drive, and the accelerator report.

Every notebook's first code cell calls :func:`setup`. On Colab it installs only what the
runtime lacks (torch is never reinstalled: Colab's build matches its GPU driver) and reports
the accelerator; elsewhere it only reports.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from .. import runtime

# The one place the repository address and the release are set. Every notebook's first cell installs
# `helpers` on Colab from COURSE_PIN (helpers.course.bootstrap.ensure_course, copied into the cell), so a student
# who opens a notebook next month gets the package these notebooks were written for, not whatever `main`
# is then. tests/course/test_bootstrap.py fails if a notebook carries another address or release, and
# tests/course/test_colab.py if the release is not pyproject.toml's version. A fork, or a new release, changes these two lines, then runs
# `python -m helpers sync-notebooks` (which rewrites the first cells and the badges), and tags the commit v<version>.
REPO_URL = "https://github.com/transformers-by-building/course"
RELEASE = "v0.3.0"
COURSE_PIN = f"git+{REPO_URL}@{RELEASE}"
DRIVE_COPY = "/content/drive/MyDrive/transformers-by-building/course"  # a folder or .zip of the repository

PACKAGE = "transformers-by-building"  # the distribution name in pyproject.toml

# The badges open a notebook at the release, like the install: the file a learner opens and the package its first
# cell installs come from the same tag (README's table and each notebook's badge cell, rewritten by sync-notebooks).
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
KAGGLE_BADGE = "https://kaggle.com/static/images/open-in-kaggle.svg"


def github_url(path: str) -> str:
    """The repository file ``path`` (``notebooks/01_attention_math.ipynb``) on GitHub, at the release."""
    return f"{REPO_URL}/blob/{RELEASE}/{path}"


def open_in_colab(path: str) -> str:
    return github_url(path).replace("https://github.com/", "https://colab.research.google.com/github/", 1)


def open_in_kaggle(path: str) -> str:
    return f"https://kaggle.com/kernels/welcome?src={github_url(path)}"


def badges(path: str) -> str:
    """Markdown for the Open-in-Colab and Open-in-Kaggle badges of the repository file ``path``."""
    return f"[![Open In Colab]({COLAB_BADGE})]({open_in_colab(path)}) [![Open In Kaggle]({KAGGLE_BADGE})]({open_in_kaggle(path)})"


def required_packages() -> list[str]:
    """What the notebooks need beyond torch: pyproject.toml's ``dependencies``, read from the installed package.

    pyproject.toml is the one dependency list (requirements.txt installs it with the torch pin). torch is
    left out on purpose: Colab's build matches its GPU driver and must never be replaced.
    """
    try:
        requirements = metadata.requires(PACKAGE) or []
    except metadata.PackageNotFoundError:  # a bare checkout on sys.path: read the file itself
        root = runtime.repo_root()
        if root is None:
            raise RuntimeError(f"{PACKAGE} is not installed: run pip install -e . in the repository.") from None
        requirements = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    names = [re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0] for r in requirements if "extra ==" not in r]
    return [n for n in names if n.lower() != "torch"]


def in_colab() -> bool:
    if "google.colab" in sys.modules:
        return True
    try:  # find_spec imports the parent package, and raises when there is no `google` at all
        return importlib.util.find_spec("google.colab") is not None
    except ModuleNotFoundError:
        return False


def missing_packages() -> list[str]:
    """pip names of required packages that are not importable (torch excluded on purpose)."""
    # every dependency imports under its pip name (a test checks the list against pyproject.toml)
    return [name for name in required_packages() if importlib.util.find_spec(name) is None]


def setup(quiet: bool = False) -> runtime.Accelerator:
    """Install what Colab lacks (never torch), then print and return the accelerator."""
    if in_colab():
        missing = missing_packages()
        if missing:
            print("Installing what this Colab runtime lacks:", ", ".join(missing))
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
    acc = runtime.accelerator()
    if not quiet:
        print("Running on:", acc.describe())
        if acc.device == "cpu" and in_colab():
            print("Tip: Runtime > Change runtime type > T4 GPU, then run all cells again.")
    return acc


def mount_drive(ask: bool = True, mount_point: str = "/content/drive") -> Path | None:
    """Mount Google Drive for checkpoints and caches when on Colab and the user agrees.

    Returns the folder to keep course files in (``MyDrive/transformers-by-building``), or None when
    not on Colab, or when the user declines: callers then fall back to a local folder.
    """
    if not in_colab():
        return None
    if ask:
        try:
            answer = input("Mount Google Drive so checkpoints survive a disconnect? [Y/n] ").strip().lower()
        except EOFError:
            answer = "n"
        if answer not in ("", "y", "yes"):
            print("Not mounting Drive: checkpoints stay on this runtime and are lost when it is recycled.")
            return None
    # optional (Colab only)
    from google.colab import drive  # type: ignore

    drive.mount(mount_point)
    folder = Path(mount_point) / "MyDrive" / "transformers-by-building"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
