"""Measured matrix-product peak: the denominator of model FLOPs utilisation (MFU).

A CPU has no single published peak that holds inside a shared virtual machine, so we measure one:
the best GFLOP/s of large square fp32 matrix products (2 n^3 FLOPs each) with the threads training
uses. On CUDA we also measure fp16 and bf16 (tensor cores), and list the datasheet peak beside it
(a T4: 65 TFLOP/s fp16).

    python benchmarks/bench_matmul.py                 # CPU, 2 threads, fp32 (and bf16 for reference)
    python benchmarks/bench_matmul.py --threads 1
    python benchmarks/bench_matmul.py --json out.json

Other programs running at the same time lower the figure; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import torch

DATASHEET_TFLOPS = {  # dense fp16 tensor-core peak, for reference beside the measured one
    "Tesla T4": 65.0,
    "NVIDIA A100": 312.0,
    "NVIDIA L4": 121.0,
    "NVIDIA H100": 989.0,
    "NVIDIA H200": 989.0,
}


def matmul_gflops(n: int, dtype: torch.dtype, device: str, seconds: float = 2.0, repeats: int = 3) -> float:
    """Best GFLOP/s over ``repeats`` windows of ``seconds`` of ``n x n @ n x n`` products."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(3):  # warm-up: thread pools, caches, cuBLAS heuristics
        a @ b
    sync()
    best = 0.0
    for _ in range(repeats):
        k, t0 = 0, time.perf_counter()
        while True:
            a @ b
            k += 1
            if k % 4 == 0:
                sync()
                if time.perf_counter() - t0 >= seconds:
                    break
        sync()
        best = max(best, 2 * n**3 * k / (time.perf_counter() - t0) / 1e9)
    return best


def measure(device: str = "cpu", threads: int = 2, sizes=None, seconds: float = 2.0) -> dict:
    """Peak GFLOP/s per dtype (the best over ``sizes``) on ``device``."""
    if device == "cpu":
        torch.set_num_threads(threads)
    sizes = sizes or ([512, 1024, 2048] if device == "cpu" else [4096, 8192])
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    if device == "cuda":
        dtypes["fp16"] = torch.float16
    result = {
        "device": device,
        "threads": torch.get_num_threads() if device == "cpu" else None,
        "gflops": {},
        "by_size": {},
    }
    if device == "cuda":
        result["name"] = torch.cuda.get_device_name(0)
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 here
    else:
        result["name"] = platform.processor() or platform.machine()
    for label, dtype in dtypes.items():
        rates = {n: matmul_gflops(n, dtype, device, seconds) for n in sizes}
        result["by_size"][label] = {str(n): round(r, 1) for n, r in rates.items()}
        result["gflops"][label] = round(max(rates.values()), 1)
    if device == "cuda":
        sheet = next((v for k, v in DATASHEET_TFLOPS.items() if result["name"].startswith(k)), None)
        result["datasheet_fp16_tflops"] = sheet
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (training on 2 cores uses 2)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each timing window")
    parser.add_argument("--json", default=None, help="also write the result here")
    args = parser.parse_args(argv)
    r = measure(args.device, args.threads, seconds=args.seconds)
    threads = f", {r['threads']} threads" if r["threads"] else ""
    print(f"{r['name']} ({r['device']}{threads}), torch {torch.__version__}")
    for label, g in r["gflops"].items():
        sizes = ", ".join(f"n={n}: {v}" for n, v in r["by_size"][label].items())
        print(f"  {label:5s} peak {g:10.1f} GFLOP/s   ({sizes})")
    if r.get("datasheet_fp16_tflops"):
        print(f"  datasheet fp16 peak: {r['datasheet_fp16_tflops']} TFLOP/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
