"""Decoding speed: sentences/s for 64 sentences, greedy with and without the key/value cache, and beam 4.

Without the cache every new token reruns the whole sequence through the model (cost grows with the
square of the length); with it, each step runs one position per sentence against stored keys and
values. The gap widens with the number of new tokens, so the headline figure forces exactly
``--new-tokens`` (64) new tokens per sentence: the model's own <eos> is replaced by an id it never
produces (we pass the id of <pad> as eos: a trained model never predicts it, and for untrained weights its
row of the LM head is zeroed so it never wins; the mean count of new tokens is printed to check).

    python benchmarks/bench_decode.py                          # the cpu preset's shape, untrained weights
    python benchmarks/bench_decode.py --checkpoint runs/cpu    # a trained run: also natural-length decoding

Numbers from a shared or busy machine are low and noisy: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from helpers import pipeline, runtime
from helpers.evaluation import translation
from helpers.nn import build_model
from helpers.text import data as D
from helpers.text import sources as S
from helpers.text.encoding import prompt_ids
from helpers.text.tokenizer import Tokenizer
from helpers.training import config as C


def french_sentences(n: int, data: str) -> list[str]:
    if data == "builtin":
        pairs, _ = S.load_pairs("builtin", limit=max(n * 10, 1000), seed=1)
    else:
        pairs, _ = S.load_pairs("tatoeba", limit=max(n * 20, 2000), seed=1, download=False)
    pairs, _ = D.clean_pairs(pairs)
    return [fr for fr, _ in pairs[:n]]


def timed(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None, help="a run folder from `python -m helpers train`")
    parser.add_argument("--preset", default="cpu", help="model shape when no checkpoint is given")
    parser.add_argument("--data", default="tatoeba", help="'tatoeba' (local copy) or 'builtin'")
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.device == "cpu":
        torch.set_num_threads(args.threads)

    sources = french_sentences(args.sentences, args.data)
    if args.checkpoint:
        run = pipeline.load_run(args.checkpoint, device=args.device)
        model, tok = run.model, run.tokenizer
    else:
        cfg = C.preset_config(args.preset)
        tok = Tokenizer.train(french_sentences(2000, args.data), vocab_size=min(cfg.vocab_size, 2000))
        longest = max(len(prompt_ids(tok, s)) for s in sources)
        mcfg = cfg.model_config(tok.vocab_size, args.device)
        mcfg.max_len = max(mcfg.max_len, longest + args.new_tokens)  # room for every sentence's 64 new tokens
        torch.manual_seed(0)
        model = build_model(mcfg).to(args.device).eval()
    prefixes = [prompt_ids(tok, s) for s in sources]
    room = model.config.max_len - max(len(p) for p in prefixes)
    n_new = min(args.new_tokens, room)
    if n_new < args.new_tokens:
        print(f"note: max_len {model.config.max_len} leaves room for {n_new} new tokens after the longest prefix")
    never = tok.pad_id  # an "eos" the model does not produce: every sentence runs the full n_new tokens
    if not args.checkpoint:  # a zero row scores 0 while the best of the other ids scores above 0: never picked
        with torch.no_grad():
            model.lm_head.weight[never].zero_()

    results = {
        "device": args.device,
        "hardware": runtime.hardware_name(args.device),
        "threads": torch.get_num_threads(),
        "sentences": len(sources),
        "new_tokens": n_new,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    rows = {}
    for name, kw in (
        ("greedy, cache", dict(beams=1, use_cache=True)),
        ("greedy, no cache", dict(beams=1, use_cache=False)),
        (f"beam {args.beams}, cache", dict(beams=args.beams, use_cache=True)),
    ):
        seconds, out = timed(lambda kw=kw: model.generate(prefixes, n_new, eos_id=never, **kw), args.repeats)
        lengths = [len(o) for o in out]
        rows[name] = {
            "seconds": round(seconds, 3),
            "sentences_per_s": round(len(sources) / seconds, 2),
            "mean_new_tokens": sum(lengths) / len(lengths),
        }
        print(
            f"{name:18s} {rows[name]['sentences_per_s']:8.2f} sentences/s  ({seconds:.2f} s, "
            f"{rows[name]['mean_new_tokens']:.1f} new tokens per sentence)"
        )
    cached, plain = rows["greedy, cache"]["sentences_per_s"], rows["greedy, no cache"]["sentences_per_s"]
    results["rows"] = rows
    results["cache_speedup"] = round(cached / plain, 2)
    results["beam_slowdown"] = round(cached / rows[f"beam {args.beams}, cache"]["sentences_per_s"], 2)
    print(
        f"cache speed-up: {results['cache_speedup']:.2f}x   beam {args.beams} costs {results['beam_slowdown']:.2f}x greedy"
    )

    if args.checkpoint:  # natural lengths: what evaluate and translate see
        seconds, out = timed(lambda: translation.translate(model, tok, sources, beams=1), args.repeats)
        results["natural_greedy_sentences_per_s"] = round(len(sources) / seconds, 2)
        print(f"natural-length greedy (translate): {len(sources) / seconds:.2f} sentences/s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
