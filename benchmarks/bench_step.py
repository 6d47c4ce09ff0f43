"""One training step of the `cpu` model on a fixed random batch: forward, backward, AdamW (fp32, 2 threads).

It isolates the step from the data pipeline (tokenizer, bucket plan), so two versions of `helpers` can be
compared on one machine, back to back; it runs on versions before and after the `attention_kernel` field:

    PYTHONPATH=/path/to/old/checkout python benchmarks/bench_step.py old
    PYTHONPATH=. python benchmarks/bench_step.py new
"""

from __future__ import annotations

import inspect
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from helpers.nn import build_model
from helpers.nn.model import ModelConfig


def main(label: str = "", steps: int = 15, batch: int = 170, length: int = 24) -> float:
    torch.manual_seed(0)
    torch.set_num_threads(2)
    kw = dict(vocab_size=4000, max_len=64, n_layer=4, n_head=4, d_model=256, d_ff=1024, dropout=0.0)
    if "attention_kernel" in inspect.signature(ModelConfig).parameters:
        kw["attention_kernel"] = "explicit"
    model = build_model(ModelConfig(**kw))
    for module in model.modules():  # older versions: the same choice through an attribute
        if hasattr(module, "flash"):
            module.flash = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(5, 4000, (batch, length))  # (B, T)
    prefix = torch.full((batch,), length // 2)

    def step():
        loss = model(x, prefix)[:, length // 2 :].float().logsumexp(-1).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()

    for _ in range(3):  # warm-up
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    seconds = (time.perf_counter() - t0) / steps
    print(f"{label} {seconds:.3f} s per step ({batch} x {length} tokens, fp32, {torch.get_num_threads()} threads)")
    return seconds


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
