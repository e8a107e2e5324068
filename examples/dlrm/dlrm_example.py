"""Compile a DLRM with luminal and compare it with eager: max |diff| and per-call times.

    python examples/dlrm/dlrm_example.py [--config mini|medium] [--batch 2048] [--bag-size 1]

Uses the GPU when one is available. Without one, luminal runs its CPU reference engine (written
to be checked against, not to be fast); the example then says so and prints the GPU numbers of
the committed benchmark (benchmarks/results/h200_dlrm_bench.json) beside the CPU timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

import luminal
from model import DLRM, MINI, DLRMConfig, make_inputs

CONFIGS = {
    "mini": MINI,
    "medium": DLRMConfig(bottom=(128, 64, 16), tables=(1000, 500, 2000, 50, 7, 300, 10, 100), top=(128, 64, 1)),
}


def per_call_times(fn: Callable[[], object], device: str, warmup: int = 5, iterations: int = 30) -> list[float]:
    """Wall-clock seconds per call (synchronized on CUDA)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return times


BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200_dlrm_bench.json"
GPU_ROWS = {"eager": "eager", "inductor": "Inductor", "cudagraph": "eager in a CUDA graph", "luminal": "luminal"}


def committed_gpu_results(config: str, batch: int) -> list[str]:
    """Lines with the committed GPU benchmark's per-call medians for `config` (none if absent)."""
    if not BENCHMARK.is_file():
        return []
    record = json.loads(BENCHMARK.read_text())
    rows = record.get("results", {}).get(config)
    if not rows:
        return []
    lines = [f"  GPU results committed in {BENCHMARK.name} ({record.get('device')}, batch {record.get('batch')}):"]
    if record.get("batch") != batch:
        lines[0] += f" (this run: batch {batch})"
    for key, label in GPU_ROWS.items():
        if key in rows:
            lines.append(f"    {label:<22}: {rows[key]['median_us']:10.1f} us")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=sorted(CONFIGS), default="mini")
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--bag-size", type=int, default=1)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    config = CONFIGS[args.config]
    model = DLRM(config).to(device).eval()
    inputs = make_inputs(config, args.batch, args.bag_size, device=device)

    compiled = torch.compile(model, backend="luminal")
    with torch.no_grad():
        start = time.perf_counter()
        actual = compiled(*inputs)
        compile_seconds = time.perf_counter() - start
        expected = model(*inputs)
        max_diff = (actual - expected).abs().max().item()
        eager_times = per_call_times(lambda: model(*inputs), device)
        luminal_times = per_call_times(lambda: compiled(*inputs), device)

    print(
        f"DLRM '{args.config}' on {device}: batch {args.batch}, bag size {args.bag_size}, "
        f"{len(config.tables)} tables, embedding dim {config.embedding_dim}"
    )
    print(f"  first call (compile + run): {compile_seconds:.2f} s, graphs compiled: {luminal.compile_count()}")
    print(f"  max |luminal - eager|      : {max_diff:.3e}")
    print(f"  eager   per call (median)  : {statistics.median(eager_times) * 1e6:10.1f} us")
    print(f"  luminal per call (median)  : {statistics.median(luminal_times) * 1e6:10.1f} us")
    if device == "cpu":
        print(
            "  No GPU here: luminal ran its CPU reference engine, which is written to be checked against,\n"
            "  not to be fast (its speed is on CUDA)."
        )
        for line in committed_gpu_results(args.config, args.batch):
            print(line)
    if max_diff > 1e-5:
        raise SystemExit(f"max |diff| {max_diff:.3e} exceeds 1e-5")


if __name__ == "__main__":
    main()
