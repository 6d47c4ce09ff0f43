"""Colab detection and set-up, Google Drive, and the accelerator report.

Every notebook's first code cell calls :func:`setup`. On Colab it installs only what the
runtime lacks (torch is never reinstalled: Colab's build matches its GPU driver) and reports
the accelerator; elsewhere it only reports.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

# The one place the repository address is set. Every notebook's first cell pip-installs
# `helpers` from it on Colab; tests/test_notebooks.py fails if a notebook carries another.
# A fork changes it here and in the notebooks' first cell (the test lists the ones to fix).
REPO_URL = "https://github.com/transformers-by-building/course"

# import name -> pip name, for what the notebooks need beyond torch
REQUIRED = {
    "transformers": "transformers",
    "datasets": "datasets",
    "sentencepiece": "sentencepiece",
    "sacrebleu": "sacrebleu",
    "safetensors": "safetensors",
    "matplotlib": "matplotlib",
    "ipywidgets": "ipywidgets",
    "tqdm": "tqdm",
}


def in_colab() -> bool:
    if "google.colab" in sys.modules:
        return True
    try:  # find_spec imports the parent package, and raises when there is no `google` at all
        return importlib.util.find_spec("google.colab") is not None
    except ModuleNotFoundError:
        return False


def missing_packages() -> list[str]:
    """pip names of required packages that are not importable (torch excluded on purpose)."""
    return [pip for mod, pip in REQUIRED.items() if importlib.util.find_spec(mod) is None]


@dataclass
class Accelerator:
    device: str  # "cuda" or "cpu"
    name: str
    memory_gb: float | None
    fp16_native: bool
    bf16_native: bool
    torch_version: str

    def describe(self) -> str:
        mem = f", {self.memory_gb:.1f} GB" if self.memory_gb else ""
        return (
            f"{self.name}{mem} | torch {self.torch_version} | "
            f"fp16 native: {'yes' if self.fp16_native else 'no'} | bf16 native: {'yes' if self.bf16_native else 'no'}"
        )

    def as_dict(self) -> dict:
        return asdict(self)


def accelerator() -> Accelerator:
    """What we are running on. A T4 (compute capability 7.5) has fast fp16 but no native bf16."""
    import torch

    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        major = props.major
        return Accelerator(
            device="cuda",
            name=props.name,
            memory_gb=props.total_memory / 2**30,
            fp16_native=major >= 7,  # tensor cores from Volta on
            bf16_native=major >= 8,  # Ampere and later
            torch_version=torch.__version__,
        )
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    return Accelerator(
        device="cpu",
        name=f"CPU ({cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads)",
        memory_gb=None,
        fp16_native=False,
        bf16_native=False,
        torch_version=torch.__version__,
    )


def setup(quiet: bool = False) -> Accelerator:
    """Install what Colab lacks (never torch), then print and return the accelerator."""
    if in_colab():
        missing = missing_packages()
        if missing:
            print("Installing what this Colab runtime lacks:", ", ".join(missing))
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
    acc = accelerator()
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
    from google.colab import drive  # type: ignore

    drive.mount(mount_point)
    folder = Path(mount_point) / "MyDrive" / "transformers-by-building"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
