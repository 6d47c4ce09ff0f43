"""Training building blocks and the loop: schedule, loss masking and smoothing, budgets, NaN and OOM stops."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import runtime
from helpers.nn import build_model
from helpers.training import checkpoint as ck
from helpers.training import config as C
from helpers.training import optim
from helpers.training import train as T

# ----------------------------------------------------------------------------------------------
# toy data: real helpers.text.data batches of random token ids (no tokenizer needed)


def toy_batcher(n: int = 120, vocab: int = 60, seed: int = 0, max_tokens: int = 256, shuffle: bool = True):
    from helpers.text.batches import BucketBatcher
    from helpers.text.encoding import Example

    g = torch.Generator().manual_seed(seed)
    examples = []
    for _ in range(n):
        src, tgt = int(torch.randint(2, 9, (1,), generator=g)), int(torch.randint(2, 9, (1,), generator=g))
        body = torch.randint(4, vocab, (src + tgt,), generator=g).tolist()
        ids = [1, *body[:src], 2, *body[src:], 3]  # <bos> src <sep> tgt <eos>
        examples.append(Example(input_ids=ids, prefix_len=src + 2))
    return BucketBatcher(examples, max_tokens=max_tokens, shuffle=shuffle, seed=seed)


def toy_valid(vocab: int = 60):
    return list(toy_batcher(n=30, vocab=vocab, seed=99, shuffle=False))


def tiny(vocab=60, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = C.preset_config("tiny", **kw)
    return build_model(cfg.model_config(vocab)), cfg


# ----------------------------------------------------------------------------------------------
# learning-rate schedule


def test_lr_schedule_warms_up_linearly_then_follows_a_cosine_to_the_floor():
    cfg = C.TrainConfig(lr=1e-3, warmup_steps=10, min_lr_ratio=0.1, schedule="cosine")
    total = 110
    lrs = [optim.lr_at(s, cfg, total) for s in range(total + 20)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)  # (step + 1) / warmup
    assert all(b > a for a, b in zip(lrs[:10], lrs[1:10]))
    assert max(lrs) == pytest.approx(1e-3)
    assert all(b <= a for a, b in zip(lrs[10:], lrs[11:]))  # never rises again
    assert lrs[60] == pytest.approx(1e-4 + 0.5 * 9e-4)  # half-way through the decay: half-way down
    assert lrs[110] == pytest.approx(1e-4) and lrs[-1] == pytest.approx(1e-4)  # the floor, and it stays
    # a linear decay would pass the half-way check too; the cosine is flatter at its start
    assert lrs[20] > 1e-3 - (1e-3 - 1e-4) * (10 / 100)


def test_time_budget_estimates_total_steps_from_the_pace():
    b = T.Budget(minutes=10, elapsed=120.0)  # 20 % of the budget already spent (earlier session)
    assert b.total_steps(0) == 10**9  # no pace yet
    assert b.total_steps(200) == pytest.approx(1000, rel=0.01)
    assert not b.done(200) and T.Budget(minutes=1, elapsed=60.0).done(0)
    assert T.Budget(steps=5).total_steps(3) == 5 and T.Budget(steps=5).done(5) and not T.Budget(steps=5).done(4)
    with pytest.raises(ValueError, match="minutes=M"):
        T.Budget()
    with pytest.raises(ValueError, match="whole number"):
        T.Budget(steps=2.5)


# ----------------------------------------------------------------------------------------------
# loss: mask and label smoothing


def test_loss_ignores_masked_positions_and_matches_a_hand_computation():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7)
    labels = torch.tensor([[-100, -100, 3, 4, -100], [-100, 1, 2, -100, -100]])
    loss = T.loss_fn(logits, labels)
    picked = [(0, 2, 3), (0, 3, 4), (1, 1, 1), (1, 2, 2)]
    by_hand = -sum(F.log_softmax(logits[b, t], -1)[y] for b, t, y in picked) / 4
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-6)
    noisy = logits.clone()
    noisy[labels == -100] = 1e4 * torch.randn_like(noisy[labels == -100])  # garbage where there is no target
    assert T.loss_fn(noisy, labels).item() == pytest.approx(loss.item(), rel=1e-6)


def test_label_smoothing_mixes_in_the_uniform_distribution():
    torch.manual_seed(1)
    logits = torch.randn(1, 4, 9)
    labels = torch.tensor([[2, -100, 5, 0]])
    eps = 0.1
    logp = F.log_softmax(logits[0, [0, 2, 3]], -1)
    y = torch.tensor([2, 5, 0])
    nll = -logp[torch.arange(3), y].mean()
    uniform = -logp.mean(-1).mean()
    expected = (1 - eps) * nll + eps * uniform
    assert T.loss_fn(logits, labels, eps).item() == pytest.approx(expected.item(), rel=1e-6)
    assert T.loss_fn(logits, labels, eps).item() != pytest.approx(T.loss_fn(logits, labels).item(), rel=1e-3)


def test_a_batch_without_targets_gives_zero_not_nan():
    loss = T.loss_fn(torch.randn(2, 3, 5), torch.full((2, 3), -100))
    assert loss.item() == 0.0


def _loss_and_grads(model, batch, logits_at, smoothing=0.1):
    model.zero_grad(set_to_none=True)
    at = batch.labels != -100 if logits_at else None
    loss = T.loss_fn(model(batch.input_ids, batch.prefix_len, logits_at=at), batch.labels, smoothing)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize(
    "kw", [{}, {"tie_weights": False}, {"bottleneck_dim": 4, "n_layer": 3, "positional": "learned"}]
)
def test_the_output_layer_at_target_positions_alone_gives_the_same_loss_and_gradients(kw):
    """Training scores only the target positions (logits_at=labels != -100): the loss and every gradient must equal
    those of the full (B, T, vocab) logits; the controls show the comparison would catch a wrong row or a dropped one."""
    model, _ = tiny(dropout=0.0, **kw)  # dropout would draw other masks for the two passes
    batch = next(iter(toy_batcher()))
    at = batch.labels != -100
    assert 0 < int(at.sum()) < at.numel()  # French positions to skip, English ones to keep
    full_logits = model(batch.input_ids, batch.prefix_len)
    picked = model(batch.input_ids, batch.prefix_len, logits_at=at)
    assert picked.shape == (int(at.sum()), 60)
    torch.testing.assert_close(picked, full_logits[at], rtol=1e-5, atol=1e-6)  # row by row, in the same order
    full, full_grads = _loss_and_grads(model, batch, logits_at=False)
    fast, fast_grads = _loss_and_grads(model, batch, logits_at=True)
    torch.testing.assert_close(fast, full, rtol=1e-6, atol=0.0)
    for name, grad in full_grads.items():
        torch.testing.assert_close(
            fast_grads[name], grad, rtol=1e-4, atol=1e-7, msg=lambda m, name=name: f"{name}: {m}"
        )
    # controls: the target rows shifted by one position (labels[t] read at t + 1), and one target row dropped
    shifted = torch.zeros_like(at)
    shifted[:, 1:] = at[:, :-1]
    wrong = T.loss_fn(model(batch.input_ids, batch.prefix_len)[shifted], batch.labels, 0.1)
    assert not torch.allclose(wrong, full, rtol=1e-3)
    with pytest.raises(ValueError, match="target rows alone"):
        T.loss_fn(picked[1:], batch.labels)


def test_logits_at_must_be_a_bool_mask_shaped_like_the_input():
    model, _ = tiny()
    ids, plen = torch.tensor([[1, 5, 2, 6, 3]]), torch.tensor([3])
    for bad in (torch.tensor([[0, 0, 0, 1, 1]]), torch.ones(1, 4, dtype=torch.bool), [[False] * 5]):
        with pytest.raises(ValueError, match="labels != -100"):
            model(ids, plen, logits_at=bad)


def test_evaluate_loss_of_a_uniform_model_is_log_vocab():
    model, cfg = tiny(vocab=60)
    with torch.no_grad():
        model.lm_head.weight.zero_()  # tied: zero embeddings too, so every logit is 0
    loss, ppl = T.evaluate_loss(model, toy_valid(), "cpu")
    assert loss == pytest.approx(math.log(60), rel=1e-5) and ppl == pytest.approx(60, rel=1e-4)


# ----------------------------------------------------------------------------------------------
# optimizer, precision


def test_adamw_decays_only_linear_matrices():
    model, cfg = tiny(optimizer="adamw")  # AdamW alone; Muon beside it: tests/training/test_optim.py
    opt = optim.make_optimizer(model, cfg, "cpu")
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == cfg.weight_decay and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    assert decayed and all(n.endswith(".weight") and ("qkv" in n or "proj" in n or "fc" in n) for n in decayed)
    assert "tok_emb.weight" in {names[id(p)] for p in no_decay["params"]}  # tied head included once, no decay
    every = [id(p) for g in opt.param_groups for p in g["params"]]
    assert sorted(every) == sorted(id(p) for p in model.parameters()) and len(every) == len(set(every))


def test_precision_on_cpu_is_fp32_unless_asked():
    assert runtime.resolve_precision("cpu") == "fp32"
    assert not T.make_scaler("cpu").is_enabled()
    with T.autocast_context("cpu"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    with T.autocast_context("cpu", "bf16"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with T.autocast_context("cpu", "fp16"):  # the T4's format, emulated: what the fp16 tests below run
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float16
    assert T.make_scaler("cpu", "fp16").is_enabled() and not T.make_scaler("cpu", "bf16").is_enabled()
    with pytest.raises(ValueError, match="precision='fp8' is not known"):
        runtime.resolve_precision("cpu", "fp8")


# ----------------------------------------------------------------------------------------------
# the loop


def test_step_budget_is_exact_and_the_loss_falls(tmp_path):
    model, cfg = tiny(steps=37, log_interval=5, eval_interval=10)
    result = T.train(model, toy_batcher(), toy_valid(), cfg, tmp_path, progress=False)
    opt_state = ck.load_checkpoint(tmp_path)["optimizer"]["adamw"]["state"]  # Muon's own state counts no steps
    assert result.steps == 37 and all(int(s["step"]) == 37 for s in opt_state.values())
    assert result.history[-1]["step"] == 37 and "val_loss" in result.history[-1]
    assert [h["step"] for h in result.history if "val_loss" in h] == [10, 20, 30, 37]
    assert result.tokens == sum(
        h["tokens"] - p["tokens"] for p, h in zip([{"tokens": 0}] + result.history, result.history)
    )
    assert result.history[-1]["loss"] < result.history[0]["loss"]
    again = T.train(model, toy_batcher(), toy_valid(), cfg, tmp_path, progress=False)  # already done: no more steps
    assert again.steps == 37 and again.resumed_from == 37


def test_nan_loss_stops_naming_the_step_and_last_good_checkpoint(tmp_path, monkeypatch):
    model, cfg = tiny(steps=30, checkpoint_every_steps=5)
    calls = {"n": 0}
    real = T.loss_fn

    def poisoned(logits, labels, label_smoothing=0.0):
        calls["n"] += 1
        loss = real(logits, labels, label_smoothing)
        return loss * float("nan") if calls["n"] == 12 else loss

    monkeypatch.setattr(T, "loss_fn", poisoned)
    with pytest.raises(T.NonFiniteLossError) as err:
        T.train(model, toy_batcher(), toy_valid(), cfg, tmp_path, progress=False)
    msg = str(err.value)
    assert "at step 12" in msg and "checkpoint.pt (step 10)" in msg
    assert all(torch.isfinite(p).all() for p in model.parameters())  # never updated with the NaN
    assert ck.load_checkpoint(tmp_path)["step"] == 10


def test_nan_gradients_stop_before_the_update(tmp_path):
    model, cfg = tiny(steps=30)
    calls = {"n": 0}

    def poison(grad):
        calls["n"] += 1
        return grad * float("inf") if calls["n"] == 4 else grad

    model.ln_f.weight.register_hook(poison)
    before = {}

    def remember(record, history):
        before.update({k: v.clone() for k, v in model.state_dict().items()})

    cfg.log_interval = 1
    with pytest.raises(T.NonFiniteLossError, match="gradients became .* at step 4") as err:
        T.train(model, toy_batcher(), toy_valid(), cfg, None, progress=False, callback=remember)
    assert "No checkpoint has been saved yet" in str(err.value)
    for k, v in model.state_dict().items():  # the weights after step 3, untouched by step 4
        assert torch.equal(v, before[k]), k


def test_out_of_memory_names_the_token_budget(monkeypatch):
    model, cfg = tiny(steps=5)

    def boom(*a, **kw):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(model, "forward", boom)
    with pytest.raises(T.OutOfMemoryError, match=r"max_tokens=512 .*Lower max_tokens, e.g. to 256"):
        T.train(model, toy_batcher(), None, cfg, None, progress=False)


def test_other_errors_are_not_reported_as_out_of_memory(monkeypatch):
    model, cfg = tiny(steps=5)

    def boom(*a, **kw):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(model, "forward", boom)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        T.train(model, toy_batcher(), None, cfg, None, progress=False)


# ----------------------------------------------------------------------------------------------
# the T4's code path, fp16 autocast with a GradScaler, run on the CPU


def _fp16_run(tmp_path, steps=12, **kw):
    model, cfg = tiny(steps=steps, precision="fp16", checkpoint_every_steps=4, log_interval=1, **kw)
    return model, cfg


def test_fp16_with_a_grad_scaler_trains_on_cpu(tmp_path):
    model, cfg = _fp16_run(tmp_path, steps=25)
    run = T.TrainingRun(model, toy_batcher(), toy_valid(), cfg, None, progress=False)
    assert run.precision == "fp16" and run.scaler.is_enabled() and run.scaler.get_scale() == 65536.0
    model, cfg = _fp16_run(tmp_path, steps=25)
    result = T.train(model, toy_batcher(), toy_valid(), cfg, tmp_path, progress=False)
    assert result.steps == 25 and result.history[-1]["loss"] < result.history[0]["loss"]
    assert all(p.dtype == torch.float32 for p in model.parameters()), "weights stay fp32; only the forward is fp16"
    assert ck.load_checkpoint(tmp_path)["scaler"]["scale"] > 0, "the scaler's state is saved with the checkpoint"


def _overflow_at(step_to_poison: int):
    """A gradient hook that turns the gradients of one step into inf, as an fp16 overflow does."""
    calls = {"n": 0}

    def hook(grad):
        calls["n"] += 1
        return grad * float("inf") if calls["n"] == step_to_poison else grad

    return hook


def test_an_overflowing_fp16_step_is_skipped_and_the_scale_halved(tmp_path):
    model, cfg = _fp16_run(tmp_path, steps=6)
    model.ln_f.weight.register_hook(_overflow_at(3))
    weights = {}

    def remember(record, history):  # log_interval=1: called after every step
        weights[record["step"]] = {k: v.clone() for k, v in model.state_dict().items()}

    result = T.train(model, toy_batcher(), toy_valid(), cfg, None, progress=False, callback=remember)
    assert result.steps == 6 and result.skipped_steps == 1, "the scaler skips the inf step instead of stopping"
    for k in weights[2]:
        assert torch.equal(weights[2][k], weights[3][k]), f"{k} changed in the skipped step"
    assert any(not torch.equal(weights[3][k], weights[4][k]) for k in weights[3]), "training goes on after it"
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_fp16_run_cut_after_a_skipped_step_resumes_to_the_same_weights_and_scale(tmp_path):
    """Resume in the middle of an fp16 run: the scaler's halved scale must come back with the weights."""

    class Disconnect(Exception):
        pass

    def cut_at(step):
        def callback(record, history):
            if record["step"] == step:
                raise Disconnect

        return callback

    straight, cfg = _fp16_run(tmp_path, steps=12)
    straight.ln_f.weight.register_hook(_overflow_at(3))
    T.train(straight, toy_batcher(), toy_valid(), cfg, tmp_path / "straight", progress=False)
    scale = ck.load_checkpoint(tmp_path / "straight")["scaler"]["scale"]
    assert scale == 32768.0, "one skipped step halves the initial 65,536"

    cut, cfg = _fp16_run(tmp_path, steps=12)
    cut.ln_f.weight.register_hook(_overflow_at(3))
    with pytest.raises(Disconnect):
        T.train(cut, toy_batcher(), toy_valid(), cfg, tmp_path / "cut", progress=False, callback=cut_at(6))
    saved = ck.load_checkpoint(tmp_path / "cut")
    assert saved["step"] == 4 and saved["scaler"]["scale"] == 32768.0
    resumed, cfg = _fp16_run(tmp_path, steps=12, seed=1)  # a fresh process: other initial weights
    result = T.train(resumed, toy_batcher(), toy_valid(), cfg, tmp_path / "cut", progress=False)
    assert result.resumed_from == 4 and result.steps == 12 and result.skipped_steps == 1
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), f"{name} differs after resuming the fp16 run"
    assert ck.load_checkpoint(tmp_path / "cut")["scaler"]["scale"] == scale


# The t4 preset end to end in fp16 on a CPU (train_command, checkpoint, validation) is in tests/training/test_t4_path.py,
# at one layer and with every forward pass watched for inf/NaN (it cost ~350 s here at six layers).
