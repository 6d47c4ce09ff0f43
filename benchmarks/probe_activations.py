"""The largest activations of a trained run under fp16 autocast: how close the T4's format comes to overflowing.

fp16 stops at 65,504. The `t4` preset squares its feed-forward activations (ReLU²), so a value of 256 before the
square is already the limit after it. This reads a run folder from ``python -m helpers train``, feeds it real pairs
(its own test file) with teacher forcing, as training does, under the autocast of ``--precision``, and records for
every linear layer the largest absolute value going in and coming out (the feed-forward's output projection takes
the ReLU² values as its input), and whether any was inf or NaN.

    python benchmarks/probe_activations.py --checkpoint runs/t4 --precision fp16 --json activations.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import pipeline  # noqa: E402
from helpers.text.batches import collate  # noqa: E402
from helpers.text.encoding import encode_pairs  # noqa: E402
from helpers.text.sources import load_tsv  # noqa: E402
from helpers.training.train import autocast_context  # noqa: E402

FP16_MAX = torch.finfo(torch.float16).max


def probe(model: torch.nn.Module, batches, device, precision: str) -> dict[str, dict]:
    """{linear layer name: {"in": largest |input|, "out": largest |output|, "finite": bool}} over ``batches``."""
    seen: dict[str, dict] = {}

    def hook(name):
        def record(module, inputs, output):
            entry = seen.setdefault(name, {"in": 0.0, "out": 0.0, "finite": True})
            for key, t in (("in", inputs[0]), ("out", output)):
                t = t.detach()
                entry["finite"] &= bool(torch.isfinite(t).all())
                entry[key] = max(entry[key], float(t.abs().float().nan_to_num(posinf=math.inf).max()))

        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    try:
        with torch.no_grad(), autocast_context(device, precision):
            for batch in batches:
                batch = batch.to(device)
                model(batch.input_ids, batch.prefix_len)
    finally:
        for h in handles:
            h.remove()
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a run folder written by `python -m helpers train`")
    parser.add_argument("--precision", default="fp16", choices=["fp16", "bf16", "fp32"])
    parser.add_argument("--sentences", type=int, default=2048, help="pairs from the run's test_new.tsv and test.tsv")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--device", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    run = pipeline.load_run(args.checkpoint, device=device)
    pairs = []
    for name in ("test_new.tsv", "test.tsv"):
        if (Path(args.checkpoint) / name).is_file():
            pairs += load_tsv(Path(args.checkpoint) / name)[0]
    if not pairs:
        parser.error(f"{args.checkpoint} has no test_new.tsv or test.tsv to read pairs from.")
    examples, _ = encode_pairs(run.tokenizer, pairs[: args.sentences], run.model.config.max_len)
    batches = [collate(examples[i : i + args.batch]) for i in range(0, len(examples), args.batch)]
    seen = probe(run.model, batches, device, args.precision)
    top = sorted(seen.items(), key=lambda kv: -max(kv[1]["in"], kv[1]["out"]))
    largest = max(max(v["in"], v["out"]) for v in seen.values())
    ffn_in = max(v["in"] for n, v in seen.items() if n.endswith("ffn.proj"))
    finite = all(v["finite"] for v in seen.values())
    print(f"{len(examples)} pairs, {args.precision} autocast on {device}, step {run.step}")
    for name, v in top[:8]:
        print(f"  {name:32s} in {v['in']:10.1f}  out {v['out']:10.1f}  {'finite' if v['finite'] else 'INF/NaN'}")
    print(
        f"largest activation {largest:.1f} ({largest / FP16_MAX:.2%} of fp16's {FP16_MAX:.0f}); largest ReLU² value "
        f"(input of ffn.proj) {ffn_in:.1f}; all finite: {finite}"
    )
    if args.json:
        record = {"pairs": len(examples), "precision": args.precision, "device": str(device), "step": run.step,
                  "largest": largest, "relu2_largest": ffn_in, "all_finite": finite, "layers": seen}  # fmt: skip
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    return 0 if finite else 1


if __name__ == "__main__":
    raise SystemExit(main())
