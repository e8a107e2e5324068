"""DLRM and MLP latency: luminal against eager, Inductor, Inductor reduce-overhead and a CUDA-graph
capture of eager, all in one process on one GPU.

    python benchmarks/dlrm_bench.py [--configs kaggle mini mlp] [--batch 2048] [--json out.json]

Per-call times come from CUDA events around each call (a host-bound call shows its host time),
median and p90 over --iterations calls after --warmup calls; "loop" is the mean of back-to-back
calls between one pair of events. Every backend's output is compared with eager first. fp32 with
TF32 off unless --tf32.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
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
BACKENDS = ["eager", "inductor", "inductor-ro", "cudagraph", "luminal"]


def make_workload(name: str, batch: int) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    config = CONFIGS[name]
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


def build(backend: str, model: torch.nn.Module, inputs: tuple[Any, ...]) -> Callable[[], Any]:
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
    if backend == "luminal":
        compiled = torch.compile(model, backend="luminal")
        return lambda: compiled(*inputs)
    raise ValueError(backend)


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


def run_config(name: str, batch: int, backends: list[str], warmup: int, iterations: int) -> dict[str, Any]:
    torch.manual_seed(0)
    model, inputs = make_workload(name, batch)
    results: dict[str, Any] = {}
    with torch.no_grad():
        reference = model(*inputs).float()
        for backend in backends:
            torch._dynamo.reset()
            start = time.perf_counter()
            fn = build(backend, model, inputs)
            out = fn()
            torch.cuda.synchronize()
            setup = time.perf_counter() - start
            max_diff = (out.float() - reference).abs().max().item()
            timing = measure(fn, warmup, iterations)
            results[backend] = {**timing, "max_abs_diff": max_diff, "first_call_s": setup}
            print(
                f"  {backend:12s} median {timing['median_us']:9.1f} us  p90 {timing['p90_us']:9.1f} us  "
                f"loop {timing['loop_mean_us']:9.1f} us  host {timing['host_us']:7.1f} us  "
                f"max|diff| {max_diff:.2e}  first call {setup:6.2f} s",
                flush=True,
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["kaggle", "mini", "mlp"], choices=sorted(CONFIGS))
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
    for name in args.configs:
        print(f"{name}:", flush=True)
        report["results"][name] = run_config(name, args.batch, args.backends, args.warmup, args.iterations)
    if "luminal" in args.backends:
        report["luminal_compiles"] = luminal.compile_count()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
