"""One decode step of an LLM through luminal.compile, timed under several settings in one process.

    python benchmarks/decode_probe.py [--model llama_1b] [--batch 1] [--prompt 128] [--steps 48]
                                      [--rounds 3] [--variants base LUMINAL_ATTENTION_SPLIT=0 ...]
                                      [--json out.json] [--tiny]

What llm_bench.py's TPOT row cannot tell apart: the GPU's time per step and the host's work before
the graph launch. Per variant (a set of environment assignments, "base" for none; the settings are
read again before each compile) it compiles the decode step of llm_bench.py afresh and measures

- sync: CUDA events around each call, one call at a time (what llm_bench.py's TPOT reports: the
  host's work before the launch is inside it);
- pipelined: `--steps` calls queued behind a sleeping kernel, so that the host is off the critical
  path: the GPU's own time per step;
- host: the fast call's parts (stats()["host_us"]), medians over the sync calls, beside the whole
  call's wall time on the host (Python included) and the kernel-parameter updates per call;

and checks the first step's logits against eager's (max |diff| / max |eager|). Variants take turns
over `--rounds` rounds (A B A B ...), so that a drifting clock or a warming machine treats them
alike; each reports the median of its rounds. The steps reuse one filled cache at positions
prompt, prompt + 1, ...: every variant writes the same keys and values at the same places.

--trace VARIANT [...] records those variants' pipelined steps with torch.profiler and lists each
kernel's time per step (by name) and the GPU's idle time between kernels: with LUMINAL_PDL=0 the
kernels do not overlap, so the times add up; with PDL a kernel's time includes its wait.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llm_bench  # noqa: E402

import luminal  # noqa: E402
from luminal import settings  # noqa: E402


def assignments(variant: str) -> dict[str, str]:
    if variant == "base":
        return {}
    pairs = [part.split("=", 1) for part in variant.split(",")]
    if any(len(pair) != 2 for pair in pairs):
        raise SystemExit(f"variant '{variant}': expected base or NAME=VALUE[,NAME=VALUE...]")
    return {name: value for name, value in pairs}


class Steps:
    """The decode calls, at positions prompt, prompt + 1, ..., and the cache state they start from.
    A step advances the cache's step counters in place (where the cache has them), so every pass
    over the calls starts from the state after the prompt (reset), or its writes would run past
    the cache's end."""

    def __init__(self, calls: list[tuple[torch.Tensor, ...]], state: list[torch.Tensor]) -> None:
        self.calls = calls
        self.state = state
        self.start = [tensor.clone() for tensor in state]

    def reset(self) -> None:
        for tensor, start in zip(self.state, self.start, strict=True):
            tensor.copy_(start)


class Variant:
    """A compiled decode step under one set of settings, with its measurements."""

    def __init__(self, name: str, step: torch.nn.Module, steps: Steps) -> None:
        self.name = name
        changes = assignments(name)
        saved = {key: os.environ.get(key) for key in changes}
        os.environ.update(changes)
        settings.reload()
        try:
            steps.reset()
            self.module = luminal.compile(step, steps.calls[0])
            self.first = self.module(*steps.calls[0]).float()  # the CUDA plan is built (and tuned) here
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            settings.reload()
        self.sync: list[float] = []
        self.pipelined: list[float] = []
        self.host: dict[str, list[float]] = {}
        self.wall_us: list[float] = []

    def stats(self) -> dict[str, Any]:
        return self.module.stats()


def sync_ms(variant: Variant, steps: Steps, count: int | None = None) -> float:
    """Median ms per call, one call at a time, as llm_bench.py's TPOT times them (its Clock: CUDA
    events around each call, on the CPU the wall clock); each call's host wall time is kept."""
    steps.reset()
    clock = llm_bench.Clock("cuda" if torch.cuda.is_available() else "cpu")
    times = []
    for args in steps.calls[:count]:

        def call(args: tuple[torch.Tensor, ...] = args) -> None:
            entered = time.perf_counter()
            variant.module(*args)
            variant.wall_us.append((time.perf_counter() - entered) * 1e6)

        times.append(clock.time_ms(call))
        for part, value in variant.stats().get("host_us", {}).items():
            variant.host.setdefault(part, []).append(float(value))
    return statistics.median(times)


def pipelined_ms(variant: Variant, steps: Steps, count: int | None = None) -> float:
    """Ms per call with the calls queued behind a sleeping kernel: the GPU's time per step."""
    steps.reset()
    calls = steps.calls[:count]
    torch.cuda.synchronize()
    torch.cuda._sleep(int(4e6) * len(calls) // 16)  # ~125 us per call on a ~2 GHz clock: the host keeps ahead
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for args in calls:
        variant.module(*args)
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / len(calls)


def kernel_trace(variant: Variant, steps: Steps) -> dict[str, Any]:
    """Each kernel's GPU time per step (by name, longest first) and the idle time between kernels."""
    from torch.profiler import ProfilerActivity, profile

    pipelined_ms(variant, steps, 4)  # warm
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        pipelined_ms(variant, steps)
    kernels = sorted(
        (event for event in prof.events() if event.device_type == torch.autograd.DeviceType.CUDA),
        key=lambda event: event.time_range.start,
    )
    kernels = [event for event in kernels if "sleep" not in event.name]
    per_name: dict[str, list[float]] = defaultdict(list)
    idle = 0.0
    for before, event in zip([None, *kernels[:-1]], kernels, strict=True):
        per_name[event.name].append(event.time_range.elapsed_us())
        if before is not None:
            idle += max(0.0, event.time_range.start - before.time_range.end)
    count = len(steps.calls)
    span = (kernels[-1].time_range.end - kernels[0].time_range.start) if kernels else 0.0
    rows = sorted(
        (
            {"kernel": name[:120], "per_step": len(times) / count, "us_per_step": sum(times) / count}
            for name, times in per_name.items()
        ),
        key=lambda row: -row["us_per_step"],
    )
    # One step's kernels in order (the middle step's): start and end from the step's first start,
    # and how far each moved the latest end (with PDL a kernel starts before the one ahead ends).
    per_step = len(kernels) // count
    middle = kernels[per_step * (count // 2) : per_step * (count // 2 + 1)]
    origin = middle[0].time_range.start if middle else 0.0
    sequence = []
    latest = 0.0
    for event in middle:
        start, end = event.time_range.start - origin, event.time_range.end - origin
        sequence.append(
            {"kernel": event.name[:80], "start_us": start, "end_us": end, "adds_us": max(0.0, end - latest)}
        )
        latest = max(latest, end)
    return {
        "variant": variant.name,
        "sequence": sequence,
        "kernels_per_step": len(kernels) / count,
        "span_us_per_step": span / count,
        "idle_us_per_step": idle / count,
        "kernels": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama_1b", choices=sorted(llm_bench.MODELS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=["base"])
    parser.add_argument("--trace", nargs="*", default=[], help="variants (among --variants) to trace")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model (a smoke test of the script)")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    if not cuda and not args.tiny:
        raise SystemExit("decode_probe.py times CUDA graphs: without a GPU only --tiny runs (a smoke test)")
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    for name in args.variants:
        assignments(name)  # refuse a malformed variant before the model is built
    if not set(args.trace) <= set(args.variants):
        raise SystemExit(f"--trace {args.trace}: trace only variants named in --variants")

    model = llm_bench.build_model(args.model, args.tiny, device, dtype)
    keep = llm_bench.last_logits_only(model)
    vocab = model.config.vocab_size
    torch.manual_seed(1)
    prompt_ids = torch.randint(3, vocab, (args.batch, args.prompt), device=device)
    tokens = [torch.randint(3, vocab, (args.batch, 1), device=device) for _ in range(args.steps)]
    positions = [torch.tensor([args.prompt + t], device=device) for t in range(args.steps)]
    cache = llm_bench.new_cache(model, args.batch, args.prompt + args.steps)
    with torch.no_grad():
        model(input_ids=prompt_ids, past_key_values=cache, use_cache=True, **keep)
        state = [slot.get() for slot in llm_bench.cache_slots(cache)]
        steps = Steps([(tokens[t], positions[t], *state) for t in range(args.steps)], state)
        expected = llm_bench.decode(model, tokens[0], positions[0], cache, keep).float()
        step = llm_bench._DecodeStep(model, cache, keep)
        variants = [Variant(name, step, steps) for name in args.variants]
        for variant in variants:
            sync_ms(variant, steps, 8)  # warm-up: its host times are not kept
            variant.host.clear()
            variant.wall_us.clear()
        for _ in range(args.rounds):
            for variant in variants:
                variant.sync.append(sync_ms(variant, steps))
                if cuda:
                    variant.pipelined.append(pipelined_ms(variant, steps))
        traces = [kernel_trace(variant, steps) for variant in variants if cuda and variant.name in args.trace]

    rows = []
    for variant in variants:
        engine = variant.stats().get("cuda", {})
        calls_made = engine.get("calls") or 1
        row = {
            "variant": variant.name,
            "sync_ms": statistics.median(variant.sync),
            "pipelined_ms": statistics.median(variant.pipelined) if variant.pipelined else None,
            "sync_rounds": variant.sync,
            "pipelined_rounds": variant.pipelined,
            "host_us": {part: statistics.median(values) for part, values in variant.host.items()},
            "host_wall_us": statistics.median(variant.wall_us),
            "pointer_updates_per_call": (engine.get("pointer_updates") or 0) / calls_made,
            "graph_nodes": engine.get("graph_nodes"),
            "launches_per_call": engine.get("launches_per_call"),
            "max_error_relative": llm_bench.relative_error(variant.first, expected),
            "choices": engine.get("choices", []),
        }
        rows.append(row)
        host = " ".join(f"{part} {value:.1f}" for part, value in row["host_us"].items())
        print(
            f"{variant.name:40s} sync {row['sync_ms']:.3f} ms  pipelined {row['pipelined_ms'] or 0:.3f} ms  "
            f"nodes {row['graph_nodes']}  error {row['max_error_relative']:.2e}  wall {row['host_wall_us']:.1f} us  "
            f"pointer updates {row['pointer_updates_per_call']:.1f}  host us: {host}",
            flush=True,
        )
    for trace in traces:
        print(
            f"trace {trace['variant']}: {trace['kernels_per_step']:.0f} kernels, "
            f"span {trace['span_us_per_step']:.1f} us, idle {trace['idle_us_per_step']:.1f} us per step"
        )
        for row in trace["kernels"][:25]:
            print(f"  {row['us_per_step']:8.1f} us  x{row['per_step']:5.1f}  {row['kernel']}")
    if args.json:
        meta = {
            "device": torch.cuda.get_device_name() if cuda else "cpu",
            "torch": torch.__version__,
            "model": args.model,
            "batch": args.batch,
            "prompt": args.prompt,
            "steps": args.steps,
            "rounds": args.rounds,
        }
        args.json.write_text(json.dumps({"meta": meta, "rows": rows, "traces": traces}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
