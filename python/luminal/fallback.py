"""Partial compilation: a graph with ops luminal does not support is split into luminal partitions
and eager code.

The Dynamo graph is exported and decomposed to Core ATen (as for a whole-graph compile). One pass
of the C++ translator (``_C.refused_nodes``) finds every node luminal does not translate: no
translator, or a translator that refuses this call (a dtype or variant it lacks). The ATen graph
is partitioned with torch.fx's CapabilityBasedPartitioner around those nodes; each partition is
compiled by luminal as a graph of its own (dynamic dimensions stay dynamic). A partition whose
compile is refused for a node of its own is partitioned again without that node; a partition that
fails otherwise (passes, code generation, its first call), or is smaller than
``min_partition_size``, runs in eager. One warning lists every op that runs in eager and why, and
each eager partition's reason; ``stats()`` reports the share of nodes and FLOPs luminal runs.

To compile the partitions, the ATen graph runs once on the example inputs at compile time (the
program is functional: inputs are not mutated then). At call time, mutated inputs are written
back as in a whole-graph compile.
"""

from __future__ import annotations

import copy
import functools
import logging
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase

from luminal import _C
from luminal._C import LuminalError, LuminalUnsupportedError
from luminal.compiled import compile_exported
from luminal.export import CallLayout, ExportedGraph, export_graph, output_spec
from luminal.export_cache import export_through_cache
from luminal.flops import shares
from luminal.guards import overlapping_inputs
from luminal.policy import (
    EagerPath,
    LuminalFallbackWarning,
    Options,
    describe_error,
    first_line,
    run_in_eager,
    warn_fallback,
)

log = logging.getLogger("luminal")

_PARTITION_PREFIX = "luminal_partition_"


__all__ = ["FallbackFunction", "LuminalFallbackWarning", "LuminalSupport", "compile_partly", "compile_with_fallback"]


@functools.cache
def _passthrough_targets() -> frozenset[str]:
    return frozenset(_C.passthrough_targets())


def target_name(target: Any) -> str:
    """The name the C++ core registers a call target under, e.g. ``torch.ops.aten.add.Tensor``."""
    if isinstance(target, torch._ops.OpOverload):
        return f"torch.ops.{target}"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or str(target)
    return f"{module}.{name}" if module else name


class LuminalSupport(OperatorSupportBase):
    """Which ATen graph nodes luminal's core translates. ``rejected_nodes`` names nodes luminal
    refused (see ``find_refusals``): a translator that refused this particular call."""

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


@dataclass(frozen=True)
class EagerNode:
    """A node that runs in eager, and why."""

    name: str
    target: str  # e.g. "torch.ops.aten.pow.Tensor_Tensor"
    reason: str


def find_refusals(graph: torch.fx.Graph, archive: bytes, roles: Sequence[str]) -> dict[str, EagerNode]:
    """Every node of the exported graph (serialized as ``archive``) that luminal does not
    translate, from one pass of the C++ translator, by FX node name."""
    nodes = {node.name: node for node in graph.nodes}
    found: dict[str, EagerNode] = {}
    for name, target, reason in _C.refused_nodes(archive, list(roles)):
        node = _source_node(nodes.get(name))
        if node is None:
            log.debug("luminal: refused node %s (%s) is not in the graph", name, target)
            continue
        found.setdefault(node.name, EagerNode(node.name, target_name(node.target), reason))
    return found


def _source_node(node: torch.fx.Node | None) -> torch.fx.Node | None:
    """Older serializers name a multi-output node by its first output (a getitem node)."""
    if node is not None and node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        return node.args[0]
    return node


def eager_nodes(graph: torch.fx.Graph, refused: dict[str, EagerNode]) -> dict[str, EagerNode]:
    """The nodes that run in eager: the refused ones, and the ones LuminalSupport declines."""
    support = LuminalSupport(frozenset(refused))
    found: dict[str, EagerNode] = {}
    for node in graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem or support.is_node_supported({}, node):
            continue
        target = target_name(node.target)
        if node.name in refused:
            found[node.name] = refused[node.name]
        elif target not in support.targets:
            found[node.name] = EagerNode(node.name, target, "no luminal translator for this operator")
        else:
            reason = "feeds an eager op that reads its storage (as_strided)"
            found[node.name] = EagerNode(node.name, target, reason)
    return found


def describe_eager_nodes(nodes: dict[str, EagerNode]) -> str:
    """Eager nodes grouped by target and reason: "aten.pow.Tensor_Tensor (pow_1, pow_2): why"."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node in nodes.values():
        groups[(node.target, node.reason)].append(node.name)
    return "; ".join(
        f"{_short(target)} ({', '.join(names)}): {reason}" for (target, reason), names in sorted(groups.items())
    )


def _short(target: str) -> str:
    return target.removeprefix("torch.ops.")


def compute_nodes(nodes: Iterable[torch.fx.Node]) -> list[torch.fx.Node]:
    """The nodes that compute something: calls other than getitem and symbolic-size bookkeeping."""
    passthrough = _passthrough_targets()
    return [
        n
        for n in nodes
        if n.op == "call_function" and n.target is not operator.getitem and target_name(n.target) not in passthrough
    ]


@dataclass
class FallbackReport:
    """What a partially compiled graph runs where."""

    eager_nodes: dict[str, EagerNode]  # node name -> why it runs in eager
    partitions: list[dict[str, Any]] = field(default_factory=list)  # compiled by luminal
    eager_partitions: list[dict[str, Any]] = field(default_factory=list)  # too small, or failed
    total_nodes: int = 0
    luminal_node_share: float = 0.0
    luminal_flop_share: float = 0.0

    @property
    def unsupported(self) -> dict[str, list[str]]:
        """Target -> nodes, for the nodes luminal does not support."""
        found: dict[str, list[str]] = defaultdict(list)
        for node in self.eager_nodes.values():
            found[node.target].append(node.name)
        return dict(found)

    def message(self) -> str:
        eager_ops = len(self.eager_nodes) + sum(p["nodes"] for p in self.eager_partitions)
        lines = [
            f"luminal: {eager_ops} of {self.total_nodes} op(s) run in eager (luminal runs "
            f"{self.luminal_node_share:.0%} of the ops, {self.luminal_flop_share:.1%} of the FLOPs); "
            f"{len(self.partitions)} partition(s) compiled by luminal"
        ]
        if self.eager_nodes:
            lines.append(f"  not supported: {describe_eager_nodes(self.eager_nodes)}")
        for partition in self.eager_partitions:
            ops = ", ".join(_short(op) for op in partition["ops"])
            lines.append(
                f"  eager partition {partition['name']} ({partition['nodes']} op(s): {ops}): {partition['reason']}"
            )
        return "\n".join(lines)


class _CompiledPartition(torch.nn.Module):
    def __init__(self, compiled: Callable[..., Any]) -> None:
        super().__init__()
        self.compiled = compiled

    def forward(self, *args: Any) -> Any:
        return self.compiled(*args)


class FallbackFunction:
    """What the backend returns to Dynamo for a graph with unsupported ops."""

    def __init__(
        self,
        program: torch.export.ExportedProgram,
        module: torch.fx.GraphModule,
        layout: CallLayout,
        report: FallbackReport,
        eager: EagerPath,
    ) -> None:
        self._module = module
        self._layout = layout
        self._report = report
        self._eager = eager
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
        self._mutated = sorted({target for target in self._outputs if target >= 0})

    def program_inputs(self, args: Sequence[Any]) -> list[Any]:
        tensors = self._layout.inputs(args)
        return [tensors[index] if index >= 0 else value for index, value in self._inputs]

    def __call__(self, *args: Any) -> Any:
        tensors = self._layout.inputs(args)
        if self._mutated:
            overlap = overlapping_inputs(tensors, self._mutated)
            if overlap is not None:
                # The program reads every input at entry and writes the mutated ones back at the
                # end; through an alias, eager sees the update in between.
                self._eager.warn_once(
                    "overlap",
                    f"luminal: a call runs in eager: input #{overlap[0]} is updated in place and shares memory "
                    f"with input #{overlap[1]}",
                )
                return self._eager(*args)
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

    def cuda_source(self) -> str:
        return "\n".join(f"// {name}\n{c.cuda_source()}" for name, c in self._compiled.items())

    def stats(self) -> dict[str, Any]:
        return {
            "fallback": True,
            "unsupported": self._report.unsupported,
            "eager_nodes": {
                n.name: {"target": n.target, "reason": n.reason} for n in self._report.eager_nodes.values()
            },
            "partitions": {name: c.stats() for name, c in self._compiled.items()},
            "eager_partitions": self._report.eager_partitions,
            "luminal_node_share": self._report.luminal_node_share,
            "luminal_flop_share": self._report.luminal_flop_share,
        }


class _MoreRefusals(Exception):
    """A partition's compile was refused for nodes of its own: partition again without them."""

    def __init__(self, nodes: dict[str, EagerNode]) -> None:
        super().__init__(", ".join(nodes))
        self.nodes = nodes


def compile_with_fallback(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    error: BaseException,
    exported: ExportedGraph,
    options: Options,
) -> FallbackFunction:
    """Compiles what luminal supports of a graph whose whole-graph compile of ``exported`` failed
    with ``error``; re-raises ``error`` when no node is to blame (then the whole graph runs in eager)."""
    if exported.program is None:  # an export cache hit: export again, for the program to partition
        exported = export_graph(gm, example_inputs)
    program = exported.program
    assert program is not None
    refused = find_refusals(program.graph, exported.archive, exported.input_roles)
    if isinstance(error, LuminalUnsupportedError):
        node = _source_node({n.name: n for n in program.graph.nodes}.get(error.node))
        if node is not None:
            refused.setdefault(node.name, EagerNode(node.name, target_name(node.target), error.reason))
    if not eager_nodes(program.graph, refused):
        raise error
    eager = EagerPath(gm.forward, options.strict)
    for _ in range(len(program.graph.nodes) + 1):  # each round takes out at least one more node
        try:
            function = _partition_and_compile(program, exported.layout, example_inputs, refused, options, eager)
        except _MoreRefusals as more:
            refused.update(more.nodes)
            continue
        warn_fallback(function.report().message())
        return function
    raise error


def _partition_and_compile(
    program: torch.export.ExportedProgram,
    layout: CallLayout,
    example_inputs: Sequence[Any],
    refused: dict[str, EagerNode],
    options: Options,
    eager: EagerPath,
) -> FallbackFunction:
    module = copy.deepcopy(program.graph_module)  # fusing partitions rewrites the module
    support = LuminalSupport(frozenset(refused))
    partitioner = CapabilityBasedPartitioner(module, support, allows_single_node_partition=True)
    partitions: list[Partition] = partitioner.propose_partitions()
    report = FallbackReport(eager_nodes=eager_nodes(program.graph, refused))
    kept = []
    for k, partition in enumerate(partitions):
        nodes = compute_nodes(partition.nodes)
        if len(nodes) >= options.min_partition_size and nodes:
            kept.append(partition)
        elif nodes:
            reason = f"smaller than min_partition_size={options.min_partition_size}"
            report.eager_partitions.append(_partition_entry(f"#{k}", nodes, reason))
    fused = partitioner.fuse_partitions(kept, _PARTITION_PREFIX) if kept else module
    _copy_argument_metadata(fused)

    function = FallbackFunction(program, fused, layout, report, eager)
    compiled, in_luminal = _compile_partitions(
        fused, function.program_inputs(list(example_inputs)), options, refused, report
    )
    function.set_compiled_partitions(compiled)
    everything = compute_nodes(program.graph.nodes)
    report.total_nodes = len(everything)
    report.luminal_node_share, report.luminal_flop_share = shares(everything, in_luminal)
    return function


def _partition_entry(name: str, nodes: Sequence[torch.fx.Node], reason: str) -> dict[str, Any]:
    return {"name": name, "nodes": len(nodes), "ops": sorted({target_name(n.target) for n in nodes}), "reason": reason}


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
    fused: torch.fx.GraphModule,
    inputs: list[Any],
    options: Options,
    refused: dict[str, EagerNode],
    report: FallbackReport,
) -> tuple[dict[str, Any], set[str]]:
    """Runs the partitioned graph once on the example inputs, compiling each partition on its
    actual inputs as it is reached, and calling it once (its first call). A partition refused for
    nodes of its own raises _MoreRefusals; one that fails otherwise stays in eager. Returns the
    compiled partitions and the names of the nodes they run."""
    compiled: dict[str, Any] = {}
    in_luminal: set[str] = set()

    class CompilingInterpreter(torch.fx.Interpreter):
        def call_module(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            submodule = self.fetch_attr(target)
            if not str(target).startswith(_PARTITION_PREFIX):
                return super().call_module(target, args, kwargs)
            name = str(target)
            exported: ExportedGraph | None = None
            try:
                exported = export_through_cache(submodule, list(args))
                function = compile_exported(exported, options.megakernel)
                result = function(*args)
                # A later call outside what the partition was compiled for (a size below the
                # export's range, inputs that overlap an in-place update) runs the partition in eager.
                function.take_unbound_calls_to(EagerPath(submodule.forward, options.strict))
            except LuminalUnsupportedError as error:
                more = _partition_refusals(submodule, list(args), exported, refused, error)
                if more:
                    raise _MoreRefusals(more) from error
                return _run_partition_in_eager(submodule, args, name, first_line(error))
            except Exception as error:  # noqa: BLE001  (export, passes, codegen, first call: the partition runs in eager)
                return _run_partition_in_eager(submodule, args, name, first_line(error))
            compiled[name] = function
            nodes = compute_nodes(submodule.graph.nodes)
            in_luminal.update(n.name for n in nodes)
            report.partitions.append({"name": name, "nodes": len(nodes)})
            fused.set_submodule(name, _CompiledPartition(function))
            return result

    def _run_partition_in_eager(submodule: torch.fx.GraphModule, args: tuple[Any, ...], name: str, reason: str) -> Any:
        report.eager_partitions.append(_partition_entry(name, compute_nodes(submodule.graph.nodes), reason))
        log.info("luminal: partition %s runs in eager: %s", name, reason)
        return submodule(*args)

    with torch.no_grad():
        CompilingInterpreter(fused).run(*inputs)
    return compiled, in_luminal


def _partition_refusals(
    submodule: torch.fx.GraphModule,
    args: list[Any],
    exported: ExportedGraph | None,
    refused: dict[str, EagerNode],
    error: LuminalUnsupportedError,
) -> dict[str, EagerNode]:
    """The nodes of a partition (by their names in the whole graph) that luminal refused when it
    compiled the partition alone, not yet known as refused; empty when they cannot be told."""
    try:
        if exported is None or exported.program is None:
            exported = export_graph(submodule, args)
        assert exported.program is not None
        names = _align(exported.program.graph, submodule.graph)
        found = find_refusals(exported.program.graph, exported.archive, exported.input_roles)
    except Exception as failure:  # noqa: BLE001  (the partition then just runs in eager)
        log.debug("luminal: cannot tell the refused nodes of a partition: %s (%s)", failure, error)
        return {}
    if names is None:
        return {}
    nodes = {n.name: n for n in submodule.graph.nodes}
    more = {}
    for node in found.values():
        original = names.get(node.name)
        if original is not None and original not in refused and original in nodes:
            target = target_name(nodes[original].target)
            more[original] = EagerNode(original, target, node.reason)
    return more


def _align(exported: torch.fx.Graph, original: torch.fx.Graph) -> dict[str, str] | None:
    """Export renames nodes; a partition's export has the same compute nodes in the same order
    (it is already Core ATen), so they pair up by position. None when the target sequences differ."""
    ours, theirs = compute_nodes(exported.nodes), compute_nodes(original.nodes)
    if [target_name(n.target) for n in ours] != [target_name(n.target) for n in theirs]:
        return None
    return {a.name: b.name for a, b in zip(ours, theirs, strict=True)}


def compile_partly(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    error: Exception,
    exported: ExportedGraph,
    options: Options,
) -> Callable[..., Any]:
    """After a whole-graph compile failed: luminal partitions and eager code, or all in eager."""
    try:
        return compile_with_fallback(gm, example_inputs, error, exported, options)
    except Exception as failure:  # noqa: BLE001
        if isinstance(failure, Warning):  # the fallback's own warning, made an error by a filter
            raise
        cause = error if failure is error else failure
        return run_in_eager(gm.forward, describe_error(cause), options, cause)
