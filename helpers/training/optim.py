"""The optimiser and the learning-rate schedule of a training run.

Muon for the blocks' matrices beside AdamW for the rest (:class:`MuonWithAdamW`, the default, notebook 03), or
AdamW alone, with weight decay on matrices only; the schedule is warm-up, stable, decay (``wsd``, the default), or a
warm-up then a cosine.
:class:`helpers.training.train.TrainingRun` builds them from a
:class:`helpers.training.config.TrainConfig`.
"""

from __future__ import annotations

import math

import torch

from ..runtime import cpu_has_native_bf16, gpu_has_native_bf16, precision_dtype
from .config import TrainConfig


def make_optimizer(
    model: torch.nn.Module, cfg: TrainConfig, device: torch.device | str | None = None
) -> torch.optim.Optimizer:
    """AdamW, with Muon beside it for the blocks' matrices when ``cfg.optimizer == "muon"`` (the default).

    Weight decay only on the matrices of linear layers (not biases, norms or embeddings).

    Decaying an embedding pulls rare tokens' vectors to zero, and decaying a LayerNorm gain fights the
    normalisation, so both are left alone. On CUDA the fused kernel does the update in one launch.
    With Muon, the blocks' matrices go to it instead of AdamW (:class:`MuonWithAdamW`).
    """
    no_decay_ids = set()
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding) or "Norm" in type(module).__name__:
            no_decay_ids.update(id(p) for p in module.parameters(recurse=False))
    decay, no_decay = [], []
    for p in model.parameters():  # a tied head appears once, as the embedding
        if not p.requires_grad:
            continue
        (no_decay if (id(p) in no_decay_ids or p.dim() < 2) else decay).append(p)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    extra = {"fused": True} if device.type == "cuda" else {}
    hidden = []
    if cfg.optimizer == "muon":  # the linear layers' weights; the head (tied or not), embeddings and any other
        head = getattr(model, "lm_head", None)  # parameter (notebook 05's synthesizer bias, latents) stay with AdamW
        linear = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not head}
        hidden = [p for p in decay if id(p) in linear and p is not getattr(head, "weight", None)]
        hidden_ids = {id(p) for p in hidden}
        decay = [p for p in decay if id(p) not in hidden_ids]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    adamw = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=1e-8, **extra)
    if not hidden:
        return adamw
    # "match_rms_adamw" scales each update to AdamW's typical size, so one learning rate and schedule serve both
    muon = Muon(
        hidden,
        lr=cfg.lr * cfg.muon_lr_scale,
        weight_decay=cfg.weight_decay,
        adjust_lr_fn="match_rms_adamw",
        ns_dtype=newton_schulz_dtype(device),
    )
    for group in muon.param_groups:  # the schedule multiplies each group's rate by its scale (TrainingRun.set_lr)
        group["lr_scale"] = cfg.muon_lr_scale
    return MuonWithAdamW(muon, adamw)


# ----------------------------------------------------------------------------------------------
# Muon with the Newton-Schulz iterations in a number format the device has


def newton_schulz_dtype(device: torch.device | str) -> torch.dtype:
    """The number format of Muon's Newton-Schulz iterations on ``device``: one it multiplies natively.

    ``torch.optim.Muon`` always uses bf16, which only Ampere (compute capability 8.0) and later GPUs, and CPUs with
    AVX512-BF16 or AMX, have in hardware. A T4 (7.5) emulates it; there fp16 is native (tensor cores) and safe: the
    iteration works on the matrix divided by its norm, so every entry stays below 1 and every product below ~10, far
    from fp16's 65,504, and fp16 keeps 10 mantissa bits to bf16's 7. fp32 would be as exact but 8x slower on a T4.
    A CPU without bf16 instructions multiplies bf16 about 60x slower than fp32, so it iterates in fp32.
    ``COURSE_CPU_BF16`` (:func:`helpers.runtime.cpu_has_native_bf16`) picks either CPU branch on any machine.

    The choice changes more than speed: bf16 keeps 8 significant bits, so two runs whose gradients differ by float
    rounding alone (one process against two, which add their sums in another order) round some entries the other way
    and part (measured on the tiny preset: 1.5e-5 after 3 steps, 1.1e-3 after 20, against 1.8e-6 after 20 in fp32).
    """
    device = torch.device(device)
    if device.type == "cuda":
        return torch.bfloat16 if gpu_has_native_bf16(device) else torch.float16
    if device.type == "mps":  # fp32, as its training runs (runtime.resolve_precision)
        return torch.float32
    if device.type == "cpu":
        return torch.bfloat16 if cpu_has_native_bf16() else torch.float32
    return torch.bfloat16  # other back-ends (xpu): torch.optim.Muon's own choice


NS_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def describe_muon(cfg: TrainConfig, device: torch.device | str) -> str:
    """ ", Muon's iteration in bf16" for ``train``'s "Model:" line; empty without Muon."""
    if cfg.optimizer != "muon":
        return ""
    dtype = newton_schulz_dtype(device)
    return f", Muon's iteration in {next(p for p in ('bf16', 'fp16', 'fp32') if precision_dtype(p) == dtype)}"


def newton_schulz(
    grad: torch.Tensor,
    dtype: torch.dtype = torch.bfloat16,
    coefficients: tuple[float, float, float] = (3.4445, -4.7750, 2.0315),
    steps: int = 5,
    eps: float = 1e-7,
) -> torch.Tensor:
    """Muon's orthogonalisation of the 2-D ``grad``: five quintic Newton-Schulz iterations (Jordan et al. 2024) in ``dtype``.

    The same arithmetic as ``torch.optim.Muon`` (whose private version changed its signature between torch releases,
    so it is written out here). With bf16 the operations are torch's, in torch's order: the same result. With fp16 the
    matrix is divided by its norm in fp32 first and then rounded: a raw gradient's small entries (< 6e-5) would lose
    their precision in fp16, and large ones could overflow; once normalised every entry is at most 1.
    """
    if dtype not in NS_DTYPES:
        raise ValueError(f"Newton-Schulz dtype {dtype} is not supported: use one of {NS_DTYPES}.")
    if grad.dim() != 2:
        raise ValueError(f"Muon orthogonalises 2-D matrices, got a tensor of shape {tuple(grad.shape)}.")
    a, b, c = coefficients
    tall = grad.size(0) > grad.size(1)
    if dtype == torch.bfloat16:  # torch.optim.Muon's order: round, then normalise
        x = grad.bfloat16()
        x = x.T if tall else x
        x.div_(x.norm().clamp(min=eps))
    else:
        x = grad.float()
        x = (x / x.norm().clamp(min=eps)).to(dtype)
        x = x.T if tall else x
    for _ in range(steps):  # the spectral norm is at most the Frobenius norm, 1: every singular value in (0, 1]
        gram = x @ x.T
        update = torch.addmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.addmm(x, update, x, beta=a)
    return x.T if tall else x


class Muon(torch.optim.Muon):
    """``torch.optim.Muon`` whose Newton-Schulz iterations run in ``ns_dtype`` (:func:`newton_schulz_dtype`).

    The parameter groups and the state (``momentum_buffer``) are torch's own, so a checkpoint of either loads into
    the other; ``ns_dtype`` is a property of the machine, not of the run, and is not saved. The update is torch's
    (Nesterov momentum, decoupled weight decay, the learning rate adjusted to the matrix's shape), written out with
    public operations only, so that it behaves the same on torch 2.11 (Colab) and later.
    """

    def __init__(self, params, *args, ns_dtype: torch.dtype = torch.bfloat16, **kwargs):
        if ns_dtype not in NS_DTYPES:
            raise ValueError(f"ns_dtype={ns_dtype} is not supported: use one of {NS_DTYPES}.")
        super().__init__(params, *args, **kwargs)
        self.ns_dtype = ns_dtype

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = float(group["lr"])
            momentum, wd = group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse or torch.is_complex(p):
                    raise RuntimeError("Muon supports dense real 2-D parameters only.")
                grad = p.grad
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
                buf = state["momentum_buffer"]
                buf.lerp_(grad, 1 - momentum)
                update = grad.lerp(buf, momentum) if group["nesterov"] else buf
                update = newton_schulz(update, self.ns_dtype, group["ns_coefficients"], group["ns_steps"], group["eps"])
                p.mul_(1 - lr * wd)
                p.add_(update, alpha=-lr * _lr_ratio(group["adjust_lr_fn"], p.shape))
        return loss


def _lr_ratio(adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """torch.optim.Muon's learning-rate adjustment: "original" sqrt(max(1, A/B)); "match_rms_adamw" 0.2 sqrt(max(A, B))."""
    A, B = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return math.sqrt(max(1, A / B))
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(A, B))
    return 1.0


class MuonWithAdamW(torch.optim.Optimizer):
    """Muon for the hidden matrices and AdamW for the rest, stepped, saved and restored as one optimizer.

    Muon (Jordan et al. 2024, ``torch.optim.Muon``) orthogonalises each matrix's momentum with a few Newton-Schulz
    iterations, so every direction of the update moves at the same rate; it is defined for 2-D weights only.
    ``param_groups`` is the two optimizers' groups, the same dictionaries, so the schedule and the gradient
    scaler (which unscales ``param_groups``) reach both.
    """

    def __init__(self, muon: torch.optim.Optimizer, adamw: torch.optim.Optimizer):
        self.optimizers = (muon, adamw)  # no super().__init__: the two inner optimizers hold the state
        self.defaults = {}

    @property
    def param_groups(self):
        return [g for opt in self.optimizers for g in opt.param_groups]

    @property
    def state(self):
        return {k: v for opt in self.optimizers for k, v in opt.state.items()}

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("MuonWithAdamW.step takes no closure.")
        for opt in self.optimizers:
            opt.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return {"muon": self.optimizers[0].state_dict(), "adamw": self.optimizers[1].state_dict()}

    def load_state_dict(self, state_dict: dict) -> None:
        if set(state_dict) != {"muon", "adamw"}:
            raise ValueError(
                f"this optimizer state was saved by another optimizer (keys {sorted(state_dict)}), not Muon with AdamW."
            )
        self.optimizers[0].load_state_dict(state_dict["muon"])
        self.optimizers[1].load_state_dict(state_dict["adamw"])

    def __repr__(self) -> str:
        return f"MuonWithAdamW({self.optimizers[0]!r}, {self.optimizers[1]!r})"


def lr_at(step: int, cfg: TrainConfig, total_steps: int) -> float:
    """Linear warm-up over ``cfg.warmup_steps``, then the decay to ``cfg.lr * cfg.min_lr_ratio`` at ``total_steps``.

    ``cfg.schedule`` "cosine": a half cosine from the peak to the floor. "wsd" (warm-up, stable, decay): the peak
    until the last ``cfg.cooldown`` share of the run, then a straight line to the floor; a fast learning rate for
    longer, and a long cool-down, where the loss falls sharply again (the GPT-2 speedrun's schedule).
    ``step`` counts from 0 (the learning rate used by the first update). After ``total_steps`` the
    rate stays at the floor.
    """
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    floor = cfg.lr * cfg.min_lr_ratio
    if cfg.schedule == "wsd":
        cool_from = total_steps - cfg.cooldown * total_steps
        if step < cool_from:
            return cfg.lr
        progress = min(1.0, (step - cool_from) / max(1.0, total_steps - cool_from))
        return cfg.lr + (floor - cfg.lr) * progress
    span = max(1, total_steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
