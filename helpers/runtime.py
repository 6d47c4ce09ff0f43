"""Quick mode, seeding, the device and its number formats, report folders: the plumbing every notebook shares."""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

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


def environment_snapshot(*keys: str) -> dict[str, str | None]:
    """The environment variables ``keys`` as they are now (None: unset), for :func:`restore_environment`."""
    return {key: os.environ.get(key) for key in keys}


def restore_environment(snapshot: dict[str, str | None]) -> None:
    """Put the variables of ``snapshot`` back as they were: the value, or unset."""
    for key, value in snapshot.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and every GPU) so runs repeat exactly."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# ----------------------------------------------------------------------------------------------
# the device and its number formats: decided here, once, for every notebook and command


MPS_FALLBACK = "PYTORCH_ENABLE_MPS_FALLBACK"


def mps_available() -> bool:
    """True on a Mac whose PyTorch can use the Apple GPU (Metal Performance Shaders)."""
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def pick_device(prefer: str | None = None) -> torch.device:
    """The device to train on: ``prefer`` if given, else CUDA, else Apple's GPU (MPS), else the CPU.

    On MPS an operation PyTorch has no Metal kernel for runs on the CPU instead of failing (``PYTORCH_ENABLE_MPS_FALLBACK``
    is set, with a note saying so once). Untried on real Apple hardware: the tests fake its availability.
    """
    if prefer:
        device = torch.device(prefer)
    elif torch.cuda.is_available():
        device = torch.device("cuda")
    elif mps_available():
        device = torch.device("mps")
    else:
        device = torch.device("cpu")
    if device.type == "mps" and os.environ.get(MPS_FALLBACK) != "1":
        os.environ[MPS_FALLBACK] = "1"
        print(
            f"Apple GPU (MPS): operations without a Metal kernel fall back to the CPU ({MPS_FALLBACK}=1); training "
            "runs in fp32 there.",
            flush=True,
        )
    return device


CPU_BF16_VARIABLE = "COURSE_CPU_BF16"


def cpu_has_native_bf16() -> bool:
    """True when this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX), where bf16 autocast pays off.

    ``COURSE_CPU_BF16=1`` (or ``0``) answers yes (or no) whatever the CPU has, so that every choice made from this
    answer (``bf16_if_native``, Muon's iteration format) can be run both ways on any machine: the tests do, and a
    subprocess they start inherits the answer. Unset or ``auto``: the CPU is asked.
    """
    forced = cpu_bf16_setting()
    return cpu_detects_bf16() if forced is None else forced


def cpu_bf16_setting() -> bool | None:
    """What ``COURSE_CPU_BF16`` asks for: True, False, or None (unset, empty or ``auto``: ask the CPU)."""
    raw = os.environ.get(CPU_BF16_VARIABLE, "auto").strip().lower()
    if raw in ("", "auto"):
        return None
    if raw in _TRUE or raw in _FALSE:
        return raw in _TRUE
    raise ValueError(
        f"{CPU_BF16_VARIABLE}={os.environ[CPU_BF16_VARIABLE]!r} is not understood: use 1 (treat this CPU as having "
        "bf16 instructions), 0 (as lacking them) or auto (ask the CPU), or unset it."
    )


def cpu_bf16_forced(device: str = "cpu") -> str:
    """ " (COURSE_CPU_BF16=1)" while the variable overrides the CPU's answer, for what describes the machine; else ""."""
    if device != "cpu" or cpu_bf16_setting() is None:
        return ""
    return f" ({CPU_BF16_VARIABLE}={os.environ[CPU_BF16_VARIABLE].strip()})"


def cpu_detects_bf16() -> bool:
    """What the CPU itself says: AVX512-BF16 or AMX tiles, as torch reads them (no override)."""
    cpu = getattr(torch, "cpu", None)
    for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        check = getattr(cpu, name, None)
        try:
            if check is not None and check():
                return True
        except Exception:  # private helpers: absent or failing on some builds
            pass
    return False


def gpu_has_native_bf16(device: torch.device | str = "cuda") -> bool:
    """Ampere (compute capability 8.0) and later. A T4 (7.5) reports bf16 as "supported" through emulation."""
    major, _ = torch.cuda.get_device_capability(torch.device(device))
    return major >= 8


PRECISIONS = ("auto", "bf16_if_native", "fp32", "bf16", "fp16")


def resolve_precision(device: torch.device | str, precision: str = "auto") -> str:
    """ "fp32", "bf16" or "fp16": what ``precision`` means on this device.

    ``auto``: fp16 (with a GradScaler) on a GPU without native bf16 such as a T4, bf16 on Ampere and later,
    fp32 on CPU. ``bf16_if_native``: the same on CUDA; on CPU, bf16 when the CPU has bf16 instructions.
    ``fp16`` is honoured on a CPU too (slowly: no fp16 hardware there), so that the T4's code path, autocast
    to fp16 with a gradient scaler, runs in the tests on a machine without a GPU.
    """
    device = torch.device(device)
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is not known: use one of {', '.join(PRECISIONS)}.")
    if precision in ("fp32", "bf16", "fp16"):
        return precision
    if device.type == "mps":  # no lower format proven on Apple's GPU here: fp32 until someone measures one
        return "fp32"
    if device.type != "cuda":
        return "bf16" if precision == "bf16_if_native" and cpu_has_native_bf16() else "fp32"
    return "bf16" if gpu_has_native_bf16(device) else "fp16"


SDPA_BACKENDS = ("flash", "efficient", "math")


def sdpa_backend(capability: tuple[int, int], head_size: int, dtype: torch.dtype, *, masked: bool = True) -> str:
    """Which kernel ``F.scaled_dot_product_attention`` runs on a CUDA GPU of compute ``capability``.

    "flash" (FlashAttention-2): compute capability 8.0 or later, fp16 or bf16, a head size divisible by 8 and at most
    256, and no ``attn_mask`` (causal via ``is_causal`` only). "efficient" (memory-efficient attention, xFormers'):
    from 5.0 (so a T4, 7.5), fp16, bf16 (8.0 on) or fp32, a mask allowed, rows of the head aligned to 16 bytes (head
    size divisible by 8 in fp16/bf16, by 4 in fp32). Otherwise "math": the attention written out, the whole
    (T, T) score matrix in memory. ``masked``: an explicit mask is passed, as in training, where the prefix-LM mask
    (``<bos> French <sep>`` read both ways) goes to the kernel, so an A100 trains with "efficient" and "flash"
    serves masks-free causal calls only. Among these three the dispatcher's order is flash, then efficient, then
    math. Not modelled: cuDNN's fused attention, which recent PyTorch tries first on Hopper (capability 9.x): on an
    H200 with torch 2.11 the ``t4`` preset's masked training calls ran on it (a profile, benchmarks/RESULTS.md,
    issue 51, item 7), so there "efficient" is the fallback; :meth:`Accelerator.describe` says so.
    """
    major, minor = capability
    if dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return "math"
    half = dtype in (torch.float16, torch.bfloat16)
    if (major, minor) >= (8, 0) and half and head_size % 8 == 0 and head_size <= 256 and not masked:
        return "flash"
    bf16_ok = dtype != torch.bfloat16 or (major, minor) >= (8, 0)
    if (major, minor) >= (5, 0) and bf16_ok and head_size % (8 if half else 4) == 0:
        return "efficient"
    return "math"


def precision_dtype(precision: str) -> torch.dtype:
    """torch's dtype for a resolved precision: "fp32", "bf16" or "fp16"."""
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


@dataclass
class Accelerator:
    device: str  # "cuda", "mps" or "cpu"
    name: str
    memory_gb: float | None
    fp16_native: bool
    bf16_native: bool
    torch_version: str
    capability: tuple[int, int] | None = None  # CUDA compute capability (7.5 for a T4), None on a CPU

    def attention_kernels(self, head_size: int = 64) -> str | None:
        """'training: efficient, causal: flash' and the like: the SDPA kernels of ``auto`` precision, or None on a CPU."""
        if self.capability is None:
            return None
        dtype = torch.bfloat16 if self.bf16_native else torch.float16
        masked = sdpa_backend(self.capability, head_size, dtype, masked=True)
        causal = sdpa_backend(self.capability, head_size, dtype, masked=False)
        hopper = " (PyTorch may run cuDNN's attention first on this GPU)" if self.capability[0] == 9 else ""
        return f"training (masked): {masked}, causal: {causal}{hopper}"

    def describe(self) -> str:
        mem = f", {self.memory_gb:.1f} GB" if self.memory_gb else ""
        yes = lambda flag: "yes" if flag else "no"
        kernels = self.attention_kernels()
        cc = f" (compute capability {self.capability[0]}.{self.capability[1]})" if self.capability else ""
        return (
            f"{self.name}{mem}{cc} | torch {self.torch_version} | "
            f"fp16 native: {yes(self.fp16_native)} | bf16 native: {yes(self.bf16_native)}{cpu_bf16_forced(self.device)}"
            + (f" | SDPA kernel, head size 64: {kernels}" if kernels else "")
        )

    def as_dict(self) -> dict:
        return asdict(self)


def accelerator() -> Accelerator:
    """What we are running on. A T4 (compute capability 7.5) has fast fp16 but no native bf16."""
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return Accelerator(
            device="cuda",
            name=props.name,
            memory_gb=props.total_memory / 2**30,
            fp16_native=props.major >= 7,  # tensor cores from Volta on
            bf16_native=gpu_has_native_bf16(),
            torch_version=torch.__version__,
            capability=(props.major, props.minor),
        )
    if mps_available():
        return Accelerator(
            device="mps",
            name="Apple GPU (MPS; untried on real hardware by this course's tests)",
            memory_gb=None,
            fp16_native=False,
            bf16_native=False,
            torch_version=torch.__version__,
        )
    cpu = platform.processor() or platform.machine()
    return Accelerator(
        device="cpu",
        name=f"CPU ({cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads)",
        memory_gb=None,
        fp16_native=False,
        bf16_native=cpu_has_native_bf16(),
        torch_version=torch.__version__,
    )


def hardware_name(device: torch.device | str) -> str:
    """A name for the hardware behind ``device``, for summaries and figure labels."""
    acc = accelerator()
    return acc.name if torch.device(device).type == acc.device else str(device)


# ----------------------------------------------------------------------------------------------
# where output goes


def repo_root() -> Path | None:
    """The checkout this package sits in, or None when installed elsewhere (e.g. pip on Colab)."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "notebooks").is_dir() and (here / "pyproject.toml").is_file() else None


DRIVE_HOME = Path("/content/drive/MyDrive")  # where Colab mounts Google Drive
DRIVE_FOLDER = "transformers-by-building"  # the course's folder in Drive (checkpoints, reports)


def drive_mounted() -> bool:
    """True on Colab once Google Drive is mounted (``helpers.course.colab.mount_drive`` or the Files panel)."""
    return "google.colab" in sys.modules and DRIVE_HOME.is_dir()


def local_reports_dir() -> Path:
    root = repo_root()
    return (root / "reports") if root is not None else Path.cwd() / "reports"


def reports_dir() -> Path:
    """Where generated output goes: ``$REPORTS_DIR``; else, on Colab with Drive mounted, the course's
    folder in Drive (so a disconnect loses no figure); else ``<repo>/reports``, or ``./reports``."""
    if os.environ.get("REPORTS_DIR"):
        return Path(os.environ["REPORTS_DIR"])
    if drive_mounted():
        return DRIVE_HOME / DRIVE_FOLDER / "reports"
    return local_reports_dir()


def figures_dir() -> Path:
    path = reports_dir() / "figures"
    path.mkdir(parents=True, exist_ok=True)
    return path


def metrics_dir() -> Path:
    path = reports_dir() / "metrics"
    path.mkdir(parents=True, exist_ok=True)
    return path


def bundled_path(*parts: str):
    """A file of data/ (the package ``helpers.bundled`` once installed), wherever the package came from.

    A wheel (``pip install git+https://...``, as on Colab) installs data/ as the package ``helpers.bundled``.
    An editable install (``pip install -e .``) has no ``helpers.bundled``: setuptools' editable finder does not
    import a sub-package mapped to a folder without ``__init__.py`` (pypa/setuptools#4943); nor has a checkout
    used without installing. In both, helpers/ is the checkout's own, so the file is in data/ beside it.
    """
    try:
        base = resources.files("helpers.bundled")
    except ModuleNotFoundError:
        base = Path(__file__).resolve().parent.parent / "data"
    for part in parts:
        base = base / part
    return base


def reference_outputs(name: str):
    """Outputs saved for an exercise's check (``data/reference/NAME``, JSON), so a check never calls the package."""
    path = bundled_path("reference", name)
    if not path.is_file():
        raise FileNotFoundError(
            f"reference outputs {name} are missing from this install: reinstall the course package (first cell)."
        )
    return json.loads(path.read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------------------------
# a run folder's files (named by helpers.run_folder): written atomically (a kill mid-write leaves the previous file)


class ConfigMismatchError(ValueError):
    """A checkpoint was made with a different configuration from the one asked for now."""


# ----------------------------------------------------------------------------------------------
# atomic writes


def _fsync_dir(folder: Path) -> None:
    # Make the rename itself durable; not every platform lets us open a directory.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write(path: str | Path, write: Callable[[Any], None], mode: str) -> Path:
    """Write through ``write(file)`` to a temporary file beside ``path``, flush it to disk, then rename it
    over ``path``: a crash mid-write (SIGKILL, a Colab disconnect) leaves the previous file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)
    return path


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """``torch.save`` that never leaves a half-written file at ``path``."""
    return _atomic_write(path, lambda f: torch.save(obj, f), "wb")


def atomic_write_text(text: str, path: str | Path) -> Path:
    return _atomic_write(path, lambda f: f.write(text), "w")


def save_tokenizer_once(tokenizer, target: str | Path, replace: bool = False) -> Path:
    """Save ``tokenizer`` to the folder ``target`` (a run's ``tokenizer/``) unless it is already there, or in its
    place with ``replace`` (a fresh run over an unfinished one's). Atomic: a temporary folder beside it, then a
    rename."""
    target = Path(target)
    if target.is_dir() and not replace:
        return target
    for stale in target.parent.glob(f".{target.name}.tmp-*"):  # left by a run killed while saving
        shutil.rmtree(stale, ignore_errors=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tokenizer.save(tmp)
    if target.is_dir():  # a folder cannot be renamed over another: the old one goes first
        shutil.rmtree(target)
    os.replace(tmp, target)
    _fsync_dir(target.parent)
    return target
