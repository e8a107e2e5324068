"""Partial compilation: a graph with ops luminal does not support is split into luminal partitions
and eager code.

The Dynamo graph is exported and decomposed to Core ATen (as for a whole-graph compile); the
ATen graph is partitioned with torch.fx's CapabilityBasedPartitioner on the targets the C++ core
translates. Each partition is compiled by luminal as a graph of its own (dynamic dimensions stay
dynamic); the unsupported nodes, and partitions smaller than ``min_partition_size`` or that fail
to compile, run as ATen ops in eager. One warning names what runs in eager.

To compile the partitions, the ATen graph runs once on the example inputs at compile time (the
program is functional: inputs are not mutated then). At call time, mutated inputs are written
back as in a whole-graph compile.
"""

from __future__ import annotations

import logging
import operator
import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase

from luminal import _C
from luminal._C import LuminalError
from luminal.backend import ExportedGraph, compile_graph, export_program, output_spec

log = logging.getLogger("luminal")

_PARTITION_PREFIX = "luminal_partition_"


class LuminalFallbackWarning(UserWarning):
    """Part of a compiled graph runs in eager because luminal does not support it."""


def target_name(target: Any) -> str:
    """The name the C++ core registers a call target under, e.g. ``torch.ops.aten.add.Tensor``."""
    if isinstance(target, torch._ops.OpOverload):
        return f"torch.ops.{target}"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or str(target)
    return f"{module}.{name}" if module else name


class LuminalSupport(OperatorSupportBase):
    """Which ATen graph nodes luminal's core translates. ``rejected_nodes`` names nodes whose
    target has a translator that refused this particular call (a dtype or variant it lacks)."""

    def __init__(self, rejected_nodes: frozenset[str] = frozenset()) -> None:
        self.targets = frozenset(_C.supported_targets()) | frozenset(_C.passthrough_targets())
        self.rejected_nodes = rejected_nodes

    def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
        if node.op != "call_function" or node.name in self.rejected_nodes:
            return False
        if node.target is operator.getitem:  # an output of a multi-output op goes where the op goes
            source = node.args[0]
            return isinstance(source, torch.fx.Node) and self.is_node_supported(submodules, source)
        if target_name(node.target) not in self.targets:
            return False
        return not self._feeds_eager_storage_reader(node)

    def _feeds_eager_storage_reader(self, node: torch.fx.Node) -> bool:
        """True when an eager op that reads raw storage (as_strided) depends on this node's memory
        layout: through views of it, or directly when eager would lay it out non-contiguously. A
        tensor crossing from a luminal partition is fresh and contiguous, so such a node (and the
        views in between) must run in eager too, or the storage read would differ from eager's."""
        for user in node.users:
            if user.op != "call_function":
                continue
            if user.target in _STORAGE_READERS and (
                target_name(user.target) not in self.targets or user.name in self.rejected_nodes
            ):
                if _is_view(node) or not _contiguous_in_eager(node):
                    return True
            elif _is_view(user) and self._feeds_eager_storage_reader(user):
                return True
        return False


# Ops whose result depends on the operand's storage, not just its values.
_STORAGE_READERS = frozenset({torch.ops.aten.as_strided.default})


def _is_view(node: torch.fx.Node) -> bool:
    """True for an op whose output aliases its input (a view in eager)."""
    schema = getattr(node.target, "_schema", None)
    return bool(schema and schema.returns and schema.returns[0].alias_info is not None)


def _contiguous_in_eager(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.is_contiguous()


def unsupported_nodes(graph: torch.fx.Graph, support: LuminalSupport | None = None) -> dict[str, list[str]]:
    """Unsupported call targets of an ATen graph and the nodes that call them."""
    support = support or LuminalSupport()
    found: dict[str, list[str]] = defaultdict(list)
    for node in graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem:
            if not support.is_node_supported({}, node):
                found[target_name(node.target)].append(node.name)
    return dict(found)


def describe_unsupported(found: dict[str, list[str]]) -> str:
    return ", ".join(f"{t.removeprefix('torch.ops.')} ({', '.join(nodes)})" for t, nodes in sorted(found.items()))


@dataclass
class FallbackReport:
    """What a partially compiled graph runs where."""

    unsupported: dict[str, list[str]]  # target -> nodes, run in eager
    partitions: list[dict[str, Any]] = field(default_factory=list)  # compiled by luminal
    eager_partitions: list[dict[str, Any]] = field(default_factory=list)  # too small, or failed


class _CompiledPartition(torch.nn.Module):
    def __init__(self, compiled: Callable[..., Any]) -> None:
        super().__init__()
        self.compiled = compiled

    def forward(self, *args: Any) -> Any:
        return self.compiled(*args)


def _compute_node_count(nodes: Sequence[torch.fx.Node]) -> int:
    return sum(1 for n in nodes if n.op == "call_function" and n.target is not operator.getitem)


class FallbackFunction:
    """What the backend returns to Dynamo for a graph with unsupported ops."""

    def __init__(
        self,
        program: torch.export.ExportedProgram,
        module: torch.fx.GraphModule,
        tensor_positions: tuple[int, ...],
        report: FallbackReport,
    ) -> None:
        self._module = module
        self._positions = tensor_positions
        self._report = report
        self._compiled: dict[str, Any] = {}  # partition name -> CompiledFunction, once compiled
        self._out_spec = output_spec(program)
        signature = program.graph_signature
        user_index = {}
        # Placeholders in order: a user input (index into the tensor arguments) or a fixed value.
        self._inputs: list[tuple[int, Any]] = []
        for spec in signature.input_specs:
            if spec.kind == InputKind.USER_INPUT:
                user_index[spec.arg.name] = len(user_index)
                self._inputs.append((user_index[spec.arg.name], None))
            elif spec.kind == InputKind.CONSTANT_TENSOR:
                self._inputs.append((-1, program.constants[spec.target]))
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                self._inputs.append((-1, program.state_dict[spec.target]))
            else:
                raise LuminalError(f"luminal fallback: unsupported program input kind {spec.kind} ({spec.arg})")
        # Outputs in order: a mutated user input (its index) or a user output (-1).
        self._outputs: list[int] = []
        for spec in signature.output_specs:
            if spec.kind == OutputKind.USER_INPUT_MUTATION:
                self._outputs.append(user_index[spec.target])
            elif spec.kind == OutputKind.USER_OUTPUT:
                self._outputs.append(-1)
            else:
                raise LuminalError(f"luminal fallback: unsupported program output kind {spec.kind} ({spec.arg})")

    def program_inputs(self, args: Sequence[Any]) -> list[Any]:
        tensors = [args[i] for i in self._positions]
        return [tensors[index] if index >= 0 else value for index, value in self._inputs]

    def __call__(self, *args: Any) -> Any:
        tensors = [args[i] for i in self._positions]
        results = self._module(*self.program_inputs(args))
        outputs = []
        for target, value in zip(self._outputs, results, strict=True):
            if target >= 0:
                tensors[target].copy_(value)
            else:
                outputs.append(value)
        if self._out_spec is None:
            return tuple(outputs)
        return pytree.tree_unflatten(outputs, self._out_spec)

    def set_compiled_partitions(self, compiled: dict[str, Any]) -> None:
        self._compiled = compiled

    def report(self) -> FallbackReport:
        return self._report

    def ir(self, optimized: bool = True) -> str:
        return "\n".join(f"# {name}\n{c.ir(optimized)}" for name, c in self._compiled.items())

    def stats(self) -> dict[str, Any]:
        return {
            "fallback": True,
            "unsupported": self._report.unsupported,
            "partitions": {name: c.stats() for name, c in self._compiled.items()},
            "eager_partitions": self._report.eager_partitions,
        }


def compile_with_fallback(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    error: LuminalError,
    exported: ExportedGraph,
    megakernel: bool = True,
    min_partition_size: int = 1,
) -> FallbackFunction:
    """Compiles what luminal supports of a graph whose whole-graph compile of ``exported`` failed
    with ``error``; re-raises ``error`` when every op is supported (the failure has another cause)."""
    program = exported.program if exported.program is not None else export_program(gm, example_inputs)[0]
    tensor_positions = exported.tensor_positions
    # A translator that refuses one node names it: that node runs in eager, not the whole graph.
    support = LuminalSupport(frozenset(re.findall(r"cannot translate node (\S+) \(", str(error))))
    unsupported = unsupported_nodes(program.graph, support)
    if not unsupported:
        raise error
    module = program.graph_module
    partitioner = CapabilityBasedPartitioner(module, support, allows_single_node_partition=True)
    partitions: list[Partition] = partitioner.propose_partitions()
    report = FallbackReport(unsupported=unsupported)
    kept = []
    for partition in partitions:
        size = _compute_node_count(list(partition.nodes))
        if size >= max(min_partition_size, 1) and size > 0:
            kept.append(partition)
        elif size > 0:
            report.eager_partitions.append(
                {"nodes": size, "reason": f"smaller than min_partition_size={min_partition_size}"}
            )
    fused = partitioner.fuse_partitions(kept, _PARTITION_PREFIX) if kept else module
    _copy_argument_metadata(fused)

    function = FallbackFunction(program, fused, tensor_positions, report)
    compiled = _compile_partitions(fused, function.program_inputs(list(example_inputs)), megakernel, report)
    function.set_compiled_partitions(compiled)
    message = (
        f"luminal: ops without luminal support run in eager: {describe_unsupported(unsupported)}; "
        f"{len(compiled)} partition(s) compiled by luminal"
    )
    if report.eager_partitions:
        message += f", {len(report.eager_partitions)} more run in eager"
    warnings.warn(message, LuminalFallbackWarning, stacklevel=2)  # the one user-visible message
    log.info(message)
    return function


def _copy_argument_metadata(fused: torch.fx.GraphModule) -> None:
    """Partition submodules get their inputs' fake values as Dynamo-style ``example_value``, so
    that their export keeps dynamic dimensions dynamic."""
    for node in fused.graph.nodes:
        if node.op != "call_module" or not str(node.target).startswith(_PARTITION_PREFIX):
            continue
        submodule = fused.get_submodule(node.target)
        placeholders = [n for n in submodule.graph.nodes if n.op == "placeholder"]
        for placeholder, argument in zip(placeholders, node.args, strict=True):
            if isinstance(argument, torch.fx.Node) and "val" in argument.meta:
                placeholder.meta["example_value"] = argument.meta["val"]


def _compile_partitions(
    fused: torch.fx.GraphModule, inputs: list[Any], megakernel: bool, report: FallbackReport
) -> dict[str, Any]:
    """Runs the partitioned graph once on the example inputs, compiling each partition on its
    actual inputs as it is reached; a partition that fails to compile stays in eager."""
    compiled: dict[str, Any] = {}

    class CompilingInterpreter(torch.fx.Interpreter):
        def call_module(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            submodule = self.fetch_attr(target)
            if not str(target).startswith(_PARTITION_PREFIX):
                return super().call_module(target, args, kwargs)
            try:
                function = compile_graph(submodule, list(args), megakernel=megakernel)
            except LuminalError as error:
                report.eager_partitions.append({"name": str(target), "reason": str(error).splitlines()[0]})
                log.info("luminal: partition %s runs in eager: %s", target, error)
                return submodule(*args)
            compiled[str(target)] = function
            report.partitions.append({"name": str(target), "nodes": _compute_node_count(list(submodule.graph.nodes))})
            fused.set_submodule(str(target), _CompiledPartition(function))
            return function(*args)

    with torch.no_grad():
        CompilingInterpreter(fused).run(*inputs)
    return compiled
