#!/usr/bin/env python
"""A broad sweep of tiny random-initialised real models through luminal, against eager.

Every model is built offline (``from_config`` / ``pretrained=False``, small hidden sizes, two
layers, images of 32-64 pixels), run eagerly, then through ``torch.compile(fn, backend="luminal")``
under ``torch.no_grad()`` with warnings recorded. Each model runs in a subprocess of its own (a
per-model timeout; a crash in one model does not stop the sweep). Outcomes:

- ``ok``: no fallback, outputs within tolerance of eager;
- ``fallback``: a ``LuminalFallbackWarning`` named ops that ran in eager (outputs still compared);
- ``mismatch``: outputs differ from eager beyond tolerance (max abs diff and the output's scale)
  and luminal is further than eager from a float64 rerun (within 4x of eager's own error: ``ok``,
  with a note);
- ``unstable``: integer outputs differ, but eager float32 itself differs from float64 as much
  (data-dependent selection on near ties, e.g. NMS with random weights);
- ``error``: an exception in the compiled run (type, first line, the ATen op it names);
- ``timeout`` / ``crash``: the subprocess ran past ``--timeout`` or died;
- ``skip``: the model could not be built or run eagerly offline (the reason is recorded).

    python tools/model_sweep.py                                   # CPU, float32, every model
    python tools/model_sweep.py --device cuda --dtype bfloat16 --json out.json
    python tools/model_sweep.py --only 'hf_bloom|tv_' --strict    # strict: fallbacks raise
    python tools/model_sweep.py --list

Like the tests, the sweep sets ``LUMINAL_CHECK_CUDA_CODEGEN=sm_90`` (generated CUDA is compiled
with NVRTC even on CPU) and ``LUMINAL_POISON_OUTPUTS=1``, and disables luminal's on-disk cache
(``LUMINAL_CACHE_DIR=``) so that compile times are cold.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_models import REPO, VOCAB, Entry, registry

RESULT_MARKER = "SWEEP_RESULT "

# (rtol, atol) per dtype, as in tests/helpers.py; scaled per model (sweep_models.TOLERANCE_SCALE).
TOLERANCES = {
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-2),
}


@dataclass
class Result:
    name: str
    library: str
    status: str = "ok"
    phase: str = ""  # where an error happened: build, eager, compile
    error_type: str = ""
    error: str = ""
    op: str = ""
    fallback: str = ""
    max_abs_diff: float | None = None
    scale: float | None = None
    relative: float | None = None
    eager_s: float | None = None
    compile_s: float | None = None
    run_s: float | None = None
    graphs: int = 0
    graph_breaks: int = 0
    note: str = ""
    dynamic: str = ""  # --dynamic: outcome of two more calls with other sizes (Dynamo's dynamic recompile)
    dynamic_detail: str = ""
    luminal: str = ""  # the package that ran (an editable install may shadow PYTHONPATH)
    details: list[str] = field(default_factory=list)


# ================================================================================================
# Running one model (in the child process)
# ================================================================================================
_ATEN_OP = re.compile(r"(?:torch\.ops\.)?aten\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?")


def _first_op(text: str) -> str:
    found = _ATEN_OP.search(text)
    return found.group(0).removeprefix("torch.ops.") if found else ""


def _flat_tensors(value: Any) -> list[Any]:
    import torch.utils._pytree as pytree

    return [v for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def compare(actual: Any, expected: Any, dtype_name: str, scale_factor: float, result: Result) -> None:
    """Fills max_abs_diff / scale / relative; status 'mismatch' when any output is out of tolerance."""
    got, want = _flat_tensors(actual), _flat_tensors(expected)
    if len(got) != len(want):
        result.status = "mismatch"
        result.details.append(f"{len(got)} output tensors vs eager's {len(want)}")
        return
    rtol, atol = TOLERANCES.get(dtype_name, TOLERANCES["float32"])
    worst_diff, worst_scale, failed = 0.0, 0.0, []
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            failed.append(f"output {k}: {a.dtype}{tuple(a.shape)} vs eager {b.dtype}{tuple(b.shape)}")
            continue
        if not b.is_floating_point():
            if not torch.equal(a, b):
                failed.append(f"output {k} ({b.dtype}{tuple(b.shape)}): integer values differ")
            continue
        if b.numel() == 0:
            continue
        a64, b64 = a.double(), b.double()
        finite = torch.isfinite(b64)
        if not torch.equal(torch.isfinite(a64), finite):
            failed.append(f"output {k}: non-finite values differ ({int((~torch.isfinite(a64)).sum())} non-finite)")
        diff = (a64 - b64).abs().where(finite, torch.zeros_like(a64))
        scale = float(b64.abs().where(finite, torch.zeros_like(b64)).max())
        worst_diff, worst_scale = max(worst_diff, float(diff.max())), max(worst_scale, scale)
        bound = atol * scale_factor + rtol * scale_factor * b64.abs()
        if bool((diff > bound).any()):
            failed.append(f"output {k} {tuple(b.shape)}: max|diff| {float(diff.max()):.3g}, max|eager| {scale:.3g}")
    result.max_abs_diff, result.scale = worst_diff, worst_scale
    result.relative = worst_diff / worst_scale if worst_scale > 0 else worst_diff
    if failed:
        result.status = "mismatch"
        result.details.extend(failed)


def _max_abs(t: torch.Tensor) -> float:
    return float(t.abs().max()) if t.numel() else 0.0


def judge_against_reference(
    model: Any, forward: Callable[..., Any], inputs: tuple[Any, ...], actual: Any, expected: Any, result: Result
) -> None:
    """Out of tolerance: is luminal further from a higher-precision run than eager is? The model is
    rerun in float64 (float32 for half types); when luminal's error is within 4x eager's own error
    (plus a little), the difference is rounding noise of a long computation and the status is
    not a mismatch (a note records both errors)."""
    got, want = _flat_tensors(actual), _flat_tensors(expected)
    floating = [k for k, t in enumerate(want) if t.is_floating_point()]
    if not floating or len(got) != len(want):
        return
    wide = torch.float64 if want[floating[0]].dtype == torch.float32 else torch.float32
    # The model's own dtype (Entry.build converts it whole), not its outputs' (some upcast logits).
    own = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    try:
        model.to(wide)
        wide_inputs = tuple(t.to(wide) if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs)
        reference = _flat_tensors(forward(*wide_inputs))
    except Exception as error:  # noqa: BLE001  (the judgement is optional)
        result.details.append(f"no {wide} reference: {type(error).__name__}: {str(error)[:200]}")
        return
    finally:
        if own is not None:
            model.to(own)  # exact: later probes (--dynamic) run the model in its own dtype again
    if len(reference) != len(want) or any(reference[k].shape != want[k].shape for k in floating):
        result.details.append(f"the {wide} rerun gives outputs of other shapes: eager itself is unstable here")
        return
    ours = max(_max_abs(got[k].to(wide) - reference[k]) for k in floating)
    theirs = max(_max_abs(want[k].to(wide) - reference[k]) for k in floating)
    scale = max(_max_abs(reference[k]) for k in floating)
    result.details.append(f"vs {wide}: luminal max err {ours:.3g}, eager max err {theirs:.3g}, scale {scale:.3g}")
    integers_agree = all(torch.equal(got[k], want[k]) for k in range(len(want)) if k not in floating)
    if not integers_agree and theirs >= ours / 4:
        # Data-dependent selection on near ties (NMS of random-weight detectors): eager's own
        # rounding changes what is selected as much as luminal's does.
        result.status = "unstable"
        result.note = (
            f"integer outputs differ, but eager float32 is as far from {wide} (err {theirs:.2g}) as "
            f"luminal (err {ours:.2g}): not evidence of a luminal bug"
        )
        return
    if integers_agree and ours <= 4 * theirs + 1e-6 * scale:
        result.status = "ok"
        result.note = (
            f"beyond tolerance vs eager, but as close to {wide} as eager is "
            f"(luminal err {ours:.2g}, eager err {theirs:.2g}, scale {scale:.2g})"
        )


def _time(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _record_error(result: Result, phase: str, error: BaseException) -> None:
    text = str(error)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    # Dynamo wraps backend errors: "backend='luminal' raised:" then the real message.
    meaningful = [line for line in lines if not line.startswith("backend=")]
    result.phase = phase
    result.error_type = type(error).__name__
    result.error = (meaningful or lines or [""])[0][:400]
    result.op = _first_op(text) or _first_op(traceback.format_exc())
    result.details.append(text[:2000])
    result.details.append(traceback.format_exc()[-2000:])


def _compile(fn: Callable[..., Any], strict: bool) -> Callable[..., Any]:
    return torch.compile(fn, backend="luminal", options={"strict": True} if strict else None)


def _fallback_messages(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if type(w.message).__name__ == "LuminalFallbackWarning"]


def run_forward(entry: Entry, device: str, dtype: Any, dtype_name: str, strict: bool, result: Result) -> None:
    with torch.no_grad():
        try:
            model, forward, inputs = entry.build(device, dtype)
        except Exception as error:  # noqa: BLE001  (a model that cannot be built offline is skipped)
            _record_error(result, "build", error)
            result.status = "skip"
            return
        try:
            expected, result.eager_s = _time(lambda: forward(*inputs))
        except Exception as error:  # noqa: BLE001
            _record_error(result, "eager", error)
            result.status = "skip"
            return
        if os.environ.get("SWEEP_EAGER_ONLY"):
            return
        compiled = _compile(forward, strict)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                actual, result.compile_s = _time(lambda: compiled(*inputs))
                actual, result.run_s = _time(lambda: compiled(*inputs))  # reuses the compiled graphs
            except Exception as error:  # noqa: BLE001  (the outcome being measured)
                _record_error(result, "compile", error)
                result.status = "error"
                result.fallback = " | ".join(_fallback_messages(caught))
                return
        result.fallback = " | ".join(_fallback_messages(caught))
        compare(actual, expected, dtype_name, entry.tolerance_scale, result)
        if result.status == "mismatch":
            judge_against_reference(model, forward, inputs, actual, expected, result)
        if result.status == "ok" and result.fallback:
            result.status = "fallback"
        if os.environ.get("SWEEP_DYNAMIC"):
            run_other_sizes(model, forward, compiled, inputs, dtype_name, entry.tolerance_scale, result)
        degenerate = [
            t for t in _flat_tensors(expected) if t.is_floating_point() and t.numel() > 1 and t.float().std() < 1e-3
        ]
        if degenerate:
            result.note = "degenerate eager output (std < 1e-3): comparison is weak"


def vary_inputs(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """The same kind of inputs with other sizes: one more batch row (a copy of row 0 for integer
    inputs such as token ids and masks, fresh random values for floating ones), and integer
    matrices (token ids, masks) three positions longer (their last three columns repeated)."""
    varied = []
    for t in inputs:
        if not isinstance(t, torch.Tensor) or t.dim() == 0:
            varied.append(t)
            continue
        extra = torch.randn_like(t[:1]) if t.is_floating_point() else t[:1]
        t = torch.cat([t, extra])
        if not t.is_floating_point() and t.dim() == 2:
            t = torch.cat([t, t[:, -3:]], dim=1)
        varied.append(t)
    return tuple(varied)


def run_other_sizes(
    model: Any,
    forward: Callable[..., Any],
    compiled: Callable[..., Any],
    inputs: tuple[Any, ...],
    dtype_name: str,
    tolerance_scale: float,
    result: Result,
) -> None:
    """Two more calls with other sizes (vary_inputs, then again): the first makes Dynamo recompile
    with dynamic dimensions, the second reuses that graph at sizes it was not traced with (another
    remainder for a padding to a multiple, say). The first call that is not ok is recorded."""
    varied = inputs
    for call in ("second call", "third call"):
        varied = vary_inputs(varied)
        status, detail = _other_sizes_outcome(model, forward, compiled, varied, dtype_name, tolerance_scale, result)
        result.dynamic, result.dynamic_detail = status, detail
        if status != "ok":
            if status != "n/a":
                result.dynamic_detail = f"{call}: {detail}"[:300]
            return


def _other_sizes_outcome(
    model: Any,
    forward: Callable[..., Any],
    compiled: Callable[..., Any],
    varied: tuple[Any, ...],
    dtype_name: str,
    tolerance_scale: float,
    result: Result,
) -> tuple[str, str]:
    try:
        with torch.no_grad():
            expected = forward(*varied)
    except Exception as error:  # noqa: BLE001  (a model that only takes its configured sizes)
        return "n/a", f"eager: {type(error).__name__}: {str(error)[:200]}"
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            actual = compiled(*varied)
        except Exception as error:  # noqa: BLE001
            probe = Result(result.name, result.library)
            _record_error(probe, "dynamic", error)
            result.details += probe.details
            return "error", f"{probe.error_type}: {probe.error}"
    probe = Result(result.name, result.library)
    compare(actual, expected, dtype_name, tolerance_scale, probe)
    if probe.status == "mismatch":
        judge_against_reference(model, forward, varied, actual, expected, probe)
        result.details += probe.details
    fallback = " | ".join(_fallback_messages(caught))
    status = "fallback" if probe.status == "ok" and fallback else probe.status
    detail = "; ".join(([probe.note] if probe.note else []) + probe.details)[:300] or fallback[:300]
    if probe.relative is not None and probe.status == "mismatch":
        detail += f" (max abs diff {probe.max_abs_diff:.3g}, scale {probe.scale:.3g})"
    return status, detail


def run_decode(entry: Entry, device: str, dtype: Any, dtype_name: str, strict: bool, result: Result) -> None:
    """Two StaticCache decode steps: logits and caches compared with an eager copy of the cache."""
    try:
        model, step, (cache,) = entry.build(device, dtype)
    except Exception as error:  # noqa: BLE001
        _record_error(result, "build", error)
        result.status = "skip"
        return
    if os.environ.get("SWEEP_EAGER_ONLY"):
        return
    eager_cache = copy.deepcopy(cache)
    compiled = _compile(step, strict)
    compile_times: list[float] = []
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual_all, expected_all = [], []
        for t in range(2):
            token = torch.randint(3, VOCAB, (2, 1), device=device)
            position = torch.tensor([5 + t], device=device)
            expected, result.eager_s = _time(lambda t=token, p=position: step(t, p, eager_cache))
            try:
                actual, seconds = _time(lambda t=token, p=position: compiled(t, p, cache))
            except Exception as error:  # noqa: BLE001
                _record_error(result, "compile", error)
                result.status = "error"
                result.fallback = " | ".join(_fallback_messages(caught))
                return
            compile_times.append(seconds)
            actual_all.append(actual)
            expected_all.append(expected)
        for layer_mine, layer_eager in zip(cache.layers, eager_cache.layers, strict=True):
            actual_all += [layer_mine.keys, layer_mine.values]
            expected_all += [layer_eager.keys, layer_eager.values]
    result.compile_s, result.run_s = compile_times[0], compile_times[-1]
    result.fallback = " | ".join(_fallback_messages(caught))
    compare(actual_all, expected_all, dtype_name, entry.tolerance_scale, result)
    if result.status == "ok" and result.fallback:
        result.status = "fallback"


def run_one(entry: Entry, device: str, dtype_name: str, strict: bool) -> Result:
    result = Result(entry.name, entry.library, note=entry.note)
    if importlib.util.find_spec(entry.library) is None:
        result.status, result.error = "skip", f"{entry.library} is not installed"
        return result
    import luminal

    dtype = getattr(torch, dtype_name)
    torch.backends.cudnn.allow_tf32 = False  # eager's cuDNN convolutions: full float32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch._dynamo.reset()
    luminal.reset_compile_count()
    from torch._dynamo.utils import counters

    counters.clear()
    runner = run_decode if entry.decode else run_forward
    runner(entry, device, dtype, dtype_name, strict, result)
    result.luminal = os.path.dirname(luminal.__file__)
    result.graphs = luminal.compile_count()
    result.graph_breaks = sum(counters["graph_break"].values())
    return result


# ================================================================================================
# Driver
# ================================================================================================
def _child_environment(threads: int, luminal_path: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("LUMINAL_CHECK_CUDA_CODEGEN", "sm_90")
    env.setdefault("LUMINAL_POISON_OUTPUTS", "1")
    env.setdefault("LUMINAL_CACHE_DIR", "")
    env.setdefault("OMP_NUM_THREADS", str(threads))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if luminal_path:
        env["PYTHONPATH"] = luminal_path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _default_luminal_path() -> str:
    """The repository's python/ folder when luminal was built in the tree (cmake, then the _C
    library copied next to the sources); otherwise the installed package is used."""
    python_dir = os.path.join(REPO, "python")
    built_here = any(name.startswith("_C") for name in os.listdir(os.path.join(python_dir, "luminal")))
    return python_dir if built_here else ""


def run_in_subprocess(name: str, args: argparse.Namespace) -> Result:
    command = [sys.executable, os.path.abspath(__file__), "--child", name, "--device", args.device]
    command += ["--dtype", args.dtype, "--threads", str(args.threads)] + (["--strict"] if args.strict else [])
    library = next((e.library for e in registry() if e.name == name), "")
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=args.timeout,
            env=_child_environment(args.threads, args.luminal_path),
        )
    except subprocess.TimeoutExpired:
        return Result(name, library, status="timeout", error=f"ran past {args.timeout} s")
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            fields = json.loads(line[len(RESULT_MARKER) :])
            return Result(**fields)
    tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
    return Result(
        name,
        library,
        status="crash",
        error=f"exit code {done.returncode} after {time.perf_counter() - started:.0f} s",
        details=tail,
    )


def _format_number(value: float | None, digits: str = ".2g") -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, digits)


def summary_table(results: list[Result]) -> str:
    dynamic = any(r.dynamic for r in results)
    lines = [
        "| model | status | max abs diff / scale | compile s | run s | what |" + (" other sizes |" if dynamic else ""),
        "| --- | --- | --- | --- | --- | --- |" + (" --- |" if dynamic else ""),
    ]
    for r in results:
        what = r.error if r.status in ("error", "skip", "timeout", "crash") else ""
        if r.op:
            what = f"`{r.op}`: {what}"
        if r.fallback:
            what = (what + " " if what else "") + r.fallback.replace(
                "luminal: ops without luminal support run in eager: ", "eager: "
            )
        if r.status == "mismatch":
            what = "; ".join(d for d in r.details if "max|diff|" in d or "differ" in d or "vs" in d)[:300] + (
                " " + what if what else ""
            )
        if r.note:
            what = (what + " " if what else "") + f"({r.note})"
        diff = f"{_format_number(r.max_abs_diff)} / {_format_number(r.scale)}" if r.max_abs_diff is not None else ""
        what = what.replace("|", "\\|").replace("\n", " ")
        row = (
            f"| {r.name} | {r.status} | {diff} | {_format_number(r.compile_s, '.1f')} | "
            f"{_format_number(r.run_s, '.2f')} | {what} |"
        )
        if dynamic:
            detail = r.dynamic_detail.replace("|", "\\|").replace("\n", " ")
            row += f" {r.dynamic}{': ' + detail if detail and r.dynamic != 'ok' else ''} |"
        lines.append(row)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    lines.append("")
    lines.append(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=sorted(TOLERANCES))
    parser.add_argument("--only", default="", help="regular expression on model names")
    parser.add_argument("--skip", default="", help="regular expression on model names to leave out")
    parser.add_argument("--json", default="", help="write every result to this file")
    parser.add_argument("--markdown", default="", help="write the summary table to this file")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per model")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per model")
    parser.add_argument("--strict", action="store_true", help="options={'strict': True}: fallbacks raise")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument("--eager-only", action="store_true", help="only build and run eagerly (checks the registry)")
    parser.add_argument(
        "--dynamic",
        action="store_true",
        help="also call each compiled model twice more with other sizes (one more batch row, longer "
        "token sequences, each time): Dynamo recompiles with dynamic dimensions, then reuses that graph",
    )
    parser.add_argument(
        "--luminal-path",
        default=None,
        help="a folder holding the luminal package to sweep, put first on PYTHONPATH (default: this "
        "repository's python/ when built in the tree, else the installed luminal). A copy keeps a long "
        "sweep independent of rebuilds; an editable install may still shadow it "
        "(SKBUILD_EDITABLE_SKIP disables scikit-build's hook)",
    )
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        import torch

        torch.set_num_threads(args.threads)
        entry = next(e for e in registry() if e.name == args.child)
        result = run_one(entry, args.device, args.dtype, args.strict)
        print(RESULT_MARKER + json.dumps(asdict(result)), flush=True)
        return 0

    if args.luminal_path is None:
        args.luminal_path = _default_luminal_path()
    if args.eager_only:
        os.environ["SWEEP_EAGER_ONLY"] = "1"
    if args.dynamic:
        os.environ["SWEEP_DYNAMIC"] = "1"
    entries = [
        e for e in registry() if re.search(args.only, e.name) and not (args.skip and re.search(args.skip, e.name))
    ]
    if args.list:
        print("\n".join(f"{e.name} ({e.library})" for e in entries))
        return 0
    results: list[Result] = []
    for entry in entries:
        result = run_in_subprocess(entry.name, args)
        results.append(result)
        brief = result.error or result.fallback or "; ".join(result.details[:1]) if result.status != "ok" else ""
        print(
            f"{entry.name:40s} {result.status:9s} compile {_format_number(result.compile_s, '.1f'):>6s}s  "
            f"rel {_format_number(result.relative)}  "
            + (f"[other sizes: {result.dynamic} {result.dynamic_detail[:100]}] " if result.dynamic else "")
            + brief[:200],
            flush=True,
        )
        if args.json:  # written after every model: a long sweep can be read while it runs
            with open(args.json, "w") as f:
                json.dump(
                    {"device": args.device, "dtype": args.dtype, "results": [asdict(r) for r in results]}, f, indent=1
                )
    table = summary_table(results)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
