"""Checkpoints: atomic writes, weights_only loading, RNG states, configuration checks, and resume after SIGKILL."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import cli, runtime
from helpers.nn import build_model
from helpers.training import checkpoint as ck
from helpers.training import config as C
from helpers.training import optim
from helpers.training import train as T
from tests.training.test_train import toy_batcher, toy_valid  # noqa: E402  (toy batches of random ids)


def _tiny_model(vocab=60, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = C.preset_config("tiny", **kw)
    return build_model(cfg.model_config(vocab)), cfg


# ----------------------------------------------------------------------------------------------
# random number generators


def test_rng_state_round_trip_restores_every_generator():
    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    state = ck.rng_state()
    first = (random.random(), np.random.rand(), torch.rand(3))
    ck.set_rng_state(state)
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert first[0] == again[0] and first[1] == again[1] and torch.equal(first[2], again[2])


def test_rng_state_survives_weights_only_load(tmp_path):
    path = runtime.atomic_torch_save({"rng": ck.rng_state()}, tmp_path / "r.pt")
    loaded = torch.load(path, weights_only=True)["rng"]
    a = torch.rand(2)
    ck.set_rng_state(loaded)
    # a restored state replays the draws made after it was taken
    b = torch.rand(2)
    assert torch.equal(a, b)


# ----------------------------------------------------------------------------------------------
# atomic writes and loading


def test_checkpoint_loads_with_weights_only(tmp_path):
    model, cfg = _tiny_model()
    opt = optim.make_optimizer(model, cfg, "cpu")
    ck.save_checkpoint(
        tmp_path,
        model=model,
        config={"model": model.config.to_dict()},
        step=3,
        optimizer=opt,
        data_state={"epoch": 1, "position": np.int64(4), "order": np.arange(3)},
        train_state={"tokens": 9},
    )
    raw = torch.load(tmp_path / "checkpoint.pt", weights_only=True)  # no pickled classes inside
    assert raw["step"] == 3
    loaded = ck.load_checkpoint(tmp_path)
    assert loaded["data_state"] == {"epoch": 1, "position": 4, "order": [0, 1, 2]}
    assert loaded["config"]["model"]["d_model"] == model.config.d_model
    info = json.loads((tmp_path / "checkpoint.json").read_text())
    assert info["step"] == 3


def test_a_crash_during_save_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    model, _ = _tiny_model()
    ck.save_checkpoint(tmp_path, model=model, config={"a": 1}, step=1)
    good = (tmp_path / "checkpoint.pt").read_bytes()

    real_save = torch.save

    def dying_save(obj, f, *a, **kw):  # writes half a file, then the process "dies"
        f.write(b"\x80\x02partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        ck.save_checkpoint(tmp_path, model=model, config={"a": 1}, step=2)
    monkeypatch.setattr(torch, "save", real_save)
    assert (tmp_path / "checkpoint.pt").read_bytes() == good
    assert ck.load_checkpoint(tmp_path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


def crash_mid_save(folder, monkeypatch) -> bool:
    """Save step 1, then "die" half-way through saving step 2. True if step 1 is still what loads."""
    model, _ = _tiny_model()
    ck.save_checkpoint(folder, model=model, config={"a": 1}, step=1)
    assert ck.load_checkpoint(folder)["step"] == 1  # every writer below works when nothing goes wrong

    def dying_save(obj, f, *a, **kw):  # half a file, then the process is gone
        f.write(b"\x80\x02partial")
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(torch, "save", dying_save)
        with pytest.raises(KeyboardInterrupt):
            ck.save_checkpoint(folder, model=model, config={"a": 1}, step=2)
    try:
        return ck.load_checkpoint(folder)["step"] == 1
    except ValueError:  # "could not be read as a checkpoint": the good one was overwritten
        return False


def _open(path, mode):
    return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


def _write_in_place(path, write, mode):
    """Mutant of runtime._atomic_write: no temporary file, writes straight over the previous checkpoint."""
    with _open(path, mode) as f:
        write(f)
    return Path(path)


def _rename_in_finally(path, write, mode):
    """Mutant: a temporary file, but the rename sits in `finally`, so it also runs when the write died."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with _open(tmp, mode) as f:
            write(f)
    finally:
        os.replace(tmp, path)
    return path


def _rename_before_writing(path, write, mode):
    """Mutant: renames the temporary file over the old one as soon as it is opened, then writes into it."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with _open(tmp, mode) as f:
        os.replace(tmp, path)
        write(f)
    return path


@pytest.mark.parametrize(
    "writer, survives",
    [(None, True), (_write_in_place, False), (_rename_in_finally, False), (_rename_before_writing, False)],
    ids=["real _atomic_write", "mutant: in place", "mutant: rename in finally", "mutant: rename before writing"],
)
def test_a_crash_mid_save_keeps_the_old_checkpoint_only_with_a_truly_atomic_write(
    tmp_path, monkeypatch, writer, survives
):
    """The real writer must keep the old checkpoint through a crash; each plausible non-atomic writer, swapped in
    for runtime._atomic_write, must lose it: the check can fail on exactly the mistakes it is meant to catch."""
    if writer is not None:
        monkeypatch.setattr(runtime, "_atomic_write", writer)
    survived = crash_mid_save(tmp_path, monkeypatch)
    assert survived is survives, (
        "a crash mid-save destroyed the previous checkpoint"
        if survives
        else "this non-atomic writer kept the checkpoint through the crash: the check cannot tell it from the real one"
    )


def test_missing_checkpoint_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m helpers train"):
        ck.load_checkpoint(tmp_path)


# ----------------------------------------------------------------------------------------------
# configuration checks


def test_config_differences_name_each_field():
    old = {"model": {"d_model": 32, "n_layer": 2}, "train": {"lr": 1e-3, "steps": 10}}
    new = {"model": {"d_model": 64, "n_layer": 2}, "train": {"lr": 1e-3, "steps": 20}, "data": {"sha256": "x"}}
    assert ck.config_differences(old, new, ignore=("train.steps",)) == [
        ("data.sha256", "<absent>", "x"),
        ("model.d_model", 32, 64),
    ]
    assert ck.config_differences(old, old) == []


def test_resume_with_a_different_config_is_refused_naming_the_field(tmp_path):
    model, cfg = _tiny_model(steps=4)
    T.train(model, toy_batcher(), toy_valid(), cfg, tmp_path, progress=False)
    model2, cfg2 = _tiny_model(steps=8, lr=5e-3)
    with pytest.raises(runtime.ConfigMismatchError) as err:
        T.train(model2, toy_batcher(), toy_valid(), cfg2, tmp_path, progress=False)
    text = str(err.value)
    assert "train.lr: 0.003 in the checkpoint, 0.005 now" in text
    assert "train.steps" not in text  # a longer budget is a resume, not a different run
    model3, cfg3 = _tiny_model(steps=8, d_model=48, n_head=2)
    with pytest.raises(runtime.ConfigMismatchError, match="model.d_model: 32 in the checkpoint, 48 now"):
        T.train(model3, toy_batcher(), toy_valid(), cfg3, tmp_path, progress=False)


# the deleted levers' fields as each era's checkpoints held them, off: up to a224218 (subword regularisation, the
# moving average of the weights, joined pairs), eaae6aa to 6ee5a87 (the cool-down's shape) and 4eb61fb (made-up names)
ERAS = {
    "a224218": {"subword_alpha": None, "ema_decay": None, "concat_pairs": 0.0},
    "6ee5a87": {"cooldown_shape": "linear"},
    "4eb61fb": {"name_swap": 0.0},
}
ERA_OF = {lever: era for era, fields in ERAS.items() for lever in fields}


def _as_written_before_the_levers_were_deleted(folder, era, ema=None, **levers):
    """Rewrite a run's checkpoint as helpers of ``era`` wrote it: that era's lever fields in the configuration (off
    unless given), and, up to a224218, an ``"ema"`` entry (None unless given)."""
    raw = torch.load(folder / "checkpoint.pt", weights_only=True)
    config = json.loads(raw["config"])
    config["train"].update({**ERAS[era], **levers})
    raw["config"] = json.dumps(config)
    if era == "a224218":
        raw["ema"] = ema
    runtime.atomic_torch_save(raw, folder / "checkpoint.pt")
    return raw


@pytest.mark.parametrize("era", sorted(ERAS))
def test_a_checkpoint_from_before_the_deleted_levers_resumes_when_they_were_off(tmp_path, era):
    # without without_deleted_levers the resume is refused: "train.ema_decay: None in the checkpoint, '<absent>' now"
    model, cfg = _tiny_model(steps=4)
    T.train(model, toy_batcher(), toy_valid(), cfg, tmp_path, progress=False)
    _as_written_before_the_levers_were_deleted(tmp_path, era)
    model2, cfg2 = _tiny_model(steps=6)
    result = T.train(model2, toy_batcher(), toy_valid(), cfg2, tmp_path, progress=False)
    assert result.resumed_from == 4 and result.steps == 6
    assert "ema" not in torch.load(tmp_path / "checkpoint.pt", weights_only=True)  # nothing writes it any more


@pytest.mark.parametrize(
    "lever, commit",
    [
        ({"subword_alpha": 0.5}, "a224218"),
        ({"ema_decay": 0.998}, "a224218"),
        ({"concat_pairs": 0.25}, "a224218"),
        ({"cooldown_shape": "sqrt"}, "6ee5a87"),
        ({"name_swap": 0.5}, "4eb61fb"),
    ],
)
def test_a_checkpoint_trained_with_a_deleted_lever_is_refused_naming_it_and_the_commit(tmp_path, lever, commit):
    # a resume that dropped the lever silently would go on as another run than the one in the folder
    model, cfg = _tiny_model(steps=4)
    T.train(model, toy_batcher(), toy_valid(), cfg, tmp_path, progress=False)
    [(name, value)] = lever.items()
    _as_written_before_the_levers_were_deleted(tmp_path, ERA_OF[name], **lever)
    model2, cfg2 = _tiny_model(steps=6)
    with pytest.raises(
        runtime.ConfigMismatchError, match=rf"{name}={value!r}, which this version .* commit {commit}\)"
    ):
        T.train(model2, toy_batcher(), toy_valid(), cfg2, tmp_path, progress=False)
    off = {
        "train": {
            "lr": 1.0,
            "subword_alpha": None,
            "ema_decay": None,
            "concat_pairs": 0.0,
            "cooldown_shape": "linear",
            "name_swap": 0.0,
        },
        "model": {"d_model": 8},
    }
    assert C.without_deleted_levers(off) == {"train": {"lr": 1.0}, "model": {"d_model": 8}}


def test_a_translator_loads_the_moving_average_an_older_checkpoint_holds(tmp_path):
    # a loader that ignored the "ema" entry would translate an older averaged run with weights it never validated
    model, cfg = _tiny_model()
    ck.save_checkpoint(tmp_path, model=model, config={"model": model.config.to_dict(), "train": {}}, step=1)
    plain = ck.load_checkpoint(tmp_path)
    assert ck.inference_weights(plain) is plain["model"]  # a checkpoint written now: the trained weights
    averaged = {k: v + 1.0 for k, v in plain["model"].items()}
    _as_written_before_the_levers_were_deleted(
        tmp_path, "a224218", ema={"weights": averaged, "n_averaged": 3}, ema_decay=0.9
    )
    old = ck.load_checkpoint(tmp_path)
    assert all(torch.equal(averaged[k], v) for k, v in ck.inference_weights(old).items())


@pytest.mark.training
def test_resume_after_an_interruption_gives_the_uninterrupted_weights(tmp_path):
    """In-process version of the SIGKILL test: stop at step 13, checkpoints every 5, rerun to 20."""
    model, cfg = _tiny_model(steps=20, checkpoint_every_steps=5)
    T.train(model, toy_batcher(), toy_valid(), cfg, tmp_path / "straight", progress=False)

    class Stop(Exception):
        pass

    def stop_at_13(record, history):
        if record["step"] >= 13:
            raise Stop

    model_a, cfg_a = _tiny_model(steps=20, checkpoint_every_steps=5, log_interval=1)
    with pytest.raises(Stop):
        T.train(model_a, toy_batcher(), toy_valid(), cfg_a, tmp_path / "resumed", progress=False, callback=stop_at_13)
    assert ck.load_checkpoint(tmp_path / "resumed")["step"] == 10
    model_b, _ = _tiny_model(
        seed=123, steps=20, checkpoint_every_steps=5, log_interval=1
    )  # different init: must be overwritten
    result = T.train(model_b, toy_batcher(), toy_valid(), cfg_a, tmp_path / "resumed", progress=False)
    assert result.resumed_from == 10 and result.steps == 20
    for (name, a), (_, b) in zip(model.state_dict().items(), model_b.state_dict().items()):
        assert torch.equal(a, b), name


# ----------------------------------------------------------------------------------------------
# the key test: SIGKILL a training process, rerun the same command, get the uninterrupted weights


SCRIPT = textwrap.dedent(
    """
    import sys, torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    from helpers.cli import train_command
    data, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    train_command(data, None, None, steps, out, "tiny", 0,
                  overrides={"checkpoint_every_steps": 10, "checkpoint_minutes": 1e9}, progress=False)
    """
)


def _run(args, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, *map(str, args)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    )


@pytest.fixture
def pairs_file(tmp_path):
    from helpers.text.corpus import builtin_corpus

    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{fr}\t{en}\n" for fr, en in builtin_corpus(800, seed=3, difficulty=1)), encoding="utf-8")
    return path


@pytest.mark.training
def test_sigkill_then_rerun_ends_with_the_weights_of_an_uninterrupted_run(tmp_path, pairs_file):
    steps = 120
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    p_straight = _run([pairs_file, straight, steps])  # runs beside the killed one: one thread each
    p = _run([pairs_file, killed, steps])
    info = killed / "checkpoint.json"
    deadline = time.monotonic() + 120
    while p.poll() is None and time.monotonic() < deadline:
        if info.exists() and json.loads(info.read_text() or "{}").get("step", 0) >= 20:
            break
        time.sleep(0.005)
    time.sleep(0.05)  # let it run on past the checkpoint: that work is lost and must be redone identically
    os.kill(p.pid, signal.SIGKILL)  # no clean-up, no atexit, possibly in the middle of a step or a save
    _, err = p.communicate()
    assert p.returncode == -signal.SIGKILL, err.decode()[-3000:]
    step_at_kill = ck.load_checkpoint(killed)["step"]
    assert 20 <= step_at_kill < steps, "the run finished before it was killed: the test proves nothing; raise `steps`"

    p = _run([pairs_file, killed, steps])  # the same command again
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err.decode()[-3000:]
    _, err = p_straight.communicate(timeout=300)
    assert p_straight.returncode == 0, err.decode()[-3000:]
    a, b = ck.load_checkpoint(straight), ck.load_checkpoint(killed)
    assert a["step"] == b["step"] == steps
    assert a["train_state"]["tokens"] == b["train_state"]["tokens"]
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), f"{name} differs after resume from step {step_at_kill}"
    moments_a, moments_b = optimizer_tensors(a["optimizer"]), optimizer_tensors(b["optimizer"])
    assert moments_a.keys() == moments_b.keys()
    assert all(torch.equal(moments_a[k], moments_b[k]) for k in moments_a), "the optimisers' moments differ"


def optimizer_tensors(saved: dict) -> dict[str, torch.Tensor]:
    """Every tensor of a saved optimizer's state, by path: AdamW's moments (``adamw/3/exp_avg``) and Muon's momentum
    (``muon/0/momentum_buffer``), so that two runs' optimisers can be compared whichever the run used."""
    parts = {"": saved} if "state" in saved else {f"{name}/": part for name, part in saved.items()}
    found = {
        f"{name}{i}/{key}": value
        for name, part in parts.items()
        for i, state in part["state"].items()
        for key, value in state.items()
        if isinstance(value, torch.Tensor) and key != "step"
    }
    assert found, "no optimizer state saved: nothing to compare"
    return found


def test_optimizer_tensors_finds_both_optimisers_moments():
    model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Linear(8, 8))  # Muon takes the Linear's matrix
    for optimizer in ("muon", "adamw"):
        opt = optim.make_optimizer(model, C.preset_config("tiny", optimizer=optimizer), "cpu")
        model(torch.tensor([[1, 2]])).sum().backward()
        opt.step()
        keys = {k.rsplit("/", 1)[-1] for k in optimizer_tensors(opt.state_dict())}
        assert keys == (
            {"momentum_buffer", "exp_avg", "exp_avg_sq"} if optimizer == "muon" else {"exp_avg", "exp_avg_sq"}
        )


def test_a_tokenizer_from_another_configuration_is_refused(tmp_path, pairs_file):
    cli.train_command(str(pairs_file), None, None, 2, tmp_path, "tiny", 0, progress=False)
    with pytest.raises(runtime.ConfigMismatchError, match="vocab_size=400, .* asks for vocab_size=450"):
        cli.train_command(
            str(pairs_file), None, None, 2, tmp_path, "tiny", 0, overrides={"vocab_size": 450}, progress=False
        )


def test_rerunning_a_finished_command_changes_nothing(tmp_path, pairs_file):
    first = cli.train_command(str(pairs_file), None, None, 4, tmp_path, "tiny", 0, progress=False)
    before = ck.load_checkpoint(tmp_path)["model"]
    again = cli.train_command(str(pairs_file), None, None, 4, tmp_path, "tiny", 0, progress=False)
    assert again.steps == first.steps == 4 and again.resumed_from == 4
    after = ck.load_checkpoint(tmp_path)["model"]
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert (tmp_path / "test.tsv").read_text().count("\t") == (tmp_path / "test.tsv").read_text().count("\n") > 0


def test_the_resume_point_names_each_phases_checkpoint_and_what_the_size_is_read_from(tmp_path):
    from helpers.run_folder import RunFolder

    folder = RunFolder(tmp_path)
    assert ck.resume_point(tmp_path) == ck.FRESH and not ck.FRESH.resumes and ck.resume_point(None) == ck.FRESH
    folder.pretrain.mkdir(parents=True)
    RunFolder(folder.pretrain).checkpoint.write_bytes(b"stand-in")  # a run stopped while pretraining
    point = ck.resume_point(tmp_path)
    assert point.translation is None and point.pretraining == RunFolder(folder.pretrain).checkpoint
    assert point.resumes and point.sized_by == point.pretraining  # the tokenizer and size are the run's already
    folder.checkpoint.write_bytes(b"stand-in")  # translation has started: its checkpoint holds the size
    assert ck.resume_point(tmp_path).sized_by == folder.checkpoint
