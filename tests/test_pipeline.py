"""helpers.pipeline: the stages of a run that compose lower modules, each written once, and ``train``, which runs
every stage once, top to bottom, each stage's result handed straight to the next."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest

from helpers import pipeline
from helpers.nn.variants import num_parameters
from helpers.text.batches import BucketBatcher, StaticBucketBatcher
from helpers.training import config as C
from helpers.training.checkpoint import FRESH
from tests.text.test_data import stage  # noqa: F401 (a fixture: the built-in data split, and its tokenizer)


def test_a_run_pads_to_static_shapes_when_its_step_is_compiled(stage):  # noqa: F811
    tokenizer, splits = stage
    eager, compiled = C.preset_config("tiny"), C.preset_config("tiny", compile=True, static_step=8)
    assert pipeline.static_step(eager) is None and pipeline.static_step(compiled) == 8
    batcher, _, _ = pipeline.train_batches(tokenizer, splits, compiled, seed=1)
    assert isinstance(batcher, StaticBucketBatcher) and batcher.step == 8
    assert type(pipeline.train_batches(tokenizer, splits, eager, seed=1)[0]) is BucketBatcher


def watch_stages(monkeypatch) -> list[tuple[str, tuple, dict, object]]:
    """The stages ``train`` runs, each wrapped: every call recorded as (name, args, kwargs, result). The sizing
    stage returns a copy of the configuration (as a real choice of size does), so that which configuration each
    later stage receives can be told apart."""
    from helpers.text import data
    from helpers.training import sizing
    from helpers.training import train as train_lib

    calls = []
    for module, name in (
        (data, "prepare_data"),
        (sizing, "size_for_run"),
        (pipeline, "start_model"),
        (train_lib, "train"),
    ):
        real = getattr(module, name)

        def watched(*args, _real=real, _name=name, **kwargs):
            result = _real(*args, **kwargs)
            if _name == "size_for_run":
                result = (replace(result[0]), result[1])
            calls.append((_name, args, kwargs, result))
            return result

        monkeypatch.setattr(module, name, watched)
    return calls


@pytest.mark.training
def test_train_runs_each_stage_once_and_hands_its_result_to_the_next(tmp_path, monkeypatch, cpu_bf16):
    from helpers.commands import train_command

    calls = watch_stages(monkeypatch)
    err = io.StringIO()
    overrides = {"max_tokens": 256, "valid_sentences": 8}
    # the cpu preset with a step budget: the sizing stage runs and keeps the preset's size, without measuring
    result = train_command("builtin", steps=2, out=tmp_path, preset="cpu", limit=300, overrides=overrides, stderr=err)
    assert [c[0] for c in calls] == ["prepare_data", "size_for_run", "start_model", "train"], (
        "each stage once, in order"
    )
    (
        (_, _, data_kw, prepared),
        (_, size_args, _, (sized, _)),
        (_, build_args, build_kw, built),
        (_, fit_args, fit_kw, _),
    ) = calls
    assert data_kw["write_tests"] and data_kw["stderr"] is err, "the data stage reports and writes the test sets"
    assert size_args[1] is prepared.train_batcher.examples and size_args[2] == prepared.tokenizer.vocab_size
    assert build_args[0] is sized and build_args[1] is prepared, "the model is built from the sized configuration"
    assert build_kw["describe"], "train prints what it built"
    handed = (built.model, prepared.train_batcher, prepared.valid_batches, built.translate_cfg)
    assert [a is b for a, b in zip(fit_args, handed)] == [True] * 4, "the loop trains what the model stage built"
    assert fit_kw["extra_config"]["data"] == {k: v for k, v in prepared.info.items() if k != "pairs"}
    assert result is calls[-1][3]
    said = err.getvalue()  # each stage said what it did, in the order the stages ran
    assert said.index("Data: ") < said.index("Model size:") < said.index("Model: ") < said.index("Done: ")
    summary = json.loads((tmp_path / "train_summary.json").read_text())
    model_cfg = sized.model_config(prepared.tokenizer.vocab_size, "cpu")
    assert summary["parameters"] == num_parameters(model_cfg) and summary["model"] == model_cfg.to_dict()
    assert summary["data"]["report"] == prepared.summary() and summary["config"] == sized.to_dict()
    assert (tmp_path / "test.tsv").is_file() and (tmp_path / "test_new.tsv").is_file()
    # the cpu preset's bf16_if_native: bf16 autocast (and Muon in bf16) on a CPU with bf16 instructions, else fp32;
    # both branches train here, whatever this CPU has
    assert summary["precision"] == ("bf16" if cpu_bf16 else "fp32")
    assert f"Muon's iteration in {'bf16' if cpu_bf16 else 'fp32'}." in said


@pytest.mark.training
def test_train_decides_once_whether_it_resumes_and_hands_that_to_every_stage(tmp_path, monkeypatch):
    from helpers.commands import train_command
    from helpers.training import checkpoint as ck

    looked, decided = [], []
    real_find, real_point = ck.find_checkpoint, ck.resume_point

    def counted(out):
        looked.append(out)
        return real_find(out)

    def decision(out):
        decided.append(out)
        return real_point(out)

    monkeypatch.setattr(ck, "find_checkpoint", counted)
    monkeypatch.setattr(ck, "resume_point", decision)
    overrides = {"max_tokens": 256, "valid_sentences": 8}
    run = dict(out=tmp_path, preset="cpu", limit=300, overrides=overrides, progress=False, dev_score=False)
    train_command("builtin", steps=2, **run)
    # one decision, which looks for the two phases' checkpoints (translation, pretraining) once each
    assert len(decided) == 1 and len(looked) == 2, f"{len(decided)} decisions, {len(looked)} looks"
    calls = watch_stages(monkeypatch)
    looked.clear(), decided.clear()
    result = train_command("builtin", minutes=0.05, **run)  # minutes: the sizing stage reads the saved size
    assert len(decided) == 1 and len(looked) == 2, f"{len(decided)} decisions, {len(looked)} looks"
    found = real_find(tmp_path)
    (_, _, data_kw, _), (_, size_args, _, _), (_, _, build_kw, _), (_, _, fit_kw, _) = calls
    assert data_kw["reuse_tokenizer"] is True and size_args[3] == found
    assert build_kw["resume"] == ck.ResumePoint(found, None) and fit_kw["resume_from"] == found
    assert result.resumed_from == 2


def test_a_fresh_run_replaces_the_tokenizer_an_unfinished_run_left(tmp_path):
    from helpers.text import data

    small, large = C.preset_config("tiny", steps=1), C.preset_config("tiny", steps=1, vocab_size=450)
    data.prepare_data("builtin", small, tmp_path, limit=1500, progress=False)  # a run stopped before its checkpoint
    fresh = data.prepare_data("builtin", large, tmp_path, limit=1500, progress=False, reuse_tokenizer=False)
    assert fresh.tokenizer.meta["requested_vocab_size"] == 450
    again = data.prepare_data("builtin", large, tmp_path, limit=1500, progress=False, reuse_tokenizer=True)
    assert again.tokenizer.model_proto == fresh.tokenizer.model_proto, "the saved tokenizer is the fresh one"
    with pytest.raises(FileNotFoundError, match="has no tokenizer/"):
        data.prepare_data("builtin", large, tmp_path / "empty", limit=1500, progress=False, reuse_tokenizer=True)


def test_build_model_describes_what_it_built_only_when_asked(stage, capsys, cpu_bf16):  # noqa: F811
    tokenizer, splits = stage
    cfg = C.preset_config("tiny", steps=1)
    from helpers.text import data

    prepared = data.prepare_data("builtin", cfg, None, limit=1500, progress=False)
    quiet = pipeline.start_model(cfg, prepared, None, "cpu", resume=FRESH)
    err = io.StringIO()
    said = pipeline.start_model(cfg, prepared, None, "cpu", resume=FRESH, stderr=err, describe=True)
    assert capsys.readouterr().err == "" and quiet.parameters == said.parameters == num_parameters(quiet.model.config)
    line = err.getvalue()
    assert line.startswith(
        f"Model: {said.parameters / 1e6:.2f} M parameters ({cfg.n_layer} layers, d_model {cfg.d_model}"
    )
    muon = "bf16" if cpu_bf16 else "fp32"  # the number format Muon iterates in follows the CPU
    assert (
        f"{len(prepared.train_batcher.examples):,} training pairs; device cpu, precision fp32, Muon's iteration in {muon}."
        in line
    )
    pipeline.start_model(
        C.preset_config("tiny", steps=1, optimizer="adamw"),
        prepared,
        None,
        "cpu",
        resume=FRESH,
        stderr=err,
        describe=True,
    )
    assert err.getvalue().endswith("device cpu, precision fp32.\n")  # no Muon, nothing said of it
