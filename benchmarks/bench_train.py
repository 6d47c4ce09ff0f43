"""Training throughput: target tokens/s and model FLOPs utilisation (MFU), ours against a naive baseline.

Both train the same model (same size, same optimizer step as ``helpers.training.train``) on the same sentences:

* ours:  length-bucketed batches under a token budget (``BucketBatcher``: little padding) and the
         attention kernel the preset picks (``attention_kernel="auto"``): ``F.scaled_dot_product_attention``
         on a GPU; on a CPU the written-out softmax, which is faster there for sequences this short
         (the script also times ``scaled_dot_product_attention`` on the same batches, as ``ours_sdpa``);
* naive: the explicit softmax attention of notebook 02 (``attention_kernel="explicit"``: the (T, T) score matrix
         is built, masked, softmaxed and stored for the backward pass), random batches of a fixed
         number of sentences padded to the longest one in the batch (a plain ``DataLoader``), and the
         output layer at every position (ours: at target positions alone, issue 51).

MFU = model FLOPs per second / the hardware's peak. Model FLOPs count only real tokens (padding is
waste, not work), per sequence of L tokens:

    6 * N * L            N = parameters that multiply at every token: every block's matrices; the
                         embedding lookup and position table do no multiplies. 2 FLOPs per
                         multiply-add in the forward pass, twice that in the backward pass: 6 per
                         parameter per token (Kaplan et al. 2020).
  + 6 * V * d * L_t      the LM head, at the L_t target tokens alone (logits_at, issue 51).
  + 12 * n_layer * d * L^2   attention's two products (q k^T and weights @ v), 2 * L^2 * d each
                         forward, times 3 with the backward pass, per layer (PaLM's formula, without
                         halving for the mask: the prefix-LM source attends both ways).

The peak is the measured fp32 matrix-product rate on this machine (``bench_matmul.py``) on CPU, the
fp16 tensor-core rate on CUDA (measured; a T4's datasheet says 65 TFLOP/s). The cpu preset trains in
bf16 on a CPU with bf16 instructions, so its MFU is also given against the measured bf16 rate, the
honest yardstick for that run.

    python benchmarks/bench_train.py                            # CPU, 2 threads, preset cpu, Tatoeba if present
    python benchmarks/bench_train.py --preset t4 --steps 50     # on a GPU
    python benchmarks/bench_train.py --data builtin             # no Tatoeba file
    python benchmarks/bench_train.py --compile --skip-naive     # also the compiled step (train --compile 1)

``--compile`` adds ``compiled``: the same model through ``torch.compile`` on static batch shapes
(``StaticBucketBatcher``), each shape compiled once before the clock starts (the compile time is printed apart).

Numbers from a shared or busy machine are low and noisy: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_matmul  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from helpers import runtime
from helpers.nn import build_model  # noqa: E402
from helpers.text import data as D  # noqa: E402
from helpers.text import sources as S
from helpers.text.batches import BucketBatcher, StaticBucketBatcher
from helpers.text.encoding import encode_pairs
from helpers.text.tokenizer import PAD_ID, Tokenizer
from helpers.training import config as C
from helpers.training import optim  # noqa: E402
from helpers.training import train as T  # noqa: E402


def multiplying_params(model) -> int:
    """Parameters that take part in a matrix multiply at every token: the blocks' matrices."""
    model = getattr(model, "_orig_mod", model)  # a torch.compile'd model names its weights _orig_mod.blocks...
    return sum(p.numel() for name, p in model.named_parameters() if name.startswith("blocks.") and p.dim() == 2)


def head_params(model) -> int:
    """The LM head's matrix, tied or not: it multiplies at the target tokens alone (logits_at)."""
    cfg = getattr(model, "_orig_mod", model).config
    return cfg.vocab_size * cfg.d_model


def batch_flops(model, batch) -> float:
    """Model FLOPs of one training step on ``batch``, real tokens only (see the module docstring)."""
    cfg = model.config
    lengths = (batch.input_ids != PAD_ID).sum(dim=1).double()  # (B,) real tokens per row
    targets = (batch.labels != -100).sum(dim=1).double()  # (B,) of them scored by the head
    n, head = multiplying_params(model), head_params(model)
    return float((6 * n * lengths + 6 * head * targets + 12 * cfg.n_layer * cfg.d_model * lengths**2).sum())


def naive_batches(examples, batch_size: int, seed: int):
    """Random batches of ``batch_size`` sentences, each padded to its longest: no bucketing."""
    longest = max(len(e.input_ids) for e in examples)
    return BucketBatcher(
        examples, max_tokens=batch_size * longest, shuffle=True, seed=seed, bucket=False, max_batch_size=batch_size
    )


def run(model, batches, cfg, device, steps: int, warmup: int, precision: str, full_head: bool = False) -> dict:
    """Time ``steps`` optimizer steps (after ``warmup`` untimed ones) exactly as helpers.training.train.train does them.

    ``full_head``: the output layer at every position, as before issue 51 (the loss then keeps the target rows)."""
    opt = optim.make_optimizer(model, cfg, device)
    scaler = T.make_scaler(device, precision)
    if hasattr(batches, "set_epoch"):
        batches.set_epoch(0)  # every run sees the same batches, from the start
    it = iter(batches)
    model.train()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    target = real = padded = 0
    flops = 0.0
    t0 = None
    for i in range(warmup + steps):
        if i == warmup:
            sync()
            t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            it = iter(batches)
            batch = next(it)
        b = batch.to(device)
        opt.param_groups[0]["lr"] = opt.param_groups[1]["lr"] = cfg.lr * 0.1
        with T.autocast_context(device, precision):
            logits = model(b.input_ids, b.prefix_len, logits_at=None if full_head else b.labels != -100)
        loss = T.loss_fn(logits, b.labels, cfg.label_smoothing)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        float(loss.detach())  # the training loop reads the loss every step
        if i >= warmup:
            target += batch.n_target_tokens
            real += int((batch.input_ids != PAD_ID).sum())
            padded += batch.input_ids.numel()
            flops += batch_flops(model, batch)
    sync()
    seconds = time.perf_counter() - t0
    return {
        "steps": steps,
        "seconds": round(seconds, 3),
        "target_tokens_per_s": round(target / seconds, 1),
        "tokens_per_s": round(real / seconds, 1),
        "padding_fraction": round(1 - real / padded, 3),
        "model_gflops_per_s": round(flops / seconds / 1e9, 2),
    }


def precompile(net, batches, cfg, device, precision) -> tuple[float, int]:
    """One forward and backward pass per batch shape, so the timed steps meet no compilation: (seconds, shapes)."""
    t0, seen = time.perf_counter(), set()
    for batch in batches:
        if tuple(batch.input_ids.shape) in seen:
            continue
        seen.add(tuple(batch.input_ids.shape))
        b = batch.to(device)
        with T.autocast_context(device, precision):
            logits = net(b.input_ids, b.prefix_len, logits_at=b.labels != -100)
            T.loss_fn(logits, b.labels, cfg.label_smoothing).backward()
        net.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, len(seen)


def output_layer_ab(examples, vocab, args, device) -> dict:
    """Issue 51: target tokens/s with the output layer at every position (before) and at target positions alone
    (after), per precision and width, on the same batches; the two alternate ``args.rounds`` times and each figure
    is the median of its rounds, so a drift of the machine's speed hits both alike."""
    results = {}
    for precision in args.precisions.split(","):
        for width in (int(w) for w in args.widths.split(",")):
            cfg = C.preset_config(args.preset, d_model=width, d_ff=4 * width)
            batches = BucketBatcher(examples, max_tokens=cfg.max_tokens, shuffle=True, seed=0)
            speeds = {"full": [], "targets": []}
            for _ in range(args.rounds):
                for name in speeds:
                    torch.manual_seed(0)
                    model = build_model(cfg.model_config(vocab, device)).to(device)
                    r = run(model, batches, cfg, device, args.steps, args.warmup, precision, full_head=name == "full")
                    speeds[name].append(r["target_tokens_per_s"])
            med = {name: sorted(v)[len(v) // 2] for name, v in speeds.items()}
            key = f"{precision} width {width}"
            results[key] = {"runs": speeds, "median": med, "ratio": round(med["targets"] / med["full"], 3)}
            print(
                f"{key}: output layer everywhere {med['full']:,.0f} target tok/s, at targets alone "
                f"{med['targets']:,.0f}: {results[key]['ratio']:.2f}x  (rounds: {speeds})",
                flush=True,
            )
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", default="tatoeba", help="'tatoeba' (the local copy), 'builtin', or a French<TAB>English file"
    )
    parser.add_argument("--preset", default="cpu")
    parser.add_argument(
        "--tokenizer", default=None, help="a tokenizer folder to reuse (e.g. <run>/tokenizer); else one is trained"
    )
    parser.add_argument("--pairs", type=int, default=20000, help="sentences sampled for the benchmark")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", default=None, help="fp32 | bf16 | fp16 | auto (default: the preset's)")
    parser.add_argument("--peak-gflops", type=float, default=None, help="skip the matmul measurement and use this peak")
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument("--compile", action="store_true", help="also time the compiled step on static shapes")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend for --compile")
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--output-layer",
        action="store_true",
        help="issue 51's A/B instead: the output layer everywhere against at target positions alone",
    )
    parser.add_argument("--precisions", default="bf16,fp32", help="with --output-layer")
    parser.add_argument("--widths", default="128,192", help="with --output-layer")
    parser.add_argument("--rounds", type=int, default=3, help="with --output-layer: A/B alternations")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    cfg = C.preset_config(args.preset)
    precision = runtime.resolve_precision(device, args.precision or cfg.precision)

    if args.data == "builtin":
        pairs, _ = S.load_pairs("builtin", limit=args.pairs, seed=0)
    elif args.data == "tatoeba":
        pairs, _ = S.load_pairs("tatoeba", limit=args.pairs, seed=0, download=False)
    else:
        pairs, _ = S.load_pairs("tsv", args.data, limit=args.pairs, seed=0)
    pairs, _ = D.clean_pairs(pairs)
    tok = (
        Tokenizer.load(args.tokenizer)
        if args.tokenizer
        else Tokenizer.train(pairs, vocab_size=cfg.vocab_size, model_type=cfg.tokenizer_type)
    )
    examples, _ = encode_pairs(tok, pairs, cfg.max_len)
    if args.output_layer:
        print(
            f"device {device} ({runtime.hardware_name(device)}), threads {torch.get_num_threads()}, torch {torch.__version__}"
        )
        results = output_layer_ab(examples, tok.vocab_size, args, device)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        return 0
    ours_batches = BucketBatcher(examples, max_tokens=cfg.max_tokens, shuffle=True, seed=0)
    stats = ours_batches.stats()
    batch_size = max(1, round(stats["mean_batch_size"]))  # the naive baseline gets the same sentences per step
    naive = naive_batches(examples, batch_size, seed=0)

    torch.manual_seed(0)
    model = build_model(cfg.model_config(tok.vocab_size, device)).to(device)
    n_mult = multiplying_params(model)
    peaks = {}
    if args.peak_gflops:
        peak, peak_label = args.peak_gflops, "given"
    else:
        m = bench_matmul.measure(device.type, args.threads, seconds=1.0)
        peaks = m["gflops"]
        # the yardstick: fp32 on a CPU, fp16 tensor cores on a GPU; a bf16 run is also shown against bf16
        key = "fp32" if device.type == "cpu" else "fp16"
        peak, peak_label = peaks[key], f"measured {key} matmul"

    print(
        f"device {device} ({runtime.hardware_name(device)}), threads {torch.get_num_threads()}, precision {precision}, torch {torch.__version__}"
    )
    print(
        f"model: preset {args.preset}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters "
        f"({n_mult / 1e6:.2f} M multiplying), vocab {tok.vocab_size}; {len(examples):,} sentences; "
        f"ours: max_tokens {cfg.max_tokens} (mean {stats['mean_batch_size']:.1f} sentences/batch); naive: {batch_size} sentences/batch"
    )
    print(f"peak: {peak:.1f} GFLOP/s ({peak_label})" + "".join(f"; {k} {v:.1f}" for k, v in peaks.items()))

    results = {
        "peaks_gflops": peaks,
        "device": str(device),
        "hardware": runtime.hardware_name(device),
        "threads": torch.get_num_threads(),
        "precision": precision,
        "preset": args.preset,
        "peak_gflops": peak,
        "peak_source": peak_label,
        "parameters": sum(p.numel() for p in model.parameters()),
        "multiplying_parameters": n_mult,
    }
    kernel = model.config.attention_kernel
    print(f"ours: {kernel} attention (attention_kernel={cfg.attention_kernel!r})")
    results["ours_attention"] = kernel
    results["ours"] = run(model, ours_batches, cfg, device, args.steps, args.warmup, precision)
    if kernel != "sdpa":  # the fused kernel on the same batches, for reference
        torch.manual_seed(0)
        sdpa_model = build_model(replace(cfg, attention_kernel="sdpa").model_config(tok.vocab_size)).to(device)
        results["ours_sdpa"] = run(sdpa_model, ours_batches, cfg, device, args.steps, args.warmup, precision)
    if args.compile:
        static = StaticBucketBatcher(examples, cfg.max_tokens, step=cfg.static_step, max_len=cfg.max_len, seed=0)
        torch.manual_seed(0)
        net = T.compiled(build_model(cfg.model_config(tok.vocab_size, device)).to(device), args.backend)
        seconds, shapes = precompile(net, static, cfg, device, precision)
        print(f"compiled ({args.backend}): {shapes} batch shapes compiled in {seconds:.0f} s before timing")
        results["compile"] = {"backend": args.backend, "shapes": shapes, "compile_seconds": round(seconds, 1)}
        results["compiled"] = run(net, static, cfg, device, args.steps, args.warmup, precision)
    if not args.skip_naive:
        torch.manual_seed(0)
        # the explicit softmax attention of notebook 02
        naive_model = build_model(replace(cfg, attention_kernel="explicit").model_config(tok.vocab_size)).to(device)
        results["naive"] = run(naive_model, naive, cfg, device, args.steps, args.warmup, precision, full_head=True)
    for name in ("ours", "ours_sdpa", "compiled", "naive"):
        if name in results:
            r = results[name]
            r["mfu"] = round(r["model_gflops_per_s"] / peak, 3)
            same = peaks.get(precision) if precision != "fp32" and device.type == "cpu" else None
            if same:
                r[f"mfu_vs_{precision}_peak"] = round(r["model_gflops_per_s"] / same, 3)
            extra = f" ({r[f'mfu_vs_{precision}_peak']:.1%} of the {precision} peak)" if same else ""
            print(
                f"{name:9s} {r['target_tokens_per_s']:10,.0f} target tok/s  {r['tokens_per_s']:10,.0f} tok/s  "
                f"padding {r['padding_fraction']:.1%}  {r['model_gflops_per_s']:8.1f} GFLOP/s  MFU {r['mfu']:.1%}{extra}"
            )
    if "naive" in results:
        results["speedup"] = round(results["ours"]["target_tokens_per_s"] / results["naive"]["target_tokens_per_s"], 2)
        print(f"speed-up (target tokens/s, ours / naive): {results['speedup']:.2f}x")
    if "compiled" in results:
        results["compile"]["speedup"] = round(
            results["compiled"]["target_tokens_per_s"] / results["ours"]["target_tokens_per_s"], 2
        )
        print(f"speed-up (target tokens/s, compiled / ours): {results['compile']['speedup']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
