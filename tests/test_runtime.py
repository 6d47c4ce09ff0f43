"""helpers.runtime: quick mode, the environment snapshot, seeding, device and precision choice, where reports go,
atomic writes."""

from __future__ import annotations

import os
import pickle
import random

import numpy as np
import pytest
import torch

from helpers import runtime
from helpers.training import train as T
from helpers.training.config import PRESETS


@pytest.mark.parametrize(
    "raw, want", [(None, False), ("1", True), ("yes", True), (" ON ", True), ("0", False), ("", False), ("off", False)]
)
def test_quick_mode_reads_the_environment(monkeypatch, raw, want):
    if raw is None:
        monkeypatch.delenv("QUICK", raising=False)
        assert runtime.quick_mode(default=True) is True  # unset: the caller's default, whatever it is
    else:
        monkeypatch.setenv("QUICK", raw)
        assert runtime.quick_mode(default=not want) is want  # set: the variable wins over the default
    assert runtime.quick_mode() is want


def test_quick_mode_refuses_a_value_it_does_not_understand(monkeypatch):
    monkeypatch.setenv("QUICK", "maybe")
    with pytest.raises(ValueError, match="QUICK='maybe' is not understood: use QUICK=1"):
        runtime.quick_mode()


def test_environment_snapshot_restores_values_and_unset_variables(monkeypatch):
    monkeypatch.setenv("H6_SET", "before")
    monkeypatch.delenv("H6_UNSET", raising=False)
    snap = runtime.environment_snapshot("H6_SET", "H6_UNSET")
    assert snap == {"H6_SET": "before", "H6_UNSET": None}
    os.environ["H6_SET"], os.environ["H6_UNSET"] = "after", "now set"
    runtime.restore_environment(snap)
    assert os.environ["H6_SET"] == "before" and "H6_UNSET" not in os.environ


def test_set_seed_repeats_python_numpy_and_torch():
    def draw():
        return random.random(), float(np.random.rand()), torch.rand(3).tolist()

    runtime.set_seed(7)
    first = draw()
    runtime.set_seed(7)
    assert draw() == first
    runtime.set_seed(8)
    assert all(a != b for a, b in zip(draw(), first))  # each generator is seeded, not merely one of them


def test_pick_device_honours_the_preference_and_falls_back_to_the_cpu(monkeypatch):
    assert runtime.pick_device("cpu") == torch.device("cpu")
    assert runtime.pick_device("cuda:1") == torch.device("cuda:1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.pick_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.pick_device() == torch.device("cuda")


def test_reports_dir_follows_reports_dir_and_makes_its_subfolders(monkeypatch, tmp_path):
    monkeypatch.setenv("REPORTS_DIR", str(tmp_path / "out"))
    assert runtime.reports_dir() == tmp_path / "out"
    assert runtime.figures_dir() == tmp_path / "out" / "figures" and runtime.figures_dir().is_dir()
    assert runtime.metrics_dir() == tmp_path / "out" / "metrics" and runtime.metrics_dir().is_dir()
    monkeypatch.delenv("REPORTS_DIR")
    assert runtime.reports_dir() == runtime.local_reports_dir()  # no Drive on this machine


def test_an_atomic_write_that_fails_keeps_the_previous_file_and_no_temporary(tmp_path):
    path = runtime.atomic_write_text("first\n", tmp_path / "sub" / "a.txt")
    assert path.read_text(encoding="utf-8") == "first\n"
    with pytest.raises((pickle.PicklingError, AttributeError), match="pickle"):
        runtime.atomic_torch_save({"f": lambda: 0}, path)  # a lambda cannot be pickled: fails mid-write
    assert path.read_text(encoding="utf-8") == "first\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.txt"]
    runtime.atomic_torch_save({"x": torch.arange(3)}, path)
    assert torch.load(path, weights_only=True)["x"].tolist() == [0, 1, 2]


def test_precision_on_cpu_and_unknown_precisions():
    assert runtime.resolve_precision("cpu") == "fp32"
    assert [runtime.resolve_precision("cpu", p) for p in ("fp32", "bf16", "fp16")] == ["fp32", "bf16", "fp16"]
    assert runtime.precision_dtype("fp16") == torch.float16 and runtime.precision_dtype("bf16") == torch.bfloat16
    with pytest.raises(ValueError, match="precision='fp8' is not known: use one of auto"):
        runtime.resolve_precision("cpu", "fp8")


def test_the_cpu_bf16_answer_can_be_forced_either_way_and_bf16_if_native_follows_it(monkeypatch):
    """Issue 47: each branch must run on either kind of machine, so the variable overrides the CPU's own answer."""
    for raw, want in (("1", True), ("yes", True), ("0", False), ("off", False)):
        monkeypatch.setenv(runtime.CPU_BF16_VARIABLE, raw)
        assert runtime.cpu_has_native_bf16() is want, raw
        assert runtime.resolve_precision("cpu", "bf16_if_native") == ("bf16" if want else "fp32")
        assert runtime.resolve_precision("cpu", "auto") == "fp32"  # auto never autocasts on a CPU
        assert runtime.accelerator().bf16_native is want
        assert f"bf16 native: {'yes' if want else 'no'} (COURSE_CPU_BF16={raw})" in runtime.accelerator().describe()
    for raw in ("auto", ""):  # unset in effect: the CPU is asked
        monkeypatch.setenv(runtime.CPU_BF16_VARIABLE, raw)
        assert runtime.cpu_has_native_bf16() is runtime.cpu_detects_bf16()
        assert "COURSE_CPU_BF16" not in runtime.accelerator().describe()
    monkeypatch.setenv(runtime.CPU_BF16_VARIABLE, "maybe")
    with pytest.raises(ValueError, match="COURSE_CPU_BF16='maybe' is not understood: use 1"):
        runtime.cpu_has_native_bf16()


# precision and attention kernel for compute capabilities 7.5, 8.0 and 9.0, the device query faked (from the T4 tests)


@pytest.mark.parametrize(
    "capability, precision, scaler, training_kernel, causal_kernel",
    [
        ((7, 5), "fp16", True, "efficient", "efficient"),  # T4: no bf16, no flash
        ((8, 0), "bf16", False, "efficient", "flash"),  # A100
        ((9, 0), "bf16", False, "efficient", "flash"),  # H100
    ],
)
def test_precision_and_attention_kernel_by_compute_capability(
    monkeypatch, capability, precision, scaler, training_kernel, causal_kernel
):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # a T4 says True (emulation)
    assert runtime.resolve_precision("cuda", "auto") == precision
    assert runtime.resolve_precision("cuda", "bf16_if_native") == precision
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # so GradScaler("cuda") stays enabled
    assert T.make_scaler("cuda", "auto").is_enabled() is scaler
    dtype = runtime.precision_dtype(precision)
    hs = PRESETS["t4"].d_model // PRESETS["t4"].n_head
    assert runtime.sdpa_backend(capability, hs, dtype, masked=True) == training_kernel
    assert runtime.sdpa_backend(capability, hs, dtype, masked=False) == causal_kernel
    # a head size that rules the fused kernels out: 12 fp16 values are 24 bytes, not a multiple of 16
    assert runtime.sdpa_backend(capability, 12, dtype, masked=False) == "math"
    assert runtime.sdpa_backend(capability, 320, dtype, masked=False) == "efficient"  # too big for flash
    acc = runtime.Accelerator("cuda", "faked", 15.0, True, precision == "bf16", torch.__version__, capability)
    assert f"training (masked): {training_kernel}, causal: {causal_kernel}" in acc.describe()
    # on Hopper the masked calls ran on cuDNN's attention (an H200 profile, torch 2.11): describe must not hide it
    assert ("cuDNN" in acc.describe()) is (capability[0] == 9)


def test_bf16_on_a_t4_would_get_no_fused_attention():
    # the reason a T4 trains in fp16: bf16 there is emulated, and the memory-efficient kernel refuses it
    assert runtime.sdpa_backend((7, 5), 64, torch.bfloat16) == "math"
    assert runtime.sdpa_backend((7, 5), 64, torch.float32) == "efficient"


def test_a_mac_trains_on_its_gpu_in_fp32_and_says_once_what_falls_back(monkeypatch, capsys):
    """Issue 49: CUDA, then Apple's GPU (MPS), then the CPU; fp32 on MPS (no lower format proven there); operations
    without a Metal kernel fall back to the CPU. MPS availability is faked: untried on real Apple hardware."""
    from helpers.training import optim

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(runtime, "mps_available", lambda: True)
    monkeypatch.setenv(runtime.MPS_FALLBACK, "0")  # restored (unset) after the test
    assert runtime.pick_device() == torch.device("mps")
    assert os.environ[runtime.MPS_FALLBACK] == "1" and "fall back to the CPU" in capsys.readouterr().out
    assert runtime.pick_device() == torch.device("mps") and capsys.readouterr().out == "", "said once"
    assert [runtime.resolve_precision("mps", p) for p in ("auto", "bf16_if_native")] == ["fp32", "fp32"]
    assert runtime.resolve_precision("mps", "fp16") == "fp16"  # asked for by name: honoured, as on a CPU
    assert optim.newton_schulz_dtype("mps") == torch.float32
    acc = runtime.accelerator()
    assert acc.device == "mps" and "Apple GPU (MPS" in acc.describe() and not acc.bf16_native
    monkeypatch.setattr(runtime, "mps_available", lambda: False)
    assert runtime.pick_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runtime, "mps_available", lambda: True)
    assert runtime.pick_device() == torch.device("cuda"), "CUDA first, when both are there"
