"""Does a run train at the pace the sizing probe reads? The probe (``sizing.measure_speed``) times 16 batches over and
over on a fresh model; a run meets a new batch every step. This script reads both in one process, on one machine, a
minute apart: the probe at one width, then ``train`` itself over fresh batches of the same sentences in chunks (each
chunk a run's pace: its target tokens over its steps' time), then the first chunk again and the probe's batches on
the now-trained model.

    python benchmarks/probe_vs_stream.py --tokenizer runs/x/tokenizer [--width 256] [--positions rotary]
                                         [--precision bf16] [--chunks 3] [--steps 200]

Tatoeba (the local copy) all of it, as ``train --data fra.txt`` reads it; the tokenizer of an earlier run, so the
pieces are the run's. Two threads. Run it on an idle machine: nothing else may share the cores.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from itertools import islice
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from helpers.nn import build_model  # noqa: E402
from helpers.text import data as D  # noqa: E402
from helpers.text import sources as S  # noqa: E402
from helpers.text.batches import BucketBatcher  # noqa: E402
from helpers.text.encoding import encode_pairs  # noqa: E402
from helpers.text.tokenizer import Tokenizer  # noqa: E402
from helpers.training import config as C  # noqa: E402
from helpers.training import sizing  # noqa: E402
from helpers.training.train import train  # noqa: E402


def describe(batches) -> str:
    """Target tokens, length and rows per batch: whether two sets of batches are alike."""
    mean = statistics.mean
    return (
        f"{len(batches)} batches: {mean(b.n_target_tokens for b in batches):.0f} target tokens, "
        f"T {mean(b.input_ids.shape[1] for b in batches):.1f}, B {mean(b.input_ids.shape[0] for b in batches):.1f} a batch"
    )


def pace(model, batches, cfg) -> float:
    """Target tokens per second of ``train`` over ``batches``, as a run counts them (its steps' time)."""
    result = train(model, batches, None, replace(cfg, steps=len(batches)), None, device="cpu", progress=False,
                   resume_from=None)  # fmt: skip
    return result.tokens / result.train_seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenizer", required=True, help="a run's tokenizer folder")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--positions", default="learned")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--chunks", type=int, default=3)
    p.add_argument("--steps", type=int, default=200, help="batches per chunk")
    args = p.parse_args(argv)
    torch.set_num_threads(2)
    pairs, _ = S.load_pairs("tatoeba", limit=None, seed=0, download=False)
    pairs, _ = D.clean_pairs(pairs)
    tok = Tokenizer.load(args.tokenizer)
    base = C.preset_config("cpu")
    examples, _ = encode_pairs(tok, pairs, base.max_len)
    heads = {d: h for _, d, h in sizing.CPU_SIZES}.get(args.width, 4)
    cfg = replace(sizing.sized(base, base.n_layer, args.width, heads), precision=args.precision,
                  positional=args.positions, minutes=None)  # fmt: skip
    print(f"{len(examples):,} examples; width {args.width}, {args.positions} positions, {args.precision}", flush=True)

    t0 = time.perf_counter()
    probe = sizing.measure_speed(cfg, examples, tok.vocab_size, "cpu")
    print(f"probe (sizing.measure_speed): {probe:,.0f} target tok/s ({time.perf_counter() - t0:.0f} s)", flush=True)
    probe_batches = list(islice(BucketBatcher(examples, cfg.max_tokens, seed=cfg.seed), sizing.PROBE_BATCHES))
    stream = list(islice(BucketBatcher(examples, cfg.max_tokens, seed=cfg.seed + 1), args.chunks * args.steps))
    print(f"the probe's {describe(probe_batches)}\nthe stream's {describe(stream)}", flush=True)

    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model_config(tok.vocab_size, "cpu"))
    chunks = [stream[k * args.steps : (k + 1) * args.steps] for k in range(args.chunks)]
    for k, chunk in enumerate(chunks):
        print(f"fresh batches, chunk {k}: {pace(model, chunk, cfg):,.0f} target tok/s", flush=True)
    print(f"chunk 0 again: {pace(model, chunks[0], cfg):,.0f} target tok/s", flush=True)
    pace(model, probe_batches, cfg)  # their shapes once, as the probe does
    print(f"the probe's batches on the trained model: {pace(model, probe_batches, cfg):,.0f} target tok/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
