"""helpers.training.optim: the warm-up-stable-decay schedule and Muon beside AdamW (notebook 05's levers from the
GPT-2 speedrun, which the cpu and t4 presets use).

Each check is written so that a plausible mistake fails it; the comment above each says which."""

from __future__ import annotations

import copy

import pytest
import torch

from helpers.training.config import TrainConfig, preset_config
from helpers.training.optim import MuonWithAdamW, lr_at, make_optimizer
from tests.nn.test_variants import tiny_model


def test_wsd_holds_the_peak_then_cools_down_linearly_over_the_last_share():
    cfg = TrainConfig(lr=1.0, warmup_steps=10, min_lr_ratio=0.1, schedule="wsd", cooldown=0.4)
    total = 100
    assert lr_at(5, cfg, total) == pytest.approx(0.6)  # warm-up as before
    assert lr_at(59, cfg, total) == 1.0  # stable until 60 % of the run (a cosine would be at 0.6 here)
    assert lr_at(80, cfg, total) == pytest.approx(0.55)  # half-way down the line from 1.0 to 0.1
    assert lr_at(100, cfg, total) == pytest.approx(0.1) and lr_at(150, cfg, total) == pytest.approx(0.1)
    cosine = TrainConfig(lr=1.0, warmup_steps=10, min_lr_ratio=0.1, schedule="cosine")
    assert lr_at(59, cosine, total) < 0.7  # the cosine, the other choice
    assert TrainConfig().schedule == "wsd" and TrainConfig().optimizer == "muon"  # the defaults notebook 03 teaches


def test_muon_takes_the_blocks_matrices_and_adamw_the_rest():
    # a split that gave Muon the embedding or the head (or a bias) would fail here: Muon is for hidden matrices
    model = tiny_model(tie_weights=False)
    opt = make_optimizer(model, preset_config("tiny", optimizer="muon"))
    assert isinstance(opt, MuonWithAdamW)
    muon, adamw = opt.optimizers
    in_muon = {id(p) for g in muon.param_groups for p in g["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in in_muon}
    assert names == {n for n, p in model.named_parameters() if n.startswith("blocks.") and p.dim() == 2}
    in_adamw = {id(p) for g in adamw.param_groups for p in g["params"]}
    assert in_muon.isdisjoint(in_adamw) and len(in_muon | in_adamw) == len(list(model.parameters()))
    assert id(model.lm_head.weight) in in_adamw and id(model.tok_emb.weight) in in_adamw


@pytest.mark.parametrize("variant", [{"attention": "synthesizer"}, {"bottleneck_dim": 4}])
def test_muon_takes_only_linear_layers_weights_in_notebook_05_s_variants(variant):
    # the synthesizer's per-head score bias (nh, L) and the bottleneck's latents (m, C) are 2-D but no layer's
    # weights: a split by p.dim() == 2 alone would hand them to Muon (and decay them as matrices)
    model = tiny_model(**variant)
    muon, adamw = make_optimizer(model, preset_config("tiny")).optimizers
    in_muon = {id(p) for g in muon.param_groups for p in g["params"]}
    linear = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    odd = [n for n, p in model.named_parameters() if p.dim() == 2 and id(p) not in linear and n != "tok_emb.weight"]
    assert odd, "the variant has a 2-D parameter outside the linear layers: the check has something to catch"
    assert in_muon == linear - {id(model.tok_emb.weight)}
    assert all(id(p) in {id(q) for g in adamw.param_groups for q in g["params"]} for n, p in model.named_parameters()
               if n in odd)  # fmt: skip


def test_muon_with_adamw_steps_saves_and_restores_both():
    torch.manual_seed(0)
    model = tiny_model()
    cfg = preset_config("tiny", optimizer="muon", lr=0.01)
    opt = make_optimizer(model, cfg)
    ids = torch.randint(3, 20, (2, 8))

    def step(m, o):
        loss = m(ids).logsumexp(-1).mean()
        loss.backward()
        o.step()
        o.zero_grad()

    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    step(model, opt)
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert "blocks.0.attn.qkv.weight" in moved and "tok_emb.weight" in moved  # both inner optimizers stepped
    # a copy restored from the state dict takes the same next step (a lost momentum buffer would not)
    twin = tiny_model()
    twin.load_state_dict(model.state_dict())
    twin_opt = make_optimizer(twin, cfg)
    twin_opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # (a state dict shares its tensors)
    step(model, opt)
    step(twin, twin_opt)
    for (n, p), q in zip(model.named_parameters(), twin.parameters()):
        assert torch.equal(p, q), n
    with pytest.raises(ValueError, match="another optimizer"):
        twin_opt.load_state_dict(torch.optim.AdamW(twin.parameters()).state_dict())


def test_lr_schedule_reaches_muon_groups_too():
    model = tiny_model()
    opt = make_optimizer(model, preset_config("tiny", optimizer="muon"))
    for g in opt.param_groups:
        g["lr"] = 0.123
    assert all(g["lr"] == 0.123 for o in opt.optimizers for g in o.param_groups)


@pytest.mark.parametrize("scale", [1.0, 2.5])
def test_muons_rate_is_its_own_multiple_of_the_schedule_and_adamws_is_the_schedule(scale):
    # a scale applied to AdamW too, or to Muon only at the start (the schedule overwriting it), fails here
    from helpers.training import train as T
    from tests.training.test_train import tiny, toy_batcher

    model, cfg = tiny(optimizer="muon", muon_lr_scale=scale, steps=1000)
    run = T.TrainingRun(model, toy_batcher(), None, cfg, None, progress=False)
    run.step = 50  # past the warm-up, before the cool-down: the peak rate
    lr = run.set_lr()
    muon, adamw = run.optimizer.optimizers
    assert lr == cfg.lr and all(g["lr"] == cfg.lr * scale for g in muon.param_groups)
    assert all(g["lr"] == cfg.lr for g in adamw.param_groups)
    with pytest.raises(ValueError, match="muon_lr_scale must be above 0"):
        preset_config("tiny", muon_lr_scale=0.0)


@pytest.mark.training
def test_muon_wsd_fp16_run_resumes_to_the_same_weights(tmp_path):
    """The T4's path (fp16 with a gradient scaler, here on the CPU) with Muon and WSD: a run stopped at step 6 and
    resumed to 10 ends with exactly the weights of a run that went straight to 10 (a resume that lost Muon's
    momentum, the scaler or the schedule's position would not)."""
    from helpers.cli import train_command
    from helpers.training.checkpoint import load_checkpoint

    levers = {"optimizer": "muon", "schedule": "wsd", "precision": "fp16"}
    train_command(
        "builtin", steps=10, out=tmp_path / "straight", preset="tiny", overrides=levers, progress=False, limit=600
    )
    train_command(
        "builtin", steps=6, out=tmp_path / "resumed", preset="tiny", overrides=levers, progress=False, limit=600
    )
    train_command(
        "builtin", steps=10, out=tmp_path / "resumed", preset="tiny", overrides=levers, progress=False, limit=600
    )
    a = load_checkpoint(tmp_path / "straight" / "checkpoint.pt", map_location="cpu")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt", map_location="cpu")
    assert set(a["optimizer"]) == {"muon", "adamw"} and a["step"] == b["step"] == 10
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
