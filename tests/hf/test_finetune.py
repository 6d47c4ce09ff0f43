"""Pretrained-model fine-tuning (helpers.hf.finetune, `python -m helpers finetune`), offline.

Both families are tested with the tiny random models of helpers.hf.tiny (a 2-layer MarianMT with a sentencepiece
tokenizer, a 2-layer Llama with a byte-level BPE tokenizer that has no pad token), trained on the built-in corpus:
generation that stops at the end of the sentence, fine-tune -> save -> load -> evaluate through the shared
evaluation, resume (a run killed with SIGKILL and rerun ends with the weights of an uninterrupted one, bit for bit),
the time budget, the stop on a non-finite loss, fp16 with a gradient scaler (the T4 path) on the CPU, LoRA, and a
scratch run folder refused. The fine-tuning runs on transformers' Trainer and Seq2SeqTrainer. Checks that could
pass vacuously are shown to fail on a planted mistake. The example format is tested in test_translator.py, loading
and its messages in test_loading.py.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from helpers import cli, runtime
from helpers.evaluation import evaluate
from helpers.hf import finetune, loading
from helpers.run_folder import TEST_FILES
from helpers.text.data import clean_pairs, split_pairs
from helpers.text.sources import load_path
from tests.hf.test_tiny import load

# ---------------------------------------------------------------------------------------------- fine-tune, save, load


@pytest.fixture(scope="module")
def trained(folders, pairs, tmp_path_factory):
    """Each tiny model fine-tuned until it has learnt 8 pairs by heart, saved, and its folder."""
    out = {}
    for kind in ("causal", "seq2seq"):
        tr = load(folders, kind)
        run = tmp_path_factory.mktemp(f"ft_{kind}")
        cfg = finetune.FinetuneConfig(lr=1e-2, batch_size=8, warmup_steps=5, seed=0)
        result = finetune.finetune(tr, pairs[:8], run, steps=150, cfg=cfg, monitor=pairs[:8], progress=False)
        out[kind] = (tr, run, result)
    return out


@pytest.mark.training
@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_finetune_learns_and_generation_stops_at_the_end_of_the_sentence(trained, pairs, kind):
    """After learning 8 pairs, greedy and beam output are the references exactly: nothing after <eos>."""
    tr, _, result = trained[kind]
    sources, refs = [fr for fr, _ in pairs[:8]], [en for _, en in pairs[:8]]
    for beams in (1, 3):
        hyps = tr.translate(sources, beams=beams)
        right = sum(h == r for h, r in zip(hyps, refs))
        assert right >= 7, f"{kind}, beams {beams}: {list(zip(hyps, refs))}"
    assert result.monitor[0]["step"] == 0 and result.monitor[-1]["step"] == result.steps == 150
    assert result.monitor[-1]["bleu"] > result.monitor[0]["bleu"] + 50
    trainable = sum(p.numel() for p in tr.model.parameters() if p.requires_grad)
    assert result.tokens > 0 and result.trainable == trainable
    if kind == "seq2seq":  # Marian's sinusoidal positions are not saved, so they must not train (freeze_unsaved)
        assert trainable == result.parameters - sum(
            p.numel() for n, p in tr.model.named_parameters() if "embed_positions" in n
        )
    else:
        assert trainable == result.parameters


@pytest.mark.training
@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_saved_folder_reloads_and_scores_through_the_shared_evaluation(trained, pairs, kind):
    tr, run, _ = trained[kind]
    again = loading.load_pretrained(run)
    sources = [fr for fr, _ in pairs[:8]]
    assert again.translate(sources) == tr.translate(sources)
    ev, hyps = evaluate.evaluate_pairs(again, pairs[:8], test_set="memorised", beams=1)
    assert set(evaluate.EVALUATION_KEYS) <= set(ev)
    assert ev["bleu"] > 80 and hyps == tr.translate(sources)
    record = evaluate.metrics_record(model={"name": again.name, "parameters": again.parameters()}, evaluations=[ev])
    assert record["model"]["parameters"] == sum(p.numel() for p in tr.model.parameters())


@pytest.mark.training
def test_resume_continues_exactly(folders, pairs, tmp_path):
    """6 steps at once = 3 steps, a new session from the checkpoint, 3 more: the same weights."""
    cfg = finetune.FinetuneConfig(lr=1e-3, batch_size=4, warmup_steps=2, seed=0)
    torch.manual_seed(0)
    straight = load(folders, "seq2seq")  # Marian has dropout: the random state must be restored too
    finetune.finetune(straight, pairs[:40], tmp_path / "a", steps=6, cfg=cfg, progress=False)
    torch.manual_seed(0)
    first = load(folders, "seq2seq")
    finetune.finetune(first, pairs[:40], tmp_path / "b", steps=3, cfg=cfg, progress=False)
    second = load(folders, "seq2seq")  # from the base model again: the checkpoint must supply the weights
    result = finetune.finetune(second, pairs[:40], tmp_path / "b", steps=6, cfg=cfg, progress=False)
    assert result.resumed_from == 3 and result.steps == 6
    a, b = straight.model.state_dict(), second.model.state_dict()
    for name in a:
        torch.testing.assert_close(a[name], b[name], msg=name)


# SIGKILL-and-rerun (below). The child fine-tunes with a checkpoint every step, in as many threads as this process
# (a matrix product may sum in another order with another thread count).
_CHILD = """
import sys, torch
from helpers.hf import finetune, loading
from helpers.text.sources import load_path
torch.set_num_threads(int(sys.argv[4]))
pairs, _ = load_path("builtin", None, limit=1500, seed=0)
cfg = finetune.FinetuneConfig(lr=1e-3, batch_size=4, warmup_steps=2, seed=0, checkpoint_every_minutes=0.0)
finetune.finetune(loading.load_pretrained(sys.argv[1]), pairs[:40], sys.argv[2], steps=int(sys.argv[3]), cfg=cfg,
                  progress=False)
"""


@pytest.mark.training
def test_killed_and_rerun_ends_with_the_weights_of_an_uninterrupted_run(folders, pairs, tmp_path):
    """A disconnect, for real: the run is killed (SIGKILL, no clean-up) after a checkpoint, in its third epoch (10 steps
    an epoch); rerunning with the same folder finishes the 40 steps. Measured: the weights are bit-identical to those of
    an uninterrupted run (torch.equal, every tensor; Marian has dropout, so the random states matter too), on a CPU
    in fp32. Trainer restores the weights, AdamW's moments, the scheduler, the random states and the data position
    (ignore_data_skip=False skips the batches already seen), and our sampler draws each epoch's batches from
    (data_seed, epoch) alone. On a GPU, nondeterministic kernels (atomics in some backward passes) can make even two
    uninterrupted runs differ in the last bits; there assert_close's default tolerance is the promise to test."""
    cfg = finetune.FinetuneConfig(lr=1e-3, batch_size=4, warmup_steps=2, seed=0)
    straight = load(folders, "seq2seq")
    finetune.finetune(straight, pairs[:40], tmp_path / "straight", steps=40, cfg=cfg, progress=False)

    out, log = tmp_path / "killed", tmp_path / "child.log"
    argv = [sys.executable, "-c", _CHILD, str(folders["seq2seq"]), str(out), "40", str(torch.get_num_threads())]
    with log.open("w") as stderr:
        child = subprocess.Popen(
            argv, cwd=Path(__file__).parents[2], stderr=stderr, env={**os.environ, "HF_HUB_OFFLINE": "1"}
        )
    written = (out / "trainer").glob  # trainer_state.json is what Trainer writes last into a checkpoint
    deadline = time.monotonic() + 300
    while not any(int(p.parent.name[11:]) >= 22 for p in written("checkpoint-*/trainer_state.json")):
        assert child.poll() is None, f"the child ended before it could be killed:\n{log.read_text()[-2000:]}"
        assert time.monotonic() < deadline, "no checkpoint-22 after 5 minutes"
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    assert not (out / "checkpoint").exists(), "killed before the end: no final model yet"

    again = load(folders, "seq2seq")
    result = finetune.finetune(again, pairs[:40], out, steps=40, cfg=cfg, progress=False)
    # from the last whole checkpoint: the kill may cut the next one short (the rerun removes it), or the one found
    assert 21 <= result.resumed_from < 40 and result.steps == 40
    a, b = straight.model.state_dict(), again.model.state_dict()
    assert [name for name in a if not torch.equal(a[name], b[name])] == []


@pytest.mark.training
def test_resume_in_a_later_epoch_needs_our_sampler(folders, pairs, tmp_path, monkeypatch):
    """Resumed in the second epoch (10 steps an epoch), the run ends with the weights of 25 steps at once. The
    control: Trainer's own length-grouped sampler shuffles from the global random state, which a resumed run has
    restored to the checkpoint's, not to the one an uninterrupted run had at that epoch's start."""
    cfg = finetune.FinetuneConfig(lr=1e-3, batch_size=4, warmup_steps=2, seed=0)

    def resumed_is_straight(name: str) -> bool:
        straight = load(folders, "seq2seq")
        finetune.finetune(straight, pairs[:40], tmp_path / f"{name}-a", steps=25, cfg=cfg, progress=False)
        finetune.finetune(
            load(folders, "seq2seq"), pairs[:40], tmp_path / f"{name}-b", steps=13, cfg=cfg, progress=False
        )
        again = load(folders, "seq2seq")
        finetune.finetune(again, pairs[:40], tmp_path / f"{name}-b", steps=25, cfg=cfg, progress=False)
        a, b = straight.model.state_dict(), again.model.state_dict()
        return all(torch.equal(a[k], b[k]) for k in a)

    assert resumed_is_straight("ours")
    monkeypatch.delattr(finetune._Steps, "_get_train_sampler")
    assert not resumed_is_straight("trainers")


def test_a_finished_run_rerun_trains_no_further_step(folders, pairs, tmp_path):
    """Trainer checks max_steps after a step: resumed at its budget, it would take one more. Ours loads the weights."""
    cfg = finetune.FinetuneConfig(lr=1e-3, batch_size=4, warmup_steps=2, seed=0)
    first = load(folders, "causal")
    finetune.finetune(first, pairs[:40], tmp_path, steps=3, cfg=cfg, progress=False)
    again = load(folders, "causal")
    result = finetune.finetune(again, pairs[:40], tmp_path, steps=3, cfg=cfg, progress=False)
    assert result.steps == 3 and result.resumed_from == 3
    a, b = first.model.state_dict(), again.model.state_dict()
    assert [name for name in a if not torch.equal(a[name], b[name])] == []


@pytest.mark.training
def test_time_budget_stops_the_run_and_a_rerun_continues_its_clock(folders, pairs, tmp_path):
    """minutes=: training time, earlier sessions included, the monitor's scoring and the saves not counted."""
    cfg = finetune.FinetuneConfig(lr=1e-3, batch_size=4, seed=0, checkpoint_every_minutes=0.005)
    kwargs = dict(cfg=cfg, monitor=pairs[:8], monitor_every_minutes=0.005, progress=False)
    first = finetune.finetune(load(folders, "causal"), pairs[:40], tmp_path, minutes=0.02, **kwargs)
    assert 1.2 <= first.seconds < 4 and first.steps > 1
    minutes = [m["minutes"] for m in first.monitor]
    assert len(minutes) >= 3 and minutes == sorted(minutes) and first.monitor[-1]["step"] == first.steps
    more = finetune.finetune(load(folders, "causal"), pairs[:40], tmp_path, minutes=0.04, **kwargs)
    assert more.resumed_from == first.steps and more.steps > first.steps and 2.4 <= more.seconds < 6
    assert more.monitor[: len(first.monitor) - 1] == first.monitor[:-1], "the curve goes on from the checkpoint's"


def _poisoned(folders, at_call: int):
    """The tiny LM, whose loss is NaN at its ``at_call``-th training forward pass."""
    tr = load(folders, "causal")
    calls = []

    def hook(module, args, output):
        if module.training:
            calls.append(1)
            if len(calls) == at_call:
                output.loss = output.loss * float("nan")
        return output

    tr.model.register_forward_hook(hook)
    return tr


def test_a_non_finite_loss_stops_before_the_update(folders, pairs, tmp_path, monkeypatch):
    """fp32: the step whose loss is NaN raises, and its update is not applied (every weight stays finite). The
    control: Trainer's own step applies it (clipping a NaN gradient gives NaN) and trains on."""
    cfg = finetune.FinetuneConfig(lr=1e-3, batch_size=4, seed=0)
    tr = _poisoned(folders, 3)
    with pytest.raises(finetune.NonFiniteLossError, match="loss is nan at step 3; this update was not applied"):
        finetune.finetune(tr, pairs[:20], tmp_path / "ours", steps=5, cfg=cfg, progress=False)
    assert all(torch.isfinite(p).all() for p in tr.model.parameters())

    monkeypatch.setattr(finetune._Steps, "training_step", finetune.Trainer.training_step)
    tr = _poisoned(folders, 3)
    result = finetune.finetune(tr, pairs[:20], tmp_path / "plain", steps=5, cfg=cfg, progress=False)
    assert result.steps == 5 and not all(torch.isfinite(p).all() for p in tr.model.parameters())


def test_resume_with_another_configuration_is_refused(folders, pairs, tmp_path):
    cfg = finetune.FinetuneConfig(lr=1e-3, batch_size=4, seed=0)
    finetune.finetune(load(folders, "causal"), pairs[:20], tmp_path, steps=2, cfg=cfg, progress=False)
    with pytest.raises(ValueError, match="lr"):
        finetune.finetune(load(folders, "causal"), pairs[:20], tmp_path, steps=4,
                          cfg=finetune.FinetuneConfig(lr=5e-4, batch_size=4, seed=0), progress=False)  # fmt: skip


def test_fp16_with_gradient_scaler_runs_on_cpu(folders, pairs, tmp_path):
    """The T4's code path (autocast to fp16, GradScaler) runs here; resuming restores the scaler."""
    cfg = finetune.FinetuneConfig(lr=1e-3, batch_size=4, precision="fp16", seed=0)
    tr, dtypes = load(folders, "causal"), set()
    tr.model.model.layers[0].mlp.register_forward_hook(lambda m, a, out: dtypes.add(out.dtype) if m.training else None)
    result = finetune.finetune(tr, pairs[:20], tmp_path, steps=3, cfg=cfg, progress=False)
    assert result.precision == "fp16" and dtypes == {torch.float16}, "training ran under autocast to fp16"
    assert result.skipped_steps < result.steps, "the scaler skipped every step: nothing was trained"
    path = finetune.last_checkpoint(tmp_path / "trainer") / "scaler.pt"  # Trainer saves the scaler
    scaler = torch.load(path, weights_only=False)
    assert scaler["scale"] > 0, "an enabled GradScaler has state to save"
    torch.save({**scaler, "scale": 1024.0}, path)  # not where a new scaler starts (65536)
    finetune.finetune(load(folders, "causal"), pairs[:20], tmp_path, steps=5, cfg=cfg, progress=False)
    path = finetune.last_checkpoint(tmp_path / "trainer") / "scaler.pt"
    assert torch.load(path, weights_only=False)["scale"] <= 1024.0, "the resumed run started from the saved scale"


def test_finetune_command_passes_precision_through_to_trainer(folders, tmp_path):
    # the GPU rehearsal of a T4 (finetune --precision fp16 on a bf16 GPU) needs the flag to reach Trainer: a command
    # that dropped it would train in fp32 here (auto on a CPU) and record fp32
    args = cli.build_parser().parse_args(
        ["finetune", "--model", "m", "--data", "builtin", "--steps", "2", "--out", "o"]
    )
    assert args.precision == "auto"
    out = tmp_path / "ft16"
    result = cli.finetune_command(str(folders["causal"]), "builtin", out, steps=2, limit=300, precision="fp16",
                                  progress=False, stderr=io.StringIO())  # fmt: skip
    assert result.precision == "fp16" and finetune.load_finetuned_info(out)["config"]["precision"] == "fp16"


def test_precision_rules(folders):
    tr = load(folders, "causal")
    assert finetune.finetune_precision(tr, "auto") == "fp32", "a CPU fine-tunes in fp32"
    assert finetune.finetune_precision(tr, "fp16") == "fp16"
    tr.model.config.model_type = "gemma3_text"
    assert finetune.finetune_precision(tr, "fp16") == "fp32", "Gemma 3 overflows in fp16"


@pytest.mark.training
@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft not installed")
def test_lora_resume_continues_exactly(folders, pairs, tmp_path):
    """LoRA, a decoder-only model: 6 steps at once = 3 steps, a new session from the base model, 3 more."""
    cfg = finetune.FinetuneConfig(lr=1e-3, batch_size=4, warmup_steps=2, lora=True, lora_rank=4, seed=0)
    straight = load(folders, "causal")
    finetune.finetune(straight, pairs[:40], tmp_path / "a", steps=6, cfg=cfg, progress=False)
    finetune.finetune(load(folders, "causal"), pairs[:40], tmp_path / "b", steps=3, cfg=cfg, progress=False)
    second = load(folders, "causal")
    result = finetune.finetune(second, pairs[:40], tmp_path / "b", steps=6, cfg=cfg, progress=False)
    assert result.resumed_from == 3
    a, b = straight.model.state_dict(), second.model.state_dict()
    assert any("lora_" in name for name in a)
    for name in a:
        torch.testing.assert_close(a[name], b[name], msg=name)
    assert (tmp_path / "b" / "checkpoint" / "adapter_config.json").is_file(), "LoRA saves its adapters only"


@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft not installed")
def test_lora_trains_adapters_only_and_saves_a_plain_model(folders, pairs, tmp_path):
    tr = load(folders, "causal")
    cfg = finetune.FinetuneConfig(lr=1e-2, batch_size=8, lora=True, lora_rank=4, seed=0)
    result = finetune.finetune(tr, pairs[:8], tmp_path, steps=20, cfg=cfg, progress=False)
    assert 0 < result.trainable < result.parameters / 2
    again = loading.load_pretrained(tmp_path)
    assert not hasattr(again.model, "peft_config"), "loading merges the adapters into a plain model"
    sources = [fr for fr, _ in pairs[:8]]
    assert again.translate(sources) == tr.translate(sources)
    base = load(folders, "causal")
    assert again.translate(sources) != base.translate(sources), "the adapters learnt nothing (or were not merged)"
    assert result.history[-1]["loss"] < result.history[0]["loss"]


# ---------------------------------------------------------------------------------------------- the command line


def test_finetune_command_then_evaluate_and_translate(folders, tmp_path):
    out = tmp_path / "ft"
    err = io.StringIO()
    result = cli.finetune_command(str(folders["causal"]), "builtin", out, steps=5, limit=1500, seed=0, stderr=err,
                                  progress=False)  # fmt: skip
    assert result.steps == 5
    text = err.getvalue()
    assert "lines read" in text and "no pad token" in text and "python -m helpers evaluate --checkpoint" in text
    # the same data, seed and limit give the split `train` would make: the same test sets
    pairs, _ = load_path("builtin", None, limit=1500, seed=0)
    splits = split_pairs(clean_pairs(pairs)[0], seed=0)
    for name, expected in ((n, splits.new if "new" in n else splits.test) for n in TEST_FILES):
        lines = (out / TEST_FILES[name]).read_text().splitlines()
        assert lines == [f"{fr}\t{en}" for fr, en in expected]
    stdout = io.StringIO()
    record = cli.evaluate_command(out, beams=1, stdout=stdout)
    assert [ev["test_set"] for ev in record["evaluations"]] == list(TEST_FILES)
    assert record["model"]["parameters"] == result.parameters and record["model"]["step"] == 5
    assert json.loads((out / "eval.json").read_text())["schema"] == evaluate.METRICS_SCHEMA
    translated = io.StringIO()
    n = cli.translate_command(out, stdin=io.StringIO("Bonjour.\n\nJe suis là.\n"), stdout=translated)
    assert n == 3 and len(translated.getvalue().splitlines()) == 3


def test_finetune_cli_parses_and_refuses_a_missing_budget(folders, tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["finetune", "--model", str(folders["causal"]), "--data", "builtin", "--out", str(tmp_path)])
    assert "--minutes" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- bad input


def test_finetune_refuses_a_scratch_run_folder(tmp_path, folders, pairs):

    runtime.atomic_torch_save({"step": 1}, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match="scratch-model run"):
        finetune.finetune(load(folders, "causal"), pairs[:8], tmp_path, steps=1, progress=False)
