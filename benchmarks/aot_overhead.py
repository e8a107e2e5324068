"""Per-call cost of the mini DLRM through luminal.compile (no Dynamo) against torch.compile with the
luminal backend, eager, a package saved and loaded again, and the floor: one tiny kernel (on CPU:
one tiny op) launched from Python, the least any call can cost. Prints a table; asserts nothing.

    python benchmarks/aot_overhead.py [--model dlrm|linear] [--device cuda|cpu] [--batch N] [--iterations N]
                                      [--json out.json]

On CUDA the mini DLRM also has the reference row: the hand-written register kernel of
benchmarks/reference_kernels.py launched from Python (one launch, reading the model's parameters
by pointer). The GPU-time comparison then times the kernels themselves (torch.profiler's kernel
records over --gpu-calls calls) of luminal's megakernel (forced: LUMINAL_SEARCH=0 at its first
call), luminal's general path, whatever luminal.compile chose, and the hand kernel, and prints
megakernel / hand kernel: the ratio the open issue bounds by 1.5. It also gives each one's GPU span
per call with the host ahead of the GPU (CUDA events around back-to-back calls queued behind a
sleeping kernel: the launch gaps between calls included). --json writes everything.

On CUDA the per-call times come from CUDA events around each call (dlrm_bench.measure: a host-bound
call shows its host time); on the CPU from perf_counter around each call. Median, p90 and the mean
of back-to-back calls, in microseconds. Outputs are compared with eager first.
"""

from __future__ import annotations

import argparse
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
from dlrm_bench import measure
from reference_kernels import MiniDLRMReference

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "dlrm"))
import luminal  # noqa: E402
from model import DLRM, MINI, make_inputs  # noqa: E402

REFERENCE = "hand-written register kernel, launched from Python"


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
    if device == "cuda" and name == "dlrm":
        reference = MiniDLRMReference(model)
        reference.validate(*inputs)
        built[REFERENCE] = lambda: reference(*inputs)
    for name in (
        "torch.compile(backend=luminal)",
        "luminal.compile",
        "luminal.load",
        "luminal.compile's C++ call alone",
        *([REFERENCE] if REFERENCE in built else []),
    ):
        torch.testing.assert_close(built[name](), expected, rtol=1e-5, atol=1e-5, msg=name)
    assert aot.stats()["aot"]["fast_path"] and loaded.stats()["aot"]["exports"] == 0
    return built


def kernel_us_per_call(fn: Callable[[], Any], calls: int) -> dict[str, float]:
    """GPU time per call of each kernel `fn` runs (torch.profiler's kernel records, microseconds)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    totals: dict[str, float] = {}
    for event in prof.events():
        if event.device_type == DeviceType.CUDA:
            totals[event.name] = totals.get(event.name, 0.0) + event.time_range.elapsed_us() / calls
    return totals


def gpu_span_us_per_call(fn: Callable[[], Any], calls: int) -> float:
    """GPU time per call of back-to-back calls with the host ahead: a sleeping kernel first lets the
    host queue every call before the GPU reaches them, so CUDA events around the calls time the GPU
    (launch gaps between calls included), not the host."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(200_000_000)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / calls


def with_rules_only(fn: Callable[[], Any]) -> Any:
    """Runs fn with LUMINAL_SEARCH=0: every luminal call in it takes the megakernel by rule (the
    setting is read per call: outside, the same module measures and may take the general path)."""
    previous = os.environ.get("LUMINAL_SEARCH")
    os.environ["LUMINAL_SEARCH"] = "0"
    luminal.settings.reload()
    try:
        return fn()
    finally:
        if previous is None:
            del os.environ["LUMINAL_SEARCH"]
        else:
            os.environ["LUMINAL_SEARCH"] = previous
        luminal.settings.reload()


MEGAKERNEL = "luminal megakernel (LUMINAL_SEARCH=0)"


def gpu_comparison(batch: int, calls: int) -> dict[str, Any]:
    """The mini DLRM's GPU time: luminal's megakernel, its general path, what luminal.compile chose
    on its own, and the hand-written kernel, on one model and one batch."""
    model = DLRM(MINI).cuda().eval()
    inputs = make_inputs(MINI, batch, device="cuda")
    expected = model(*inputs)
    megakernel = luminal.compile(model, inputs, options={"strict": True})
    general = luminal.compile(model, inputs, options={"strict": True, "megakernel": False})
    chosen = luminal.compile(model, inputs, options={"strict": True})
    reference = MiniDLRMReference(model)
    reference.validate(*inputs)
    runs: dict[str, Callable[[], Any]] = {
        MEGAKERNEL: lambda: megakernel(*inputs),
        "luminal general path": lambda: general(*inputs),
        "luminal.compile (its own choice)": lambda: chosen(*inputs),
        REFERENCE: lambda: reference(*inputs),
    }
    report: dict[str, Any] = {"batch": batch, "calls": calls, "rows": {}}
    for name, fn in runs.items():

        def measure_row(name: str = name, fn: Callable[[], Any] = fn) -> dict[str, Any]:
            torch.testing.assert_close(fn(), expected, rtol=1e-5, atol=1e-5, msg=name)
            kernels = kernel_us_per_call(fn, calls)
            return {"kernel_us": sum(kernels.values()), "kernels": kernels, "span_us": gpu_span_us_per_call(fn, calls)}

        report["rows"][name] = with_rules_only(measure_row) if name == MEGAKERNEL else measure_row()
    assert megakernel.stats()["cuda"]["megakernel"], "LUMINAL_SEARCH=0 did not run the megakernel"
    rows = report["rows"]
    # The megakernel itself: its kernel records without the error-record export every replay ends with.
    mega = sum(us for kernel, us in rows[MEGAKERNEL]["kernels"].items() if kernel != "lm_export_errors")
    report["megakernel_kernel_us"] = mega
    report["megakernel_over_reference"] = mega / rows[REFERENCE]["kernel_us"]
    report["megakernel_span_over_reference_span"] = rows[MEGAKERNEL]["span_us"] / rows[REFERENCE]["span_us"]
    report["luminal_choice"] = chosen.stats()["cuda"]["choices"]
    return report


def print_gpu_comparison(report: dict[str, Any]) -> None:
    print(f"\nGPU time, mini DLRM, batch {report['batch']} (us per call over {report['calls']} calls)")
    print(f"{'variant':52s} {'kernels':>9s} {'span':>9s}")
    for name, row in report["rows"].items():
        print(f"{name:52s} {row['kernel_us']:9.2f} {row['span_us']:9.2f}")
    print(
        f"megakernel / hand kernel (kernel time): {report['megakernel_over_reference']:.2f}x "
        f"({report['megakernel_kernel_us']:.2f} us vs {report['rows'][REFERENCE]['kernel_us']:.2f} us); "
        f"span: {report['megakernel_span_over_reference_span']:.2f}x"
    )
    print(f"luminal.compile's choice: {report['luminal_choice']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model", default="dlrm", choices=["dlrm", "linear"], help="the mini DLRM, or one Linear(4, 4)"
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    parser.add_argument("--batch", type=int, default=None, help="default: 2048 on CUDA, 4 on the CPU")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--gpu-calls", type=int, default=500, help="calls per GPU-time measurement")
    parser.add_argument("--json", type=Path, default=None, help="write the per-call and GPU-time results here")
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
    report: dict[str, Any] = {"model": args.model, "device": args.device, "batch": batch, "per_call": results}
    if REFERENCE in results:
        report["luminal_compile_over_reference"] = aot / results[REFERENCE]["median_us"]
        over = report["luminal_compile_over_reference"]
        print(f"luminal.compile / hand-written kernel from Python (median): {over:.2f}x")
        with torch.no_grad():
            report["gpu"] = gpu_comparison(batch, args.gpu_calls)
        print_gpu_comparison(report["gpu"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
