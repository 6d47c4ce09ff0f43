"""Issue 51: does the sizing probe read the same speed twice, and does the choice hold?

For each precision: every anchor width of ``helpers.training.sizing`` measured twice (two probes back to back,
exactly as ``train --preset cpu`` measures them: each batch shape once untimed, then ``--seconds`` of steps),
their agreement, and the size the rule picks for a 15-minute budget from each probe (all anchors measured here, so
the speeds can be replayed in tests/training/test_sizing.py).

    python benchmarks/sizing_probe.py                       # bf16 (where the CPU has it) and fp32, 20,000 Tatoeba pairs
    python benchmarks/sizing_probe.py --precisions fp32 --seconds 3    # a shorter probe, to see it disagree
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from helpers import runtime  # noqa: E402
from helpers.text import data as D  # noqa: E402
from helpers.text import sources as S  # noqa: E402
from helpers.text.encoding import encode_pairs  # noqa: E402
from helpers.text.tokenizer import Tokenizer  # noqa: E402
from helpers.training import config as C  # noqa: E402
from helpers.training import sizing  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=sizing.PROBE_SECONDS, help="timed seconds per anchor")
    parser.add_argument("--precisions", default="bf16_if_native,fp32")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    pairs, _ = S.load_pairs("tatoeba", limit=args.pairs, seed=0, download=False)
    pairs, _ = D.clean_pairs(pairs)
    cfg0 = C.preset_config("cpu", minutes=args.minutes)
    tok = Tokenizer.train(pairs, vocab_size=cfg0.vocab_size, model_type=cfg0.tokenizer_type)
    examples, _ = encode_pairs(tok, pairs, cfg0.max_len)
    print(f"{runtime.hardware_name(torch.device('cpu'))}, torch {torch.__version__}, {len(examples):,} examples")
    results = {}
    for precision in args.precisions.split(","):
        cfg = replace(cfg0, precision=precision)
        name = runtime.resolve_precision(torch.device("cpu"), precision)
        if name in results:  # bf16_if_native on a CPU without bf16 is fp32 again
            continue
        probes = [{}, {}]
        for n_layer, d_model, n_head in sizing.CPU_SIZES:
            if d_model in sizing.ANCHOR_WIDTHS:
                c = sizing.sized(cfg, n_layer, d_model, n_head)
                for speeds in probes:  # two probes back to back, as one sizing would meet the machine
                    speeds[d_model] = sizing.measure_speed(c, examples, tok.vocab_size, "cpu", args.seconds)
        choices = []
        for speeds in probes:
            with mock.patch.object(sizing, "measure_speed", lambda c, *a, s=speeds, **k: s[c.d_model]):
                choice = sizing.size_for_machine(cfg, examples, tok.vocab_size, "cpu")
            choices.append(choice.cfg.d_model)
            print(f"  {choice.describe()}")
        worst = max(abs(probes[0][w] / probes[1][w] - 1) for w in probes[0])
        results[name] = {"probes": probes, "worst_disagreement": round(worst, 4), "choices": choices}
        print(
            f"{name}: "
            + "; ".join(f"width {w}: {probes[0][w]:,.0f} / {probes[1][w]:,.0f}" for w in probes[0])
            + f" target tok/s; the two probes differ by at most {worst:.1%}; widths chosen: {choices}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
