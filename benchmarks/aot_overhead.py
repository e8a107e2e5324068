"""Per-call cost of the mini DLRM through luminal.compile (no Dynamo) against torch.compile with the
luminal backend, eager, a package saved and loaded again, and the floor: one tiny kernel (on CPU:
one tiny op) launched from Python, the least any call can cost. Prints a table; asserts nothing.

    python benchmarks/aot_overhead.py [--model dlrm|linear] [--device cuda|cpu] [--batch N] [--iterations N]

On CUDA the per-call times come from CUDA events around each call (dlrm_bench.measure: a host-bound
call shows its host time); on the CPU from perf_counter around each call. Median, p90 and the mean
of back-to-back calls, in microseconds. Outputs are compared with eager first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from dlrm_bench import measure

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "dlrm"))
import luminal  # noqa: E402
from model import DLRM, MINI, make_inputs  # noqa: E402


def measure_cpu(fn: Callable[[], Any], warmup: int, iterations: int) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    per_call = []
    for _ in range(iterations):
        start = time.perf_counter_ns()
        fn()
        per_call.append((time.perf_counter_ns() - start) / 1000.0)
    per_call.sort()
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    loop = (time.perf_counter() - start) * 1e6 / iterations
    return {
        "median_us": statistics.median(per_call),
        "p90_us": per_call[int(0.9 * (len(per_call) - 1))],
        "loop_mean_us": loop,
    }


def workload(name: str, device: str, batch: int) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    if name == "linear":  # the least work a graph can do: the call path is nearly all there is
        return torch.nn.Linear(4, 4).to(device).eval(), (torch.randn(batch, 4, device=device),)
    return DLRM(MINI).to(device).eval().use_prebuilt_pairs(), make_inputs(MINI, batch, device=device)


def variants(name: str, device: str, batch: int, directory: Path) -> dict[str, Callable[[], Any]]:
    model, inputs = workload(name, device, batch)
    expected = model(*inputs)
    dynamo = torch.compile(model, backend="luminal", options={"strict": True})
    aot = luminal.compile(model, inputs, options={"strict": True})
    aot.save(directory / "dlrm.luminal")
    loaded = luminal.load(directory / "dlrm.luminal")
    tiny = torch.zeros(1, device=device)
    built: dict[str, Callable[[], Any]] = {
        "eager": lambda: model(*inputs),
        "torch.compile(backend=luminal)": lambda: dynamo(*inputs),
        "luminal.compile": lambda: aot(*inputs),
        "luminal.load": lambda: loaded(*inputs),
        # The compiled graph's own call, without LuminalModule.__call__: the wrapper's share.
        "luminal.compile's C++ call alone": lambda: aot._graph.call(*inputs),
        "floor (one tiny op)": lambda: tiny.add_(1.0),
    }
    for name in (
        "torch.compile(backend=luminal)",
        "luminal.compile",
        "luminal.load",
        "luminal.compile's C++ call alone",
    ):
        torch.testing.assert_close(built[name](), expected, rtol=1e-5, atol=1e-5, msg=name)
    assert aot.stats()["aot"]["fast_path"] and loaded.stats()["aot"]["exports"] == 0
    return built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model", default="dlrm", choices=["dlrm", "linear"], help="the mini DLRM, or one Linear(4, 4)"
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    parser.add_argument("--batch", type=int, default=None, help="default: 2048 on CUDA, 4 on the CPU")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=2000)
    args = parser.parse_args()
    batch = args.batch or (2048 if args.device == "cuda" and args.model == "dlrm" else 4)
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad(), tempfile.TemporaryDirectory() as directory:
        built = variants(args.model, args.device, batch, Path(directory))
        timer = measure if args.device == "cuda" else measure_cpu
        results = {name: timer(fn, args.warmup, args.iterations) for name, fn in built.items()}
    title = "mini DLRM" if args.model == "dlrm" else "Linear(4, 4)"
    print(f"{title}, batch {batch}, {args.device}, {args.iterations} calls (us per call)")
    print(f"{'variant':34s} {'median':>9s} {'p90':>9s} {'loop':>9s}")
    for name, r in results.items():
        print(f"{name:34s} {r['median_us']:9.2f} {r['p90_us']:9.2f} {r['loop_mean_us']:9.2f}")
    floor = results["floor (one tiny op)"]["median_us"]
    aot = results["luminal.compile"]["median_us"]
    dynamo = results["torch.compile(backend=luminal)"]["median_us"]
    print(
        f"luminal.compile / floor: {aot / floor:.2f}x; torch.compile(backend=luminal) - luminal.compile: "
        f"{dynamo - aot:.2f} us per call"
    )


if __name__ == "__main__":
    main()
