"""Quick mode, seeding, devices and report folders: the plumbing every notebook shares."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import torch

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def quick_mode(default: bool = False) -> bool:
    """True when the environment asks for the small, fast run (``QUICK=1``).

    Quick mode shrinks sizes and steps but runs every code path; it is what CI, the tests and
    the headless runner use. Full mode is the Colab T4 run.
    """
    raw = os.environ.get("QUICK")
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"QUICK={raw!r} is not understood: use QUICK=1 for the quick run or QUICK=0 for the full run.")


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and every GPU) so runs repeat exactly."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def pick_device(prefer: str | None = None) -> torch.device:
    """The device to train on: ``prefer`` if given, else CUDA when present, else CPU."""
    if prefer:
        return torch.device(prefer)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def repo_root() -> Path | None:
    """The checkout this package sits in, or None when installed elsewhere (e.g. pip on Colab)."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "notebooks").is_dir() and (here / "pyproject.toml").is_file() else None


def reports_dir() -> Path:
    """Where generated output goes: ``$REPORTS_DIR``, else ``<repo>/reports``, else ``./reports``."""
    if os.environ.get("REPORTS_DIR"):
        return Path(os.environ["REPORTS_DIR"])
    root = repo_root()
    return (root / "reports") if root is not None else Path.cwd() / "reports"


def figures_dir() -> Path:
    path = reports_dir() / "figures"
    path.mkdir(parents=True, exist_ok=True)
    return path


def metrics_dir() -> Path:
    path = reports_dir() / "metrics"
    path.mkdir(parents=True, exist_ok=True)
    return path
