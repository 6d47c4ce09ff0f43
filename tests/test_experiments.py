"""helpers.experiments and the derivations in helpers.nn.variants: FLOPs counted by torch, memory measured,
the sweep's refusals, a finished row kept across a disconnect."""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from helpers import experiments as X
from helpers.hf.embedding_transfer import init_embeddings as reference_init_embeddings  # before any mutant replaces it
from helpers.nn import build_model
from helpers.nn import variants as VAR
from helpers.nn.model import ModelConfig
from helpers.text.data import prepare_data
from helpers.training.config import preset_config

SHAPE = dict(vocab_size=40, max_len=128, n_layer=4, n_head=4, d_model=32, attention_kernel="explicit")


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"attention": "synthesizer"},
        {"bottleneck_dim": 8},
        {"bottleneck_dim": 16, "n_layer": 3, "attention": "synthesizer"},
    ],
)
@pytest.mark.parametrize("T", [16, 100])
def test_derived_flops_equal_the_flops_torch_counts(changes, T):
    """The derivation is exact: torch's own FLOP counter agrees, once the LM head (2 T C V) is added."""
    cfg = ModelConfig(**{**SHAPE, **changes})
    model = build_model(cfg).eval()
    ids = torch.randint(5, 40, (2, T))
    with FlopCounterMode(display=False) as counter:  # (grad mode on: its module tracker needs it)
        model(ids, torch.tensor([T // 2, T // 3]))
    head = 2 * 2 * T * cfg.d_model * cfg.vocab_size
    assert counter.get_total_flops() == VAR.forward_flops(cfg, T, batch=2) + head


def test_flops_grow_as_derived():
    plain, neck = ModelConfig(**SHAPE), ModelConfig(**SHAPE, bottleneck_dim=8)
    big = [VAR.forward_flops(c, 4096) / VAR.forward_flops(c, 2048) for c in (plain, neck)]
    assert big[0] > 3.0 and big[1] < 2.05  # quadratic against linear once T >> C


def test_saved_bytes_counts_what_backward_keeps():
    lin = torch.nn.Linear(64, 64)
    x = torch.randn(10, 64, requires_grad=True)
    assert X.saved_bytes(lambda: lin(x)) >= 10 * 64 * 4  # the input is kept for the weight gradient
    assert X.saved_bytes(lambda: lin(x), exclude=lin.parameters()) == 10 * 64 * 4  # the weight left out
    with torch.no_grad():
        assert X.saved_bytes(lambda: lin(x)) == 0  # nothing is kept without autograd


def test_measured_memory_grows_quadratically_for_attention_and_linearly_for_the_bottleneck():
    lengths = [32, 64, 128]
    plain = X.measure_forward(ModelConfig(**SHAPE), lengths, repeats=1)
    neck = X.measure_forward(ModelConfig(**SHAPE, bottleneck_dim=8), lengths, repeats=1)
    p = X.local_slopes(lengths, [r["bytes"] for r in plain])
    n = X.local_slopes(lengths, [r["bytes"] for r in neck])
    assert p[-1] > 1.3 and n[-1] < 1.15, (p, n)
    assert all(r["bytes"] >= r["attention_bytes"] for r in plain), "the attention weights are among the saved tensors"
    with pytest.raises(ValueError, match="raise max_len"):
        X.measure_forward(ModelConfig(**SHAPE), [256])


def test_local_slopes():
    assert X.local_slopes([1, 2, 4], [3, 12, 48]) == pytest.approx([2.0, 2.0])


@pytest.fixture(scope="module")
def prepared():
    cfg = preset_config("tiny", steps=8)
    return prepare_data("builtin", cfg, None, limit=1500, progress=False), cfg


def test_sweep_rows_and_refusals(prepared):
    data, base = prepared
    rows = X.sweep(data, base, {"vanilla": {}, "lr x2": {"lr": base.lr * 2}}, eval_sentences=20)
    assert [r["label"] for r in rows] == ["vanilla", "lr x2"]
    assert rows[0]["changed"] == {} and rows[1]["changed"] == {"lr": base.lr * 2}
    for r in rows:
        assert r["steps"] == 8 and r["eval_sentences"] == 20 and r["val_loss"] > 0
        assert {"bleu_valid", "bleu_new", "val_ppl", "parameters"} <= set(r)
    assert rows[0]["val_loss"] != rows[1]["val_loss"], "the setting must change the run"
    assert X.best_row(rows) in rows
    assert "model" not in X.table_rows(rows)[0] and "setting" in X.format_rows(rows)
    with pytest.raises(ValueError, match=r"changes \['steps'\]"):
        X.sweep(data, base, {"longer": {"steps": 100}})


def test_best_row_is_chosen_on_validation_not_on_the_test_set():
    rows = [
        {"label": "a", "bleu_valid": 10.0, "bleu_new": 30.0, "parameters": 5},
        {"label": "b", "bleu_valid": 12.0, "bleu_new": 20.0, "parameters": 5},
    ]
    assert X.best_row(rows)["label"] == "b"


def test_results_cache_survives_a_restart_and_reruns_a_changed_setting(tmp_path):
    calls = []

    def fn():
        calls.append(1)
        return {"label": "x", "bleu_new": 1.0, "model": object()}

    path = tmp_path / "rows.json"
    assert X.ResultsCache(path).run("x", {"lr": 1}, fn)["bleu_new"] == 1.0
    again = X.ResultsCache(path).run("x", {"lr": 1}, fn)  # a new session, as after a disconnect
    assert len(calls) == 1 and "model" not in again
    X.ResultsCache(path).run("x", {"lr": 2}, fn)
    assert len(calls) == 2, "a changed setting must not be served from the cache"
    X.ResultsCache(None).run("x", {"lr": 1}, fn)
    assert len(calls) == 3 and not (tmp_path / "None").exists()


# --- token embeddings from a pretrained model -----------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory, prepared):
    from helpers.hf.loading import load_pretrained
    from helpers.hf.tiny import tiny_causal_lm

    data, _ = prepared
    folder = tiny_causal_lm(data.splits.train[:1000], tmp_path_factory.mktemp("lm"), hidden=48, seed=0)
    return folder, load_pretrained(folder)


def _train_command(prepared, folder, out):
    from helpers.cli import train_command

    result = train_command(
        "builtin", steps=4, out=out / "run", preset="tiny", limit=1500, progress=False,
        overrides={"init_embeddings": str(folder)},
    )  # fmt: skip
    saved = json.loads((out / "run" / "checkpoint.json").read_text())["config"]["train"]
    return result.steps, saved["init_embeddings"], None


def _run_variant(prepared, folder, out):
    from dataclasses import replace

    data, base = prepared
    row = X.run_variant(data, replace(base, steps=4, init_embeddings=str(folder)), label="emb", eval_sentences=4)
    return row["steps"], str(folder), row["embeddings"]


def starting_embedding_problems(entry, prepared, folder, out, monkeypatch) -> list[str]:
    """Train through ``entry`` with ``init_embeddings=folder``, watching pipeline.start_model: [] when the model that
    training starts from has exactly the embeddings helpers.hf.embedding_transfer.init_embeddings sets on the seeded model
    (the rows it copies changed, every other weight of the table the seeded start), the switch is recorded, and
    the run trains its 4 steps."""
    from helpers import pipeline, runtime

    seen = []
    build = pipeline.start_model  # the real one, or a planted mutant

    def spy(cfg, prep, out_dir, device, **kw):
        built = build(cfg, prep, out_dir, device, **kw)
        seen.append((cfg, prep.tokenizer, device, built.model.tok_emb.weight.detach().clone(), built.transfer))
        return built

    monkeypatch.setattr(pipeline, "start_model", spy)
    steps, recorded, described = entry(prepared, folder, out)
    (cfg, tok, device, start, transfer), problems = seen[0], []
    runtime.set_seed(cfg.seed)  # the seeded model start_model makes, then the rows init_embeddings writes into it
    fresh = build_model(cfg.model_config(tok.vocab_size, device))
    random_start = fresh.tok_emb.weight.detach().clone()
    expected = reference_init_embeddings(fresh, tok, str(folder))
    copied = (fresh.tok_emb.weight.detach() != random_start).any(1)
    assert len(expected.ids) > 100 and int(copied.sum()) == len(expected.ids), "nothing to tell the starts apart"
    if steps != 4 or recorded != str(folder):
        problems.append(f"{steps} steps, init_embeddings={recorded!r} recorded: not 4 steps from {folder}")
    if not torch.equal(start, fresh.tok_emb.weight.detach()):
        same = (start == random_start).all(1)
        problems.append(
            f"training started from other embeddings than init_embeddings sets: {int((same & copied).sum())} of "
            f"{len(expected.ids)} rows to copy kept their random start"
        )
    if transfer is None or not torch.equal(transfer.ids, expected.ids):
        problems.append(f"start_model reported {transfer!r} as the transfer, not {len(expected.ids)} rows")
    if described is not None and described != expected.describe():
        problems.append(f"the row says {described!r} about its embeddings")
    return problems


@pytest.mark.parametrize("entry", [_train_command, _run_variant], ids=["train_command", "run_variant"])
def test_train_and_run_variant_start_from_the_pretrained_embeddings(prepared, tiny_lm, tmp_path, monkeypatch, entry):
    assert starting_embedding_problems(entry, prepared, tiny_lm[0], tmp_path, monkeypatch) == []


def _switch_ignored(real):
    """Mutant: start_model drops cfg.init_embeddings (the switch parsed and recorded, the embeddings random)."""
    from dataclasses import replace

    return {"start_model": lambda cfg, *a, **k: real["start_model"](replace(cfg, init_embeddings=None), *a, **k)}


def _rows_not_written(real):
    """Mutant: the transfer is computed and reported, but on a copy of the model: its rows never arrive."""
    import copy

    return {"init_embeddings": lambda model, *a, **k: real["init_embeddings"](copy.deepcopy(model), *a, **k)}


@pytest.mark.parametrize("mutant", [_switch_ignored, _rows_not_written], ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("entry", [_train_command, _run_variant], ids=["train_command", "run_variant"])
def test_the_embedding_check_fails_when_training_ignores_them(prepared, tiny_lm, tmp_path, monkeypatch, entry, mutant):
    from helpers import pipeline
    from helpers.hf import embedding_transfer

    real = {"start_model": pipeline.start_model, "init_embeddings": embedding_transfer.init_embeddings}
    for name, fake in mutant(real).items():
        monkeypatch.setattr(pipeline if name == "start_model" else embedding_transfer, name, fake)
    assert starting_embedding_problems(entry, prepared, tiny_lm[0], tmp_path, monkeypatch) != []
