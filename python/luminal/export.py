"""Dynamo graph -> torch.export -> PT2 archive bytes, and the types that describe the result
(CallLayout, ExportedGraph). The lowest of the backend's layers (export -> compiled -> export_cache
-> fallback -> backend -> explain; tests/test_import_graph.py): it imports none of the others."""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import json
import math
import operator
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import Dim

from luminal import _C
from luminal._C import LuminalError
from luminal.decompositions import decomposition_table
from luminal.guards import inline_scalars, specialized_scalars

_export_scope = threading.local()


@dataclass(frozen=True)
class CallLayout:
    """How a call's arguments become the program's inputs: the tensors at positions `tensors`, then
    each integer argument at positions `sizes` as a size carrier (an empty ``[value + 2, 0]``
    tensor, ``_C.CompiledGraph.size_carrier``): Dynamo passes dynamic integers that are no tensor's
    size (a cache's step counter) as SymInts, and the core reads symbols from tensor shapes."""

    tensors: tuple[int, ...]
    sizes: tuple[int, ...] = ()
    # Host tensors (call positions) that the graph only moves to `device` (see _host_inputs): each
    # call copies them there, as eager's transfer in the graph does.
    host: tuple[int, ...] = ()
    device: str = ""

    def inputs(self, args: Sequence[Any]) -> list[Any]:
        carriers = [_C.CompiledGraph.size_carrier(_concrete_int(args[i])) for i in self.sizes]
        if self.host:
            return [args[i].to(self.device) if i in self.host else args[i] for i in self.tensors] + carriers
        return [args[i] for i in self.tensors] + carriers


def _concrete_int(value: Any) -> int:
    """An int argument's value; for a SymInt (compile time), its hint, without adding a guard."""
    if isinstance(value, torch.SymInt):
        hint = value.node.hint
        if hint is None:
            raise LuminalError(f"integer input {value} has no known value (data-dependent)")
        return int(hint)
    return int(value)


@dataclass(frozen=True)
class ExportedGraph:
    """A Dynamo graph exported to a PT2 archive, and how to call it."""

    archive: bytes
    layout: CallLayout  # which call arguments are the program's inputs
    input_roles: tuple[str, ...]  # "user", "parameter" or "buffer", per program input
    out_spec: pytree.TreeSpec | None  # structure of the graph's outputs
    # The program the archive holds when it was exported in this process (None on a cache hit):
    # the fallback partitions it instead of exporting again.
    program: torch.export.ExportedProgram | None = field(default=None, compare=False, repr=False)


def export_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> ExportedGraph:
    """Exports a Dynamo graph to an in-memory PT2 archive (no weights, no sample inputs inside)."""
    exported, layout, roles = export_program(gm, example_inputs)
    return ExportedGraph(
        archive=_serialize(exported),
        layout=layout,
        input_roles=roles,
        out_spec=output_spec(exported),
        program=exported,
    )


def export_program(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> tuple[torch.export.ExportedProgram, CallLayout, tuple[str, ...]]:
    """torch.export of a Dynamo graph, decomposed to Core ATen. Every tensor argument becomes a user
    input of the program (parameters included), and every dynamic integer that is no tensor's size
    a size carrier after them; returns the program, the call layout and the inputs' roles."""
    scalars = specialized_scalars(gm, example_inputs)
    gm = copy.deepcopy(gm)
    inline_scalars(gm, scalars)  # checked per call by GuardedFunction
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise LuminalError(f"graph has {len(placeholders)} inputs but {len(example_inputs)} example inputs")

    tensor_positions: list[int] = []
    roles: list[str] = []
    symbolic: list[tuple[int, torch.fx.Node, Any]] = []
    for position, (node, value) in enumerate(zip(placeholders, example_inputs, strict=True)):
        if not node.users:
            # Dynamo passes some values the graph never reads (e.g. module float attributes as
            # 0-d CPU tensors under dynamic=True): they are not part of the compiled program.
            gm.graph.erase_node(node)
            continue
        if isinstance(value, torch.Tensor):
            tensor_positions.append(position)
            roles.append(_input_role(value))
        elif isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool):
            symbolic.append((position, node, value))
        else:
            raise LuminalError(
                f"graph input '{node.name}' of type {type(value).__name__} is not supported "
                "(luminal takes tensors and integer sizes)"
            )
    tensor_nodes = [placeholders[i] for i in tensor_positions]
    host, device = _host_inputs(gm, tensor_positions, example_inputs)
    for k, position in enumerate(tensor_positions):
        if position in host:
            roles[k] = "user"  # copied per call: never bound once like a parameter
    on_device = [i for i in tensor_positions if i not in host]  # host inputs move to `device` per call
    _require_one_device([placeholders[i].name for i in on_device], [example_inputs[i] for i in on_device])
    carried = _replace_integer_placeholders(gm, tensor_nodes, symbolic)
    _sums_as_additions(gm.graph)
    gm.recompile()

    layout = CallLayout(tuple(tensor_positions), tuple(position for position, _ in carried), host, device)
    args = tuple(layout.inputs(example_inputs))
    dynamic_shapes = _dynamic_shapes(gm, tensor_nodes + [carrier for _, carrier in carried], len(tensor_nodes))
    with _luminal_export(args, dynamic=dynamic_shapes is not None), torch._guards.tracing(None):
        exported = torch.export.export(gm, args, dynamic_shapes=dynamic_shapes, strict=False, **_EXPORT_OPTIONS)
        exported = exported.run_decompositions(decomposition_table())
    return exported, layout, tuple(roles) + ("user",) * len(carried)


# Shape checks that export cannot prove become run-time asserts rather than export errors (the
# option exists from torch 2.7 on; torch 2.6 exports without it).
_EXPORT_OPTIONS: dict[str, Any] = (
    {"prefer_deferred_runtime_asserts_over_guards": True}
    if "prefer_deferred_runtime_asserts_over_guards" in inspect.signature(torch.export.export).parameters
    else {}
)


def _input_role(value: torch.Tensor) -> str:
    if isinstance(value, torch.nn.Parameter):
        return "parameter"
    # Dynamo marks module buffers (and parameters) it passes as graph inputs.
    if getattr(value, "_dynamo_static_input_type", None) is not None:
        return "buffer"
    return "user"


def _host_inputs(
    gm: torch.fx.GraphModule, tensor_positions: list[int], example_inputs: Sequence[Any]
) -> tuple[tuple[int, ...], str]:
    """CPU tensors in a CUDA graph that the graph only carries to the device (VideoMAE's sinusoid
    table is a plain CPU attribute that forward casts and moves with `.to(device)`): the call
    positions of such inputs and the device. The graph then runs on copies moved there per call.
    Refused (empty) when a CPU value is updated in place or returned: those must stay host memory."""
    tensors = [example_inputs[i] for i in tensor_positions]
    devices = {t.device for t in tensors if t.device.type != "cpu"}
    cpu = [i for i in tensor_positions if example_inputs[i].device.type == "cpu" and example_inputs[i].dim() > 0]
    if len(devices) != 1 or not cpu or next(iter(devices)).type != "cuda":
        return (), ""

    def on_host(value: Any) -> bool:
        return any(isinstance(v, torch.Tensor) and v.device.type == "cpu" for v in pytree.tree_leaves(value))

    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr") or not on_host(node.meta.get("example_value")):
            continue
        name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
        in_place = name.endswith("_") and not name.endswith("__") or name in ("setitem", "__setitem__")
        if in_place:
            return (), ""
    for node in gm.graph.find_nodes(op="output"):
        returned = [a.meta.get("example_value") for a in pytree.tree_leaves(node.args) if isinstance(a, torch.fx.Node)]
        if on_host(returned):
            return (), ""
    return tuple(cpu), str(next(iter(devices)))


def _require_one_device(names: list[str], tensors: list[torch.Tensor]) -> None:
    # 0-d CPU tensors (Python scalars Dynamo passes as tensors) may sit next to CUDA tensors, as in
    # eager; the core refuses them at run time only if the compiled graph actually reads them.
    devices = {t.device for t in tensors if not (t.dim() == 0 and t.device.type == "cpu")} or {
        t.device for t in tensors
    }
    if len(devices) > 1:
        described = ", ".join(
            f"{n}: {t.dtype} {tuple(t.shape)} on {t.device}" for n, t in zip(names, tensors, strict=True)
        )
        raise LuminalError(f"luminal compiles graphs on one device; this graph's inputs are {described}")
    unsupported = {d.type for d in devices} - {"cpu", "cuda"}
    if unsupported:
        raise LuminalError(f"luminal runs graphs on CPU and CUDA tensors, not on {sorted(unsupported)}")
    if "cuda" in {d.type for d in devices} and not _C.has_cuda_engine():
        raise LuminalError("this luminal was built without the CUDA toolkit headers: it has no CUDA engine")


def _replace_integer_placeholders(
    gm: torch.fx.GraphModule, tensor_nodes: list[torch.fx.Node], symbolic: list[tuple[int, torch.fx.Node, Any]]
) -> list[tuple[int, torch.fx.Node]]:
    """Dynamo passes dynamic sizes as SymInt inputs, which torch.export rejects. One that is the
    size of a tensor input's dimension becomes ``aten.sym_size.int(tensor, dim)``; any other becomes
    ``sym_size(carrier, 0) - 2`` of a new size-carrier input (see CallLayout). Returns the carriers
    with the call positions of the integers they carry."""
    if not symbolic:
        return []
    sources: dict[Any, tuple[torch.fx.Node, int]] = {}
    for node in tensor_nodes:
        example = node.meta.get("example_value")
        for dim, size in enumerate(getattr(example, "shape", ())):
            if isinstance(size, torch.SymInt):
                sources.setdefault(size.node.expr, (node, dim))
    # The carriers are new placeholders after the last one; the size computations follow them all.
    carriers: dict[torch.fx.Node, torch.fx.Node] = {}
    last = [n for n in gm.graph.nodes if n.op == "placeholder"][-1]
    for _, node, value in symbolic:
        example = node.meta.get("example_value", value)
        if isinstance(example, torch.SymInt) and example.node.expr not in sources:
            with gm.graph.inserting_after(last):
                last = carriers[node] = gm.graph.placeholder(f"{node.name}_size_carrier")
    for _, node, value in symbolic:
        example = node.meta.get("example_value", value)
        with gm.graph.inserting_after(last):
            if node in carriers:
                size = gm.graph.call_function(torch.ops.aten.sym_size.int, (carriers[node], 0))
                with gm.graph.inserting_after(size):
                    replacement: Any = gm.graph.call_function(operator.sub, (size, _SIZE_CARRIER_OFFSET))
            elif isinstance(example, torch.SymInt):
                replacement = gm.graph.call_function(torch.ops.aten.sym_size.int, sources[example.node.expr])
            else:
                replacement = example
        node.replace_all_uses_with(replacement)
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    return [(position, carriers[node]) for position, node, _ in symbolic if node in carriers]


# A size carrier's leading size is its integer plus this (kept in step with the C++ side's
# kSizeCarrierOffset): torch.export specializes sizes 0 and 1, so the carried value may be 0 or 1.
_SIZE_CARRIER_OFFSET = 2


def _dynamic_shapes(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node], carriers_from: int) -> tuple[Any, ...] | None:
    """Dimensions Dynamo made symbolic stay symbolic (Dim.AUTO) in the export, as does the leading
    size of every size carrier (nodes from `carriers_from` on)."""
    shapes: list[dict[int, Any] | None] = []
    for k, node in enumerate(nodes):
        if k >= carriers_from:
            shapes.append({0: Dim.AUTO})
            continue
        example = node.meta.get("example_value")
        dims = {d: Dim.AUTO for d, s in enumerate(getattr(example, "shape", ())) if isinstance(s, torch.SymInt)}
        shapes.append(dims or None)
    if not any(shapes):
        return None
    # torch.export matches dynamic_shapes against forward's signature, which for GraphModules is
    # either the placeholders or a single *args.
    parameters = list(inspect.signature(gm.forward).parameters.values())
    if parameters and parameters[0].kind is inspect.Parameter.VAR_POSITIONAL:
        return (tuple(shapes),)
    return tuple(shapes)


def _serialize(exported: torch.export.ExportedProgram) -> bytes:
    # The example inputs include the module's parameters: never write them into the archive.
    exported._example_inputs = None
    if _sums_as_additions(exported.graph_module.graph):
        exported.graph_module.recompile()
    for node in exported.graph.nodes:
        node.meta.pop("from_node", None)  # provenance chains are large and unused
    buffer = io.BytesIO()
    torch.export.save(exported, buffer)
    archive = buffer.getvalue()
    with zipfile.ZipFile(io.BytesIO(archive)) as saved:
        if any(name.endswith("archive_format") for name in saved.namelist()):
            return archive
    return _pt2_archive_for_old_torch(exported)


def _sums_as_additions(graph: torch.fx.Graph) -> bool:
    """Rewrites each torch.sym_sum of sizes into a chain of additions; returns whether it changed
    the graph. torch.export refuses sym_sum (its serializer does not list it among its symbolic
    ops; torch 2.6's verifier refuses it in the graph), so a graph holding one ran in eager whole:
    transformers' caches sum their lengths with it under dynamic shapes, which made every decode
    step of a Llama's generate() after the first run in eager. Applied to Dynamo's graph before the
    export and to the exported graph before it is saved (the export may trace new ones)."""
    sym_sum = getattr(torch, "sym_sum", None)
    sums = [n for n in graph.nodes if sym_sum is not None and n.op == "call_function" and n.target is sym_sum]
    changed = False
    for node in sums:
        sizes = [term for term in node.args[0] if isinstance(term, torch.fx.Node)]
        number = sum(term for term in node.args[0] if not isinstance(term, torch.fx.Node))
        if not sizes:
            continue  # numbers alone: export folds those; left as it is
        with graph.inserting_before(node):
            total = sizes[0]
            for term in [*sizes[1:], *([number] if number else [])]:  # integers: any order sums alike
                addition = graph.call_function(operator.add, (total, term))
                for key in ("val", "example_value"):  # the traced value, where the terms have one
                    if key in total.meta and (not isinstance(term, torch.fx.Node) or key in term.meta):
                        addition.meta[key] = total.meta[key] + (
                            term.meta[key] if isinstance(term, torch.fx.Node) else term
                        )
                total = addition
        node.replace_all_uses_with(total)
        graph.erase_node(node)
        changed = True
    return changed


def _non_finite_as_strings(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _non_finite_as_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_non_finite_as_strings(v) for v in value]
    return value


def _pt2_archive_for_old_torch(exported: torch.export.ExportedProgram) -> bytes:
    """torch < 2.7 saves a different zip layout; the C++ core reads the PT2 archive layout, so
    luminal writes that itself: the same program JSON, lifted constants as raw bytes."""
    from torch._export.serde import serialize as serde

    # Old serializers write non-finite floats as bare Infinity/NaN (not JSON); newer ones as strings.
    program_json = json.dumps(_non_finite_as_strings(json.loads(serde.serialize(exported).exported_program)))
    config: dict[str, Any] = {}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/archive_format", "pt2")
        archive.writestr("archive/archive_version", "0")
        archive.writestr("archive/byteorder", sys.byteorder)
        archive.writestr("archive/models/model.json", program_json)
        archive.writestr("archive/data/weights/model_weights_config.json", json.dumps({"config": {}}))
        for k, (name, value) in enumerate(exported.constants.items()):
            if not isinstance(value, torch.Tensor):
                raise LuminalError(f"constant '{name}' of type {type(value).__name__} is not supported")
            tensor = value.detach().contiguous().cpu()
            path = f"tensor_{k}"
            raw = tensor.reshape(-1).view(torch.uint8).numpy().tobytes()  # reshape: 0-d tensors too
            archive.writestr(f"archive/data/constants/{path}", raw)
            meta = serde._dataclass_to_dict(serde.serialize_tensor_meta(tensor))
            config[name] = {"path_name": path, "is_param": False, "use_pickle": False, "tensor_meta": meta}
        constants = json.dumps({"config": config}, cls=serde.EnumEncoder)
        archive.writestr("archive/data/constants/model_constants_config.json", constants)
    return buffer.getvalue()


def output_spec(exported: torch.export.ExportedProgram) -> pytree.TreeSpec | None:
    for entry in exported.module_call_graph:
        if entry.fqn == "" and entry.signature is not None:
            return entry.signature.out_spec
    return None


@contextlib.contextmanager
def _luminal_export(args: Sequence[Any] = (), dynamic: bool = False) -> Iterator[None]:
    """Marks exports done by luminal so that the guards-function hook below applies to them only.
    With CUDA tensors among `args`, attention is exported without the fused kernels whose nodes
    torch.export cannot serialize, which made the whole graph fall back: the flash kernel always
    (it returns uint64 RNG state; what sdpa dispatches to for, e.g., one unmasked half-precision
    query), and under `dynamic` shapes the cuDNN kernel too (it returns the longest query and key
    lengths as SymInts, which the serializer refuses: every half-precision transformer fell back
    at its second sequence length). The memory-efficient kernel exports, and luminal translates
    each of them to the same attention node."""
    _install_guards_fn_hook()
    previous = getattr(_export_scope, "active", False)
    _export_scope.active = True
    try:
        with _serializable_attention(args, dynamic):
            yield
    finally:
        _export_scope.active = previous


def _serializable_attention(args: Sequence[Any], dynamic: bool) -> contextlib.AbstractContextManager[Any]:
    on_cuda = any(isinstance(a, torch.Tensor) and a.device.type == "cuda" for a in pytree.tree_leaves(list(args)))
    if not on_cuda:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    excluded = {SDPBackend.FLASH_ATTENTION, SDPBackend.ERROR}
    if dynamic:
        excluded.add(SDPBackend.CUDNN_ATTENTION)
    allowed = [b for b in SDPBackend.__members__.values() if b not in excluded]
    return sdpa_kernel(allowed)


_hook_installed = False


def _install_guards_fn_hook() -> None:
    """torch.export's unlift step can insert a `_guards_fn` that closes over Dynamo's locals `L`;
    re-running the graph outside Dynamo then fails with NameError. Our exports never need those
    guards (Dynamo already guards the call), so they are disabled for luminal's exports only."""
    global _hook_installed
    if _hook_installed:
        return
    try:
        from torch.export import _unlift
    except ImportError:
        return
    original: Callable[[], bool] | None = getattr(_unlift, "_ok_to_generate_guards_fn", None)
    if original is None:
        _hook_installed = True
        return

    def ok_to_generate_guards_fn() -> bool:
        if getattr(_export_scope, "active", False):
            return False
        return original()

    _unlift._ok_to_generate_guards_fn = ok_to_generate_guards_fn
    _hook_installed = True
