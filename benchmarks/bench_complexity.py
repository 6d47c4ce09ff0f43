"""Time and memory of one training-mode forward pass against sequence length: the plain model and the
Perceiver-style bottleneck (notebook 05), beside the derived FLOPs and attention memory.

    python benchmarks/bench_complexity.py                       # 6 layers, width 256, 4 heads, m = 16, 64..1024
    python benchmarks/bench_complexity.py --json out.json

Times are medians of --repeats passes with batch 1 on this machine (numbers from a busy machine are noisy);
memory is what autograd keeps for the backward pass (``helpers.experiments.saved_bytes``), the same on any machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from helpers import experiments as X
from helpers import runtime
from helpers.nn.model import ModelConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--latents", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    shape = dict(
        vocab_size=64,
        max_len=max(args.lengths),
        n_layer=args.layers,
        n_head=args.heads,
        d_model=args.width,
        attention_kernel="explicit",
    )
    results = {
        "plain": X.measure_forward(ModelConfig(**shape), args.lengths, repeats=args.repeats),
        f"bottleneck m={args.latents}": X.measure_forward(
            ModelConfig(**shape, bottleneck_dim=args.latents), args.lengths, repeats=args.repeats
        ),
    }
    print(f"{runtime.hardware_name('cpu')}, torch {torch.__version__}, {torch.get_num_threads()} threads; {shape}")
    print(f"{'model':<16} {'length':>6} {'ms':>9} {'GFLOP':>8} {'GFLOP/s':>8} {'MiB saved':>10} {'MiB attn':>9}")
    for name, rows in results.items():
        for r in rows:
            print(
                f"{name:<16} {r['length']:>6} {r['seconds'] * 1e3:>9.2f} {r['flops'] / 1e9:>8.3f} "
                f"{r['flops'] / r['seconds'] / 1e9:>8.1f} {r['bytes'] / 2**20:>10.1f} {r['attention_bytes'] / 2**20:>9.1f}"
            )
        lengths = [r["length"] for r in rows]
        for what in ("seconds", "flops", "bytes"):
            slopes = X.local_slopes(lengths, [r[what] for r in rows])
            print(f"  growth exponent of {what:<7} between neighbouring lengths: {[round(s, 2) for s in slopes]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": shape, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
