"""An exported graph compiled by the core, and the callable the backend hands to Dynamo."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import torch.utils._pytree as pytree

from luminal import _C
from luminal._C import LuminalCallInEagerError, LuminalError
from luminal.export import ExportedGraph
from luminal.policy import EagerPath, LuminalWarning, first_line, report_core_notices, warn_once
from luminal.settings import settings

log = logging.getLogger("luminal")

_dump_lock = threading.Lock()


class CompiledFunction:
    """What the backend returns to Dynamo: one C++ call per invocation.

    With an ``eager`` path (the backend's Dynamo graph), the first call is checked: if it raises a
    LuminalError before any call succeeded (planning or binding errors that only show at run time),
    the graph runs in eager from then on, with one warning (strict: the error is raised). Eager then
    also raises what eager raises (an out-of-range index given by the user). A call the compiled
    graph cannot take runs in eager (see LuminalCallInEagerError: an in-place updated input that
    shares memory with another input, inputs outside the sizes the export assumed)."""

    def __init__(self, graph: Any, exported: ExportedGraph, eager: EagerPath | None = None) -> None:
        self._graph = graph
        self._layout = exported.layout
        self._out_spec = exported.out_spec
        self._eager = eager
        self._checked = eager is None  # no eager path: errors go to the caller
        self._eager_reason: str | None = None
        flat_tuple = _is_flat_tuple(exported.out_spec)
        graph.set_call_layout(list(self._layout.tensors), flat_tuple, list(self._layout.sizes))
        # A flat tuple of outputs (the common case) needs no Python work per call.
        fast = (flat_tuple or exported.out_spec is None) and not self._layout.host
        self._fast_call = graph.call if fast else None

    def __call__(self, *args: Any) -> Any:
        if not self._checked:
            return self._first_call(args)
        try:
            if self._fast_call is not None:
                return self._fast_call(*args)
            return self._run(args)
        except LuminalCallInEagerError as error:
            return self._eager_call(args, error)

    def _run(self, args: tuple[Any, ...]) -> Any:
        outputs = self._graph.run(self._layout.inputs(args))
        return pytree.tree_unflatten(outputs, self._out_spec)

    def _first_call(self, args: tuple[Any, ...]) -> Any:
        assert self._eager is not None
        if self._eager_reason is not None:
            return self._eager(*args)
        try:
            outputs = self._fast_call(*args) if self._fast_call is not None else self._run(args)
        except LuminalCallInEagerError as error:
            return self._eager_call(args, error)
        except LuminalError as error:
            if self._eager.strict:
                raise
            self._eager_reason = f"its first call failed: {first_line(error)}"
            self._eager.warn_once("first call", f"luminal: this graph runs in eager: {self._eager_reason}")
            return self._eager(*args)
        finally:
            report_core_notices()  # the first CUDA call compiles (and caches) the kernels
        self._checked = True
        return outputs

    def _eager_call(self, args: tuple[Any, ...], error: LuminalError) -> Any:
        """A call the compiled graph cannot take (inputs that overlap an in-place update, or that do
        not bind) runs in eager; later calls try luminal again."""
        if self._eager is None:
            raise error
        self._eager.warn_once(type(error).__name__, f"luminal: a call runs in eager: {first_line(error)}")
        return self._eager(*args)

    def take_unbound_calls_to(self, eager: EagerPath) -> None:
        """After a checked first call: calls the graph cannot take (LuminalCallInEagerError) run in
        ``eager`` instead of raising. A partition of a partly compiled graph gets its first call's
        errors itself (its partition then runs in eager), and this path for later calls."""
        assert self._checked, "take_unbound_calls_to is for a function whose first call has passed"
        self._eager = eager

    def ir(self, optimized: bool = True) -> str:
        """The compiled graph's IR as text (before optimization with optimized=False)."""
        return self._graph.ir(optimized)

    def stats(self) -> dict[str, Any]:
        stats = self._graph.stats()
        share = 0.0 if self._eager_reason is not None else 1.0
        stats.update(fallback=self._eager_reason is not None, luminal_node_share=share, luminal_flop_share=share)
        if self._eager_reason is not None:
            stats["eager_reason"] = self._eager_reason
        return stats

    def cuda_source(self) -> str:
        """The generated CUDA module (prelude and kernels); empty in a build without CUDA."""
        return self._graph.cuda_source()


def _is_flat_tuple(spec: pytree.TreeSpec | None) -> bool:
    """True when the outputs are returned as a plain tuple of the flat outputs in order."""
    if spec is None:
        return False
    probe = list(range(spec.num_leaves))
    rebuilt = pytree.tree_unflatten(probe, spec)
    return type(rebuilt) is tuple and list(rebuilt) == probe


def compile_exported(
    exported: ExportedGraph, megakernel: bool = True, eager: EagerPath | None = None
) -> CompiledFunction:
    """Compiles an exported graph. With ``eager``, the first call falls back to it (see CompiledFunction)."""
    _dump_archive(exported)
    try:
        graph = _C.compile(exported.archive, list(exported.input_roles), megakernel)
    finally:
        report_core_notices()  # a bad kernel cache entry, an unusable LUMINAL_DUMP_KERNELS
    stats = graph.stats()
    if stats["megakernel"]:
        log.info(
            "luminal: a megakernel candidate on CUDA, run where it measures faster (%s)", stats["megakernel_reason"]
        )
    else:
        log.info("luminal: general path, no megakernel: %s", stats["megakernel_reason"])
    return CompiledFunction(graph, exported, eager)


def _dump_archive(exported: ExportedGraph) -> None:
    """LUMINAL_DUMP_PT2=<dir>: keep every archive handed to the core (for bug reports). A directory
    that cannot be written warns once; the compile goes on."""
    configured = settings().dump_pt2
    if not configured:
        return
    directory = os.path.abspath(os.path.expanduser(configured))
    try:
        os.makedirs(directory, exist_ok=True)
        with _dump_lock:
            index = len(os.listdir(directory))
            while True:  # another process may dump into the same directory: never overwrite
                path = os.path.join(directory, f"graph_{index:04d}.pt2")
                try:
                    dump = open(path, "xb")  # noqa: SIM115  (closed below)
                    break
                except FileExistsError:
                    index += 1
        with dump:
            dump.write(exported.archive)
        with open(path + ".roles", "w") as f:
            f.write(" ".join(exported.input_roles))
    except OSError as error:
        warn_once(
            f"dump-pt2:{configured}",
            f"luminal: LUMINAL_DUMP_PT2={configured!r} is not usable ({error}); exported archives are not dumped",
            LuminalWarning,
        )
