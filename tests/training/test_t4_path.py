"""The T4's path, on a CPU: fp16 autocast with a gradient scaler must not overflow, Muon must orthogonalise in a
number format the GPU has (issue 38, item 5). That every preset's head size gets a fused attention kernel is
checked in tests/training/test_config.py, and the precision and kernel chosen per compute capability in
tests/test_runtime.py.

A T4 (compute capability 7.5) has fast fp16 but no bf16 and no flash attention. fp16 stops at 65,504, and the
``t4`` preset squares activations (ReLU²). The tests here run the preset's model in fp16 on real batches, watching
every module's output with forward hooks; each check has a planted control that must fail it.

fp16 on a CPU is emulated (matrix products about 60 times slower than fp32 on 2 cores), so the default run trains
the preset's width, heads, vocabulary, activation, optimizer and schedule at one layer for a few steps; the
several-hundred-step run is marked ``slow``. Fewer layers lose nothing for this check: under autocast the residual
stream stays fp32 (an fp16 block output added to the fp32 stream is fp32), and every block's matrix products read a
LayerNorm's output, so the place where fp16 can overflow, a block's inside, is the same at depth 1 and at depth 6.
"""

from __future__ import annotations

import math
import os
import sys
import time

import pytest
import torch
import torch.nn.functional as F

from helpers import runtime
from helpers.nn.model import relu2
from helpers.training import optim
from helpers.training import train as T
from helpers.training.config import PRESETS, preset_config

FP16_MAX = torch.finfo(torch.float16).max

# ----------------------------------------------------------------------------------------------
# watching activations


def _tensors(output):
    if isinstance(output, torch.Tensor):
        yield output
    elif isinstance(output, (tuple, list)):
        for item in output:
            yield from _tensors(item)


class ActivationWatch:
    """Forward hooks on every module of ``model``: the largest |value| of each module's outputs, their dtypes, and
    every module whose output held inf or NaN (in call order, so the first is where it started)."""

    def __init__(self, model: torch.nn.Module):
        self.largest: dict[str, float] = {}
        self.dtypes: dict[str, set] = {}
        self.bad: list[str] = []
        self.forwards = 0
        self.handles = [m.register_forward_hook(self._hook(name or "logits")) for name, m in model.named_modules()]

    def _hook(self, name):
        def hook(module, args, output):
            if name == "logits":
                self.forwards += 1
            for t in _tensors(output):
                if not t.is_floating_point() or t.numel() == 0:
                    continue
                t = t.detach()
                finite = torch.isfinite(t)
                if not bool(finite.all()):
                    self.bad.append(name)
                self.largest[name] = max(self.largest.get(name, 0.0), float(t.abs().masked_fill(~finite, 0).max()))
                self.dtypes.setdefault(name, set()).add(t.dtype)

        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def biggest(self, part: str = "") -> tuple[str, float]:
        """(module, largest |activation|) among the modules whose name contains ``part``."""
        return max(((n, v) for n, v in self.largest.items() if part in n), key=lambda nv: nv[1])

    def check(self) -> None:
        """Fail, naming the first module, if any forward pass watched produced inf or NaN."""
        if self.bad:
            raise AssertionError(
                f"inf/NaN in the forward pass: first in {self.bad[0]} ({len(self.bad)} module outputs in all; "
                f"largest finite |activation| {self.biggest()})"
            )


def fp16_probe(model: torch.nn.Module, batches, watch: ActivationWatch | None = None) -> ActivationWatch:
    """Forward passes of ``batches`` under the T4's autocast (fp16), in eval mode, watched; the watch is returned."""
    own = watch is None
    watch = watch or ActivationWatch(model)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), T.autocast_context("cpu", "fp16"):
            for b in batches:
                model(b.input_ids, b.prefix_len)
    finally:
        model.train(was_training)
        if own:
            watch.remove()
    return watch


def t4_run(tmp_path, monkeypatch, steps: int, **overrides):
    """``train_command`` on the built-in corpus with the ``t4`` preset in fp16 (its model watched while it trains):
    data, tokenizer, batches and the training loop are the package's own, as on a T4."""
    from helpers.commands import train_command
    from helpers.training import train as train_lib

    seen = {}
    loop = train_lib.train

    def watched_train(model, *args, **kwargs):
        seen["model"], seen["watch"] = model, ActivationWatch(model)
        try:
            return loop(model, *args, **kwargs)
        finally:
            seen["watch"].remove()

    monkeypatch.setattr(train_lib, "train", watched_train)
    result = train_command(
        "builtin", steps=steps, out=tmp_path / "t4", preset="t4", limit=400, progress=False, device="cpu",
        overrides={"precision": "fp16", "eval_interval": steps, "valid_sentences": 8, **overrides},
    )  # fmt: skip
    return result, seen["model"], seen["watch"]


def overflowing_copy(model, factor: float = 400.0):
    """A copy of ``model`` whose first block's feed-forward input weights are ``factor`` times larger (the planted
    control): its ReLU² inputs pass 256, where fp16's square overflows."""
    import copy

    bad = copy.deepcopy(model)
    with torch.no_grad():
        bad.blocks[0].ffn.fc.weight.mul_(factor)
    return bad


def unsafe_relu2(x):
    return F.relu(x).square()  # the square in the input's dtype: inf in fp16 above 256


# ----------------------------------------------------------------------------------------------
# 1. the t4 preset trains in fp16 without inf or NaN (the default run: one layer, a few steps)


def test_the_t4_preset_trains_in_fp16_on_real_batches_without_inf_or_nan(tmp_path, monkeypatch):
    """The preset end to end through ``train`` in fp16 on the CPU (the T4's path: autocast, GradScaler, Muon, WSD), at
    one layer; every forward pass watched. Then the planted control: the same trained model with its first block's
    feed-forward weights scaled up and the fp16 square, which overflows, must be caught."""
    result, model, watch = t4_run(tmp_path, monkeypatch, steps=3, n_layer=1, max_tokens=128)
    from helpers.training import checkpoint as ck

    summary = ck.load_checkpoint(tmp_path / "t4")
    assert summary["train_state"]["precision"] == "fp16" and result.steps == 3 and result.skipped_steps == 0
    m = summary["config"]["model"]
    t4 = PRESETS["t4"]
    assert (m["d_model"], m["n_head"], m["d_ff"], m["activation"]) == (t4.d_model, t4.n_head, 4 * t4.d_model, "relu2")
    assert summary["config"]["train"]["optimizer"] == "muon" and math.isfinite(result.val_loss)
    assert watch.forwards >= 3 + 1  # three training steps and the validation pass were watched
    assert watch.dtypes["blocks.0.ffn.fc"] == {torch.float16}, "the forward pass did not run in fp16"
    watch.check()
    name, largest = watch.biggest()
    fc = watch.largest["blocks.0.ffn.fc"]
    print(f"\nt4 preset, 1 layer, 3 fp16 steps: largest |activation| {largest:.1f} in {name}; ReLU² input {fc:.2f}")
    assert largest < FP16_MAX / 4 and fc < 256 / 4  # a quarter of the range: room for what training adds

    # the planted control: ReLU² inputs above 256 with the unsafe square -> inf, and the watch must say where
    batches = list(_valid_batches(tmp_path))[:1]
    bad = overflowing_copy(model)
    bad.blocks[0].ffn.act = unsafe_relu2
    control = fp16_probe(bad, batches)
    with pytest.raises(AssertionError, match=r"inf/NaN in the forward pass: first in blocks\.0\.ffn"):
        control.check()
    # the same inputs through the package's ReLU²: its square does not overflow (it saturates at 65,504)
    bad.blocks[0].ffn.act = relu2
    with torch.no_grad():
        x = bad.blocks[0].ffn.fc(bad.blocks[0].ln2(bad.tok_emb(batches[0].input_ids))).half()
    assert float(x.max()) > 256 and torch.isfinite(relu2(x)).all()


def _valid_batches(tmp_path):
    """Real batches of the run's own tokenizer (validation pairs of the built-in corpus)."""
    from helpers.text.data import prepare_data

    cfg = preset_config("t4", max_tokens=256, valid_sentences=16)
    return prepare_data("builtin", cfg, tmp_path / "t4", limit=400, progress=False).valid_batches


def test_a_t4_run_from_before_learned_positions_resumes_with_positions_rotary(tmp_path):
    """The t4 preset trained rotary positions until the twelfth session (RESULTS.md). Such a run's folder is refused
    by today's preset, naming the field, and resumes with ``--positions rotary`` (the README says so)."""
    from helpers.commands import train_command

    small = {"n_layer": 1, "d_model": 32, "n_head": 2, "d_ff": 64, "max_tokens": 128, "valid_sentences": 8}
    kw = dict(out=tmp_path / "t4", preset="t4", limit=400, progress=False, device="cpu", dev_score=False)
    train_command("builtin", steps=2, overrides={**small, "positional": "rotary"}, **kw)  # as before the change
    with pytest.raises(runtime.ConfigMismatchError, match="positional: 'rotary' in the checkpoint, 'learned' now"):
        train_command("builtin", steps=3, overrides=small, **kw)
    result = train_command("builtin", steps=3, overrides={**small, "positional": "rotary"}, **kw)
    assert result.resumed_from == 2 and result.steps == 3


@pytest.mark.slow
def test_the_t4_preset_fp16_forward_stays_finite_over_hundreds_of_training_steps(tmp_path):
    """Several hundred training steps of the t4 preset's model on real batches, with an fp16-autocast probe forward
    every 50 steps (and at the end), watched. Prints the largest activation and the time taken.

    The weights train in fp32 between probes: autocast keeps fp32 master weights, so an overflow is a property of
    the fp16 forward pass given those weights, and fp32 steps cost 1/6 of emulated fp16 ones on a CPU. The warm-up
    is shortened to 100 steps so that most steps run at the peak learning rate, where the weights grow fastest (the
    preset's own 1,000-step warm-up would keep all of them below it): a harsher test. ``T4_LAYERS`` (default 2) and
    ``T4_STEPS`` (default 400) change the depth and the length."""
    from helpers.nn import build_model
    from helpers.text.data import prepare_data

    layers, steps = int(os.environ.get("T4_LAYERS", "2")), int(os.environ.get("T4_STEPS", "400"))
    cfg = preset_config(
        "t4", n_layer=layers, max_tokens=512, precision="fp32", steps=steps, warmup_steps=100, eval_interval=10**9,
        valid_sentences=64, log_interval=50, checkpoint_minutes=10**6,
    )  # fmt: skip
    prepared = prepare_data("builtin", cfg, None, limit=4000, progress=False)
    runtime.set_seed(0)
    model = build_model(cfg.model_config(prepared.tokenizer.vocab_size, "cpu"))
    probe = prepared.valid_batches[:2]
    t0 = time.perf_counter()
    probes = []  # (step, watch)

    def probe_now(record, history=None):
        watch = fp16_probe(model, probe)  # hooks only for the probe: the fp32 training forwards are not watched
        probes.append((record["step"], watch))
        (name, largest), fc = watch.biggest(), watch.biggest(".ffn.fc")[1]
        print(f"step {record['step']}: largest {largest:.1f} in {name}, ReLU² input {fc:.2f}, "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)  # fmt: skip

    probe_now({"step": 0})
    result = T.train(model, prepared.train_batcher, prepared.valid_batches, cfg, None, device="cpu", progress=False,
                     callback=probe_now)  # fmt: skip
    probe_now({"step": result.steps})
    seconds = time.perf_counter() - t0
    for _, watch in probes:
        watch.check()
    (at, (name, largest)) = max(((s, w.biggest()) for s, w in probes), key=lambda x: x[1][1])
    fc = max(w.biggest(".ffn.fc")[1] for _, w in probes)
    trail = ", ".join(f"{s}: {w.biggest()[1]:.0f}/{w.biggest('.ffn.fc')[1]:.1f}" for s, w in probes)
    print(
        f"\nt4 preset, {layers} layers, {result.steps} steps ({seconds:.0f} s on {runtime.hardware_name('cpu')}): "
        f"largest |activation| in fp16 {largest:.1f} ({name}, step {at}), largest ReLU² input {fc:.2f}; "
        f"validation loss {result.val_loss:.3f}; step: largest/ReLU² input {trail}"
    )
    assert result.steps == steps and len(probes) >= steps // 50 + 2
    assert all(w.dtypes["blocks.0.ffn.fc"] == {torch.float16} for _, w in probes)
    assert largest < FP16_MAX / 4 and fc < 256 / 2


# ----------------------------------------------------------------------------------------------
# 2. ReLU² in fp16


def test_relu2_is_unchanged_in_fp32_and_bf16_and_cannot_overflow_in_fp16():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=g) * 100  # a few hundred: many above 256
    assert torch.equal(relu2(x), F.relu(x).square())  # fp32 bit for bit
    xb = x.bfloat16()
    assert torch.equal(relu2(xb), F.relu(xb).square())
    xh = x.half()
    plain, safe = unsafe_relu2(xh), relu2(xh)
    assert safe.dtype == torch.float16 and torch.isfinite(safe).all()
    assert not torch.isfinite(plain).all()  # the control: fp16's own square overflows above 256
    ok = torch.isfinite(plain)
    assert torch.equal(safe[ok], plain[ok])  # below the cap: the same value fp16's square gives
    assert float(safe[xh > 256].min()) == FP16_MAX
    # under autocast, in the model's feed-forward
    ffn = torch.nn.Linear(4, 4)
    with torch.no_grad():
        ffn.weight.fill_(100.0)
    with torch.autocast("cpu", dtype=torch.float16):
        h = ffn(torch.ones(1, 4))  # 400 per unit
        assert h.dtype == torch.float16
        assert torch.isfinite(relu2(h)).all() and not torch.isfinite(unsafe_relu2(h)).all()
    # the gradient stays finite too
    xg = xh.clone().requires_grad_()
    relu2(xg).sum().backward()
    assert torch.isfinite(xg.grad).all()


# ----------------------------------------------------------------------------------------------
# 3. Muon's orthogonalisation in a native dtype

NS_TOLERANCE = 0.03  # fp16 and fp32 against torch's bf16: relative distance of the summed update over 5 steps


def _muon_run(make, steps: int = 5, seed: int = 0):
    """The parameter change of ``steps`` Muon steps on two matrices (one tall, one wide) with fixed gradients."""
    g = torch.Generator().manual_seed(seed)
    start = [torch.randn(96, 48, generator=g) * 0.05, torch.randn(32, 80, generator=g) * 0.05]
    params = [torch.nn.Parameter(w.clone()) for w in start]
    opt = make(params)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g) * 1e-3
        opt.step()
    return [p.detach() - w for p, w in zip(params, start)], opt


def _distance(ours, theirs) -> float:
    return max(float((a - b).norm() / b.norm()) for a, b in zip(ours, theirs))


MUON_ARGS = {"lr": 0.02, "weight_decay": 0.1, "adjust_lr_fn": "match_rms_adamw"}


def test_muon_matches_torch_in_bf16_and_stays_within_tolerance_in_fp16_and_fp32():
    reference, ref_opt = _muon_run(lambda ps: torch.optim.Muon(ps, **MUON_ARGS))
    same, _ = _muon_run(lambda ps: optim.Muon(ps, ns_dtype=torch.bfloat16, **MUON_ARGS))
    # bf16: torch's operations in torch's order; bit for bit on torch 2.13, within 1e-2 on a torch whose own
    # iteration writes the products without addmm (some releases: use_addmm=False)
    bf16 = _distance(same, reference)
    assert bf16 == 0.0 or bf16 < 1e-2
    distances = {}
    for dtype in (torch.float16, torch.float32):
        ours, opt = _muon_run(lambda ps, d=dtype: optim.Muon(ps, ns_dtype=d, **MUON_ARGS))
        distances[dtype] = _distance(ours, reference)
        assert distances[dtype] < NS_TOLERANCE, (dtype, distances[dtype])
        # the state is torch's own: a checkpoint of either loads into the other
        assert opt.state_dict()["param_groups"][0].keys() == ref_opt.state_dict()["param_groups"][0].keys()
    # fp16 and fp32 agree more closely with each other than either with bf16 (fp16 keeps 10 mantissa bits)
    fp16, _ = _muon_run(lambda ps: optim.Muon(ps, ns_dtype=torch.float16, **MUON_ARGS))
    fp32, _ = _muon_run(lambda ps: optim.Muon(ps, ns_dtype=torch.float32, **MUON_ARGS))
    assert _distance(fp16, fp32) < distances[torch.float32] / 2
    print(f"\nMuon vs torch.optim.Muon (bf16): bf16 {bf16:.2e}, fp16 {distances[torch.float16]:.2e}, "
          f"fp32 {distances[torch.float32]:.2e}; fp16 vs fp32 {_distance(fp16, fp32):.2e}")  # fmt: skip


@pytest.mark.parametrize(
    "planted",
    [
        {"ns_coefficients": (3.0, -4.7750, 2.0315)},  # a wrong Newton-Schulz coefficient
        {"ns_steps": 2},  # too few iterations
        {"no_normalisation": True},  # the matrix not divided by its norm first
    ],
)
def test_a_broken_orthogonalisation_fails_the_muon_tolerance(planted, monkeypatch):
    if planted.get("no_normalisation"):
        real = optim.newton_schulz

        def unnormalised(grad, dtype, coefficients, steps, eps):
            return real(grad * 1e4, dtype, coefficients, steps, eps=1e30)  # the norm clamped to 1e30: no division

        monkeypatch.setattr(optim, "newton_schulz", unnormalised)
        kwargs = {}
    else:
        kwargs = planted
    reference, _ = _muon_run(lambda ps: torch.optim.Muon(ps, **MUON_ARGS))
    ours, _ = _muon_run(lambda ps: optim.Muon(ps, ns_dtype=torch.float16, **{**MUON_ARGS, **kwargs}))
    assert not _distance(ours, reference) < NS_TOLERANCE


def test_muon_state_dicts_load_across_ours_and_torchs():
    """A checkpoint written before this change (torch.optim.Muon) resumes into ours, and the other way round."""
    theirs_delta, theirs = _muon_run(lambda ps: torch.optim.Muon(ps, **MUON_ARGS), steps=3)
    ours_delta, ours = _muon_run(lambda ps: optim.Muon(ps, ns_dtype=torch.bfloat16, **MUON_ARGS), steps=3)
    fresh = optim.Muon([torch.nn.Parameter(torch.zeros(96, 48)), torch.nn.Parameter(torch.zeros(32, 80))])
    fresh.load_state_dict(theirs.state_dict())
    back = torch.optim.Muon([torch.nn.Parameter(torch.zeros(96, 48)), torch.nn.Parameter(torch.zeros(32, 80))])
    back.load_state_dict(ours.state_dict())
    for a, b in zip(fresh.state.values(), theirs.state.values()):
        assert torch.equal(a["momentum_buffer"], b["momentum_buffer"])
    assert len(back.state) == 2


def test_make_optimizer_picks_the_newton_schulz_dtype_from_the_device(monkeypatch):
    from helpers.nn import build_model

    cfg = preset_config("tiny", optimizer="muon")
    opt = optim.make_optimizer(build_model(cfg.model_config(60)), cfg, "cpu")
    assert opt.optimizers[0].ns_dtype == optim.newton_schulz_dtype("cpu")
    monkeypatch.setenv(runtime.CPU_BF16_VARIABLE, "0")
    assert optim.newton_schulz_dtype("cpu") == torch.float32  # bf16 emulated on this CPU: 60x slower than fp32
    monkeypatch.setenv(runtime.CPU_BF16_VARIABLE, "1")
    assert optim.newton_schulz_dtype("cpu") == torch.bfloat16
    assert optim.make_optimizer(build_model(cfg.model_config(60)), cfg, "cpu").optimizers[0].ns_dtype == (
        torch.bfloat16
    )
    for capability, want in (((7, 5), torch.float16), ((8, 0), torch.bfloat16), ((9, 0), torch.bfloat16)):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=capability: c)
        assert optim.newton_schulz_dtype("cuda") == want, capability


def test_newton_schulz_in_fp16_neither_overflows_nor_underflows_on_a_large_or_tiny_gradient():
    g = torch.Generator().manual_seed(0)
    grad = torch.randn(64, 256, generator=g)
    want = optim.newton_schulz(grad, torch.float32)
    for scale in (1e-9, 1.0, 1e6):  # fp16 alone: 1e-9 underflows to 0, 1e6 overflows to inf
        out = optim.newton_schulz(grad * scale, torch.float16).float()
        assert torch.isfinite(out).all() and float((out - want).norm() / want.norm()) < 0.01, scale
    assert not torch.isfinite((grad * 1e6).half()).all() and float((grad * 1e-9).half().abs().max()) == 0.0
