"""Where the per-call time of a torch.compile'd DLRM goes before any backend code runs: Dynamo's
own cost under the settings that change it, with a backend that launches one tiny kernel and with
luminal. Diagnostic, prints a table.

    python benchmarks/dynamo_overhead.py [--config mini] [--batch 2048] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import cProfile
import pstats
from collections.abc import Callable, Iterator
from typing import Any

import torch
from dlrm_bench import CONFIGS, Captured, compile_floor, make_workload, measure

VARIANTS = ("default", "no-inline-modules", "skip-guards", "module.compile")


@contextlib.contextmanager
def compiling(name: str) -> Iterator[None]:
    if name == "no-inline-modules":
        with torch._dynamo.config.patch(inline_inbuilt_nn_modules=False):
            yield
    else:
        yield


@contextlib.contextmanager
def running(name: str) -> Iterator[None]:
    if name == "skip-guards":  # only after the first call compiled: the stance forbids compiling
        torch.compiler.set_stance("default", skip_guard_eval_unsafe=True)
        try:
            yield
        finally:
            torch.compiler.set_stance("default")
    else:
        yield


def build(kind: str, name: str, model: torch.nn.Module, inputs: tuple[Any, ...]) -> tuple[Callable[[], Any], Any]:
    captured = Captured()
    if kind == "compile-floor":
        return compile_floor(model, inputs), captured
    if name == "module.compile":  # in place: the module's own __call__ runs the compiled _call_impl
        own = copy.deepcopy(model)
        own.compile(backend=captured)
        return lambda: own(*inputs), captured
    compiled = torch.compile(model, backend=captured)
    return lambda: compiled(*inputs), captured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="mini", choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--profile", action="store_true", help="cProfile 2000 calls of each default row")
    args = parser.parse_args()
    torch.manual_seed(0)
    model, inputs = make_workload(CONFIGS[args.config], args.batch)
    tiny = torch.zeros(1, device="cuda")
    with torch.no_grad():
        floor = measure(lambda: tiny.add_(1.0), 20, args.iterations)
        print(f"floor (one launch from Python): median {floor['median_us']:.1f} us, host {floor['host_us']:.1f} us")
        for kind in ("compile-floor", "luminal"):
            for name in VARIANTS:
                if kind == "compile-floor" and name == "module.compile":
                    continue
                torch._dynamo.reset()
                with compiling(name):
                    fn, captured = build(kind, name, model, inputs)
                    fn()
                with running(name):
                    timing = measure(fn, 20, args.iterations)
                    print(
                        f"{kind:14s} {name:18s} median {timing['median_us']:6.1f} us  "
                        f"p90 {timing['p90_us']:6.1f} us  host {timing['host_us']:6.1f} us",
                        flush=True,
                    )
                    if captured.compiled is not None and name == "default":
                        direct = measure(lambda c=captured: c.compiled(*c.arguments), 20, args.iterations)
                        print(
                            f"{'':14s} {'direct':18s} median {direct['median_us']:6.1f} us  "
                            f"p90 {direct['p90_us']:6.1f} us  host {direct['host_us']:6.1f} us"
                        )
                    if args.profile and name == "default":
                        profiler = cProfile.Profile()
                        profiler.enable()
                        for _ in range(2000):
                            fn()
                        profiler.disable()
                        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
