"""Time the data pipeline on the full Tatoeba file: load, clean, split, tokenizer (8k), encode, batch.

    python benchmarks/bench_data.py --tatoeba ../shared/data/tatoeba-fra-eng/fra.txt
    python benchmarks/bench_data.py --builtin                 # the synthetic corpus instead (30,000 pairs)
    python benchmarks/bench_data.py --tatoeba fra.txt --threads 2 --json out.json

Prints the counts and wall time of each step, and the CPU load average at the start and the end:
other programs sharing the cores slow every step, so read the timings next to the load.
Target on 2 cores: under a minute for everything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from helpers.text import data as D  # noqa: E402
from helpers.text import sources as S
from helpers.text.batches import BucketBatcher
from helpers.text.encoding import encode_pairs
from helpers.text.tokenizer import Tokenizer


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def run(
    source: str, path: str | None, vocab_size: int, model_type: str, threads: int, max_len: int, max_tokens: int
) -> dict:
    timings: dict[str, float] = {}
    counts: dict[str, object] = {}

    def step(name):
        class _Timer:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                timings[name] = time.perf_counter() - self.t0
                print(f"[{name}] {timings[name]:.2f} s", flush=True)

        return _Timer()

    print(f"load average at start (1, 5, 15 min): {load_average()}; cores: {os.cpu_count()}", flush=True)
    with step("load"):
        pairs, report = S.load_pairs(source, path)
    print(report)
    counts["loaded"] = report.kept
    with step("clean"):
        pairs, cleaned = D.clean_pairs(pairs)
    print(cleaned)
    counts["cleaned"] = cleaned.n_out
    with step("split"):
        splits = D.split_pairs(pairs)
    print(splits.report)
    counts.update({f"split_{k}": v for k, v in splits.report.sizes.items()})
    with step(f"tokenizer ({model_type}, {vocab_size})"):
        with tempfile.TemporaryDirectory() as tmp:
            tok = Tokenizer.train(
                splits.train, vocab_size=vocab_size, model_type=model_type, out_dir=tmp, num_threads=threads
            )
    print(f"{tok}; trained on {tok.meta['trained_on_sentences']:,} sentences (train split only)")
    counts["vocab_size"] = tok.vocab_size
    with step("encode train"):
        examples, trunc = encode_pairs(tok, splits.train, max_len)
    print(trunc)
    counts["examples"] = len(examples)
    with step("batch (one epoch)"):
        batcher = BucketBatcher(examples, max_tokens=max_tokens, seed=0)
        n_batches = sum(1 for _ in batcher)
    stats = batcher.stats(epoch=0)
    baseline = BucketBatcher(examples, max_tokens=max_tokens, seed=0, bucket=False).stats(epoch=0)
    print(
        f"{n_batches} batches of up to {max_tokens} tokens, mean {stats['mean_batch_size']:.0f} pairs; padding "
        f"{stats['padding_fraction']:.1%} bucketed vs {baseline['padding_fraction']:.1%} in random batches"
    )
    counts["padding_fraction"] = round(stats["padding_fraction"], 4)
    counts["padding_fraction_random"] = round(baseline["padding_fraction"], 4)
    total = sum(timings.values())
    print(f"\nTOTAL {total:.1f} s  (load average at end: {load_average()})")
    for name, t in timings.items():
        print(f"  {name:<28}{t:>7.2f} s")
    return {
        "source": source,
        "path": path,
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        "total_s": round(total, 2),
        "counts": counts,
        "load_average_end": load_average(),
        "cores": os.cpu_count(),
        "threads": threads,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--tatoeba", metavar="FRA_TXT", help="path to Tatoeba's fra.txt (English<TAB>French)")
    src.add_argument("--builtin", action="store_true", help="use the built-in synthetic corpus")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--model-type", choices=("unigram", "bpe"), default="unigram")
    ap.add_argument("--threads", type=int, default=2, help="sentencepiece training threads (default 2)")
    ap.add_argument("--max-len", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--json", metavar="OUT", help="also write the numbers to this JSON file")
    args = ap.parse_args(argv)
    if args.builtin:
        source, path = "builtin", None
    else:
        source, path = "tatoeba", args.tatoeba  # None: the local copy, the cache, or a download
    result = run(source, path, args.vocab_size, args.model_type, args.threads, args.max_len, args.max_tokens)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
