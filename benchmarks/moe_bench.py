"""Grouped GEMM (torch._grouped_mm) and a routed MoE layer: eager vs Inductor vs luminal, on CUDA.

    python benchmarks/moe_bench.py [--json results/moe.json]

Per-call median and p90 from CUDA events around each call, after warm-up; bf16 throughout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch

import luminal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_grouped_mm import MoE  # noqa: E402


def time_calls(fn: Callable[[], object], iterations: int = 200) -> tuple[float, float]:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.9)]


def grouped_case(tokens: int, k: int, n: int, groups: int) -> tuple[Callable[..., torch.Tensor], tuple]:
    sizes = torch.full((groups,), tokens // groups)
    sizes[0] += tokens - int(sizes.sum())
    offs = sizes.cumsum(0).to(device="cuda", dtype=torch.int32)
    a = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(groups, n, k, device="cuda", dtype=torch.bfloat16)

    def fn(a: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        return torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)

    return fn, (a, w, offs)


def moe_case(tokens: int, dim: int, hidden: int, experts: int) -> tuple[Callable[..., torch.Tensor], tuple]:
    model = MoE(dim, hidden, experts, top_k=2).to(device="cuda", dtype=torch.bfloat16).eval()
    return model, (torch.randn(tokens, dim, device="cuda", dtype=torch.bfloat16),)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.manual_seed(0)
    cases = {
        "grouped 2048x512 @ 8x[512,1024]": grouped_case(2048, 512, 1024, 8),
        "grouped 8192x1024 @ 8x[1024,2048]": grouped_case(8192, 1024, 2048, 8),
        "moe 512 tok, dim 256, hidden 512, 8 experts": moe_case(512, 256, 512, 8),
    }
    results = []
    print(f"{'case':48s} {'backend':10s} {'median us':>10s} {'p90 us':>10s}")
    for name, (fn, inputs) in cases.items():
        backends = {
            "eager": fn,
            "inductor": torch.compile(fn, backend="inductor"),
            "luminal": torch.compile(fn, backend=luminal.luminal_backend),
        }
        with torch.no_grad():
            expected = fn(*inputs).float()
            for backend, compiled in backends.items():
                try:
                    error = (compiled(*inputs).float() - expected).abs().max().item()
                except Exception as failure:  # a backend that cannot compile the case is reported, not fatal
                    print(f"{name:48s} {backend:10s} failed: {type(failure).__name__}: {failure}"[:300], flush=True)
                    continue
                median, p90 = time_calls(lambda c=compiled, x=inputs: c(*x))
                print(f"{name:48s} {backend:10s} {median:10.1f} {p90:10.1f}   max|diff| {error:.3g}", flush=True)
                row = {"case": name, "backend": backend, "median_us": median, "p90_us": p90, "max_abs_diff": error}
                results.append(row)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
