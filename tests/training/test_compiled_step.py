"""Issue 29: the compiled step (`train --compile 1`): a fixed set of batch shapes, each compiled once.

The GPU path is tested here on the CPU with torch.compile's "aot_eager" backend: the same graph capture and
recompilation rules as "inductor", without minutes of C++ kernel builds."""

from __future__ import annotations

import pytest
import torch

from helpers.nn import build_model
from helpers.text.batches import BucketBatcher, StaticBucketBatcher
from helpers.text.corpus import builtin_corpus
from helpers.text.encoding import encode_pairs
from helpers.text.tokenizer import Tokenizer
from helpers.training import train as T
from helpers.training.config import preset_config


@pytest.fixture(scope="module")
def examples():
    pairs = builtin_corpus(600, seed=5, difficulty=2)
    tok = Tokenizer.train(pairs, vocab_size=500)
    ex, _ = encode_pairs(tok, pairs, 48)
    return ex, tok.vocab_size


# the static batcher's own tests (shapes, every example once, resuming mid-epoch) are tests/text/test_batches.py's


def _train(examples, batcher, **cfg_kw):
    ex, vocab = examples
    cfg = preset_config("tiny", steps=12, dropout=0.0, **cfg_kw)
    torch.manual_seed(0)
    model = build_model(cfg.model_config(vocab, "cpu"))
    T.train(model, batcher, None, cfg, None, device="cpu", progress=False)
    return model


@pytest.mark.training  # compiles (aot_eager) and trains: 25 s, a sixth of the plain `pytest` loop; the README's command runs it
def test_the_compiled_step_compiles_once_per_shape_and_trains_like_the_eager_one(examples):
    import torch._dynamo
    from torch._dynamo.utils import counters

    ex, _ = examples
    eager = _train(examples, StaticBucketBatcher(ex, 512, step=16, max_len=48, seed=3))
    torch._dynamo.reset()
    counters.clear()
    static = StaticBucketBatcher(ex, 512, step=16, max_len=48, seed=3)
    shapes_met = {tuple(b.input_ids.shape) for _, b in zip(range(12), StaticBucketBatcher(ex, 512, step=16, seed=3))}
    compiled = _train(examples, static, compile=True, compile_backend="aot_eager")
    graphs = counters["stats"]["unique_graphs"]
    assert 1 <= graphs <= len(shapes_met)  # one graph per shape met, never one per batch
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters()):
        assert torch.allclose(p, q, atol=1e-5), name
    # control: the same compiled step on today's batches compiles again and again
    torch._dynamo.reset()
    counters.clear()
    _train(examples, BucketBatcher(ex, 512, seed=3), compile=True, compile_backend="aot_eager")
    assert counters["stats"]["unique_graphs"] > graphs


def test_compile_refuses_batches_that_bring_new_shapes():
    with pytest.raises(ValueError, match="cannot be combined with pretrain"):
        preset_config("tiny", compile=True, pretrain="span")


def test_the_benchmark_counts_the_same_flops_for_a_compiled_model(examples):
    # bench_train's MFU for the compiled step once read the weights' names of the wrapper (_orig_mod.blocks...),
    # found no block matrices and reported a third of the FLOPs (H200, 2026-11-26: 1.4 % MFU at 1.7x the tokens/s)
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "bench_train", Path(__file__).parents[2] / "benchmarks/bench_train.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    ex, vocab = examples
    model = build_model(preset_config("tiny").model_config(vocab, "cpu"))
    compiled = T.compiled(model, "aot_eager")
    batch = next(iter(BucketBatcher(ex, 512, seed=1)))
    blocks = sum(p.numel() for n, p in model.named_parameters() if n.startswith("blocks.") and p.dim() == 2)
    assert bench.multiplying_params(model) == blocks and bench.head_params(model) == vocab * model.config.d_model
    assert bench.multiplying_params(compiled) == bench.multiplying_params(model)
    assert bench.head_params(compiled) == bench.head_params(model)
    assert bench.batch_flops(compiled, batch) == bench.batch_flops(model, batch) > 0
