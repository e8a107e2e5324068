"""The torch.compile backend: Dynamo graph -> torch.export -> PT2 bytes -> C++ core, under the
failure policy (what luminal cannot run runs in eager). It sits above the other layers (export ->
compiled -> export_cache -> fallback -> backend; tests/test_import_graph.py keeps them a DAG)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree

from luminal._C import LuminalError
from luminal.compiled import compile_exported
from luminal.export_cache import export_through_cache
from luminal.fallback import compile_partly
from luminal.guards import GuardedFunction, alias_plan, autograd_reason, overlapping_inputs, specialized_scalars
from luminal.policy import (
    EagerGraph,
    EagerPath,
    Options,
    describe_error,
    first_line,
    parse_options,
    run_in_eager,
)

_state_lock = threading.Lock()
_compiles = 0


def compile_count() -> int:
    """Number of graphs compiled by the luminal backend in this process."""
    return _compiles


def reset_compile_count() -> None:
    global _compiles
    with _state_lock:
        _compiles = 0


def luminal_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Callable[..., Any]:
    """Dynamo backend entry point: ``torch.compile(model, backend=luminal_backend)``.

    Options: ``megakernel`` (bool, default True), ``strict`` (bool, default False: what luminal
    cannot run runs in eager, with one warning; True raises a LuminalError instead),
    ``min_partition_size`` (int >= 1, default 1: smaller luminal partitions of a graph with
    unsupported ops run in eager too). Unknown options and wrong types raise LuminalError.
    """
    global _compiles
    settings = parse_options({**(options or {}), **kwargs})
    try:
        compiled = _compile_or_eager(gm, example_inputs, settings)
    except Exception as error:
        # A failure the steps below did not expect (a bug in luminal's own Python code): the
        # policy still holds. Warnings turned into errors by the user's filters pass through.
        if isinstance(error, Warning) or (settings.strict and isinstance(error, LuminalError)):
            raise
        if settings.strict:
            raise LuminalError(f"luminal failed: {describe_error(error)}") from error
        compiled = run_in_eager(gm.forward, f"luminal failed: {describe_error(error)}", settings, error)
    if not isinstance(compiled, EagerGraph):
        with _state_lock:
            _compiles += 1
    return compiled


_NOTHING_TO_COMPILE = "the graph reads, writes and returns no tensor: nothing to compile"


def _touches_no_tensor(gm: torch.fx.GraphModule) -> bool:
    """A graph without inputs, attributes or submodules that returns nothing: what it calls cannot
    reach a tensor that outlives it (torchvision's detection models give Dynamo a graph that only calls
    torch._C._log_api_usage_once). Running it as it is is all there is to do, and torch.export's
    serializer fails on a program without outputs."""
    nodes = list(gm.graph.nodes)
    if any(node.op in ("placeholder", "get_attr", "call_module") for node in nodes):
        return False
    outputs = [node for node in nodes if node.op == "output"]
    return len(outputs) == 1 and not pytree.tree_leaves(outputs[0].args[0])


def _compile_or_eager(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: Options) -> Callable[..., Any]:
    """The failure policy around a compile: the graph runs in eager (with one warning; strict:
    LuminalError) when it needs autograd, returns views luminal cannot rebuild, cannot be exported,
    or fails in luminal in a way no partitioning avoids."""
    if _touches_no_tensor(gm):
        return EagerGraph(gm.forward, _NOTHING_TO_COMPILE)  # no warning: nothing falls back
    reason = autograd_reason(gm)
    plan = alias_plan(gm)
    if reason is None and isinstance(plan, str):
        reason = f"{plan} (eager returns it as a view, luminal as a new tensor)"
    if reason is not None:
        return run_in_eager(gm.forward, reason, options)
    assert not isinstance(plan, str)
    scalars = specialized_scalars(gm, example_inputs)
    eager = EagerPath(gm.forward, options.strict)
    try:
        exported = export_through_cache(gm, example_inputs)
    except Exception as error:  # torch.export raises many types; none may stop the model
        return run_in_eager(gm.forward, _export_failure(error, example_inputs), options, error)
    try:
        compiled: Callable[..., Any] = compile_exported(exported, options.megakernel, eager)
    except Exception as error:  # noqa: BLE001  (any failure in luminal's core: the policy decides)
        if options.strict:
            if isinstance(error, LuminalError):
                raise
            raise LuminalError(describe_error(error)) from error
        compiled = compile_partly(gm, example_inputs, error, exported, options)
    if scalars or plan:
        compiled = GuardedFunction(compiled, eager, scalars, plan)
    return compiled


def _export_failure(error: BaseException, example_inputs: Sequence[Any]) -> str:
    reason = f"torch.export failed: {first_line(error)}"
    if isinstance(error, LuminalError):
        reason = describe_error(error)
    overlap = overlapping_inputs(list(example_inputs))
    if overlap is not None:
        reason += (
            f" (inputs {overlap[0]} and {overlap[1]} share memory: in-place updates through aliased inputs "
            "cannot be exported)"
        )
    return reason
