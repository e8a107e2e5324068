"""DLRM and MLP latency: luminal against eager, Inductor, Inductor reduce-overhead and a CUDA-graph
capture of eager, all in one process on one GPU.

    python benchmarks/dlrm_bench.py [--configs mini mini16 kaggle mlp] [--batch 2048] [--sweep]
                                    [--json out.json] [--plot out.png]

Backends: eager, inductor, inductor-ro (reduce-overhead), cudagraph (eager captured once into a CUDA
graph with static inputs, replayed), luminal-general (luminal without the megakernel), luminal
(the megakernel or the general path, whichever measured faster at the first call, when the
matcher accepts the graph), and floor: one tiny kernel launched from
Python, the least any call can cost. --sweep adds batch {256, 1024, 2048, 4096} x tables {3, 8, 16}
of the mini DLRM.

Per-call times come from CUDA events around each call (a host-bound call shows its host time),
median and p90 over --iterations calls after --warmup calls; "loop" is the mean of back-to-back
calls between one pair of events; "host" is the CPU time per call of that loop. For luminal,
"direct" is the host time of calling luminal's compiled function without Dynamo's guards. Every
backend's output is compared with eager first. fp32 with TF32 off unless --tf32.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "dlrm"))
import luminal  # noqa: E402
from model import DLRM, KAGGLE, MINI, DLRMConfig, make_inputs  # noqa: E402

CONFIGS: dict[str, DLRMConfig | None] = {
    "kaggle": KAGGLE,
    "mini": MINI,
    "mini16": DLRMConfig(tables=tuple([10, 20, 30, 40] * 4)),
    "mlp": None,  # 13-512-256-64-16 bottom-MLP-shaped stack on its own
}
BACKENDS = ["eager", "inductor", "inductor-ro", "cudagraph", "luminal-general", "luminal", "floor", "compile-floor"]
FLOORS = ("floor", "compile-floor")
SWEEP_BATCHES = [256, 1024, 2048, 4096]
SWEEP_TABLES = [3, 8, 16]
MINI_TABLE_ROWS = [10, 20, 30, 40]


def sweep_config(tables: int) -> DLRMConfig:
    return DLRMConfig(tables=tuple(MINI_TABLE_ROWS[k % len(MINI_TABLE_ROWS)] for k in range(tables)))


def make_workload(config: DLRMConfig | None, batch: int) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    if config is None:
        layers = [torch.nn.Linear(13, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256), torch.nn.ReLU()]
        layers += [torch.nn.Linear(256, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)]
        model = torch.nn.Sequential(*layers).cuda().eval()
        return model, (torch.randn(batch, 13, device="cuda"),)
    model = DLRM(config).cuda().eval()
    return model, make_inputs(config, batch, 1, device="cuda")


def cuda_graph_of(model: torch.nn.Module, inputs: tuple[Any, ...]) -> Callable[[], Any]:
    """Eager forward captured once into a CUDA graph (static inputs), replayed per call."""
    if isinstance(model, DLRM):
        model = copy.deepcopy(model).use_prebuilt_pairs()  # the capture cannot copy from the host
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            model(*inputs)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(*inputs)

    def replay() -> Any:
        graph.replay()
        return static_out

    return replay


class Captured:
    """A luminal backend that keeps the compiled function and the arguments Dynamo passed."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.compiled: Any = None
        self.arguments: list[Any] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.compiled = luminal.luminal_backend(gm, example_inputs, **self.options)
        self.arguments = list(example_inputs)
        return self.compiled


def build(backend: str, model: torch.nn.Module, inputs: tuple[Any, ...], captured: Captured) -> Callable[[], Any]:
    if backend == "eager":
        return lambda: model(*inputs)
    if backend == "inductor":
        compiled = torch.compile(model)
        return lambda: compiled(*inputs)
    if backend == "inductor-ro":
        compiled = torch.compile(model, mode="reduce-overhead")
        return lambda: compiled(*inputs)
    if backend == "cudagraph":
        return cuda_graph_of(model, inputs)
    if backend in ("luminal", "luminal-general"):
        captured.options = {"megakernel": backend == "luminal"}
        compiled = torch.compile(model, backend=captured)
        return lambda: compiled(*inputs)
    if backend == "floor":
        tiny = torch.zeros(1, device="cuda")
        return lambda: tiny.add_(1.0)
    if backend == "compile-floor":
        return compile_floor(model, inputs)
    raise ValueError(backend)


def compile_floor(model: torch.nn.Module, inputs: tuple[Any, ...]) -> Callable[[], Any]:
    """torch.compile of the model with a backend whose compiled function only launches one tiny
    kernel: what Dynamo itself costs per call of this model (guards, gathering the parameters)."""
    tiny = torch.zeros(1, device="cuda")
    result = model(*inputs)

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        def launch_only(*args: Any) -> Any:
            tiny.add_(1.0)
            return (result,)

        return launch_only

    compiled = torch.compile(model, backend=backend)
    return lambda: compiled(*inputs)


def host_time_us(fn: Callable[[], Any], iterations: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    seconds = time.perf_counter() - start
    torch.cuda.synchronize()
    return seconds * 1e6 / iterations


def measure(fn: Callable[[], Any], warmup: int, iterations: int) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    per_call = sorted(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends, strict=True))
    loop_start, loop_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    loop_start.record()
    host_start = time.perf_counter()
    for _ in range(iterations):
        fn()
    host_seconds = time.perf_counter() - host_start
    loop_end.record()
    torch.cuda.synchronize()
    return {
        "median_us": statistics.median(per_call),
        "p90_us": per_call[int(0.9 * (len(per_call) - 1))],
        "loop_mean_us": loop_start.elapsed_time(loop_end) * 1000.0 / iterations,
        "host_us": host_seconds * 1e6 / iterations,  # CPU time to submit one call (the GPU runs behind)
    }


def run_config(
    config: DLRMConfig | None, batch: int, backends: list[str], warmup: int, iterations: int
) -> dict[str, Any]:
    torch.manual_seed(0)
    model, inputs = make_workload(config, batch)
    results: dict[str, Any] = {}
    with torch.no_grad():
        reference = model(*inputs).float()
        for backend in backends:
            torch._dynamo.reset()
            captured = Captured()
            start = time.perf_counter()
            fn = build(backend, model, inputs, captured)
            out = fn()
            torch.cuda.synchronize()
            setup = time.perf_counter() - start
            max_diff = 0.0 if backend in FLOORS else (out.float() - reference).abs().max().item()
            timing = measure(fn, warmup, iterations)
            entry: dict[str, Any] = {**timing, "max_abs_diff": max_diff, "first_call_s": setup}
            line = (
                f"  {backend:15s} median {timing['median_us']:8.1f} us  p90 {timing['p90_us']:8.1f} us  "
                f"loop {timing['loop_mean_us']:8.1f} us  host {timing['host_us']:6.1f} us  "
                f"max|diff| {max_diff:.1e}  first call {setup:5.2f} s"
            )
            if captured.compiled is not None:
                direct = captured.compiled
                arguments = captured.arguments
                entry["direct_host_us"] = host_time_us(lambda f=direct, a=arguments: f(*a), iterations)
                stats = direct.stats()
                entry["megakernel"] = bool(stats.get("cuda", {}).get("megakernel", False))
                entry["megakernel_reason"] = stats["megakernel_reason"]
                line += f"  direct {entry['direct_host_us']:5.1f} us  megakernel {entry['megakernel']}"
            results[backend] = entry
            print(line, flush=True)
    ranking = sorted((r["median_us"], b) for b, r in results.items() if b not in FLOORS)
    print("  ranking: " + " < ".join(f"{b} {t:.1f}" for t, b in ranking), flush=True)
    return results


def cold_and_warm_compile(config: DLRMConfig, batch: int) -> dict[str, float]:
    """First-call time of luminal with an empty and with a filled kernel cache (a fresh directory)."""
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache, torch.no_grad():
        os.environ["LUMINAL_CACHE_DIR"] = cache
        try:
            for label in ("cold", "warm"):
                torch._dynamo.reset()
                luminal.clear_kernel_cache()
                model, inputs = make_workload(config, batch)
                compiled = torch.compile(model, backend="luminal")
                torch.cuda.synchronize()
                start = time.perf_counter()
                compiled(*inputs)
                torch.cuda.synchronize()
                times[f"{label}_compile_s"] = time.perf_counter() - start
        finally:
            del os.environ["LUMINAL_CACHE_DIR"]
    return times


def plot(report: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (run benchmarks/plot_dlrm.py on the JSON instead)")
        return
    from plot_dlrm import draw  # noqa: PLC0415

    draw(report, path, plt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["mini", "mini16", "kaggle", "mlp"], choices=sorted(CONFIGS))
    parser.add_argument("--sweep", action="store_true", help="batch x tables sweep of the mini DLRM")
    parser.add_argument("--plot", type=Path, help="write a PNG of the results (needs matplotlib)")
    parser.add_argument("--backends", nargs="+", default=BACKENDS, choices=BACKENDS)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--tf32", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    if not torch.cuda.is_available():
        raise SystemExit("this benchmark needs a CUDA device (torch.cuda.is_available() is False)")
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, batch {args.batch}, tf32 {args.tf32}")
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "batch": args.batch,
        "tf32": args.tf32,
        "results": {},
    }

    def save() -> None:  # after every config, so that an interrupted run keeps what it measured
        if args.json:
            args.json.write_text(json.dumps(report, indent=1))

    for name in args.configs:
        print(f"{name}:", flush=True)
        report["results"][name] = run_config(CONFIGS[name], args.batch, args.backends, args.warmup, args.iterations)
        save()
    if args.sweep:
        report["sweep"] = {}
        for tables in SWEEP_TABLES:
            for batch in SWEEP_BATCHES:
                key = f"tables{tables}_batch{batch}"
                print(f"sweep {key}:", flush=True)
                report["sweep"][key] = run_config(
                    sweep_config(tables), batch, args.backends, args.warmup, args.iterations
                )
                save()
    if "luminal" in args.backends:
        report["luminal_compiles"] = luminal.compile_count()
        report["compile_mini"] = cold_and_warm_compile(MINI, args.batch)
        print(f"luminal first call on mini: {report['compile_mini']}", flush=True)
    save()
    if args.plot:
        plot(report, args.plot)


if __name__ == "__main__":
    main()
