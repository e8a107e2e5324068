"""What a Dynamo graph needs around luminal's compiled program to behave as it does in eager.

luminal's program is functional: it returns fresh tensors and reads its inputs' values. Eager
semantics go further, and this module finds in the Dynamo graph (its fake ``example_value``s)
where they matter:

- autograd: luminal is inference-only, so a graph whose outputs require grad runs in eager;
- outputs that eager returns as views of inputs (or as the inputs themselves) must alias them: the
  wrapper returns ``input.as_strided(size, stride, offset)`` computed per call, and a fresh base
  output's views as views of it;
- Python scalars Dynamo passes as 0-d tensors and the graph reads with ``.item()`` (module float
  attributes such as BatchNorm's ``eps`` under ``dynamic=True``) are specialized at compile time
  (torch.export cannot trace the data-dependent value); every call checks that the value is still
  the same and runs in eager when it is not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from luminal.policy import EagerPath

Number = bool | int | float


# ------------------------------------------------------------------------------------------------
# Autograd
# ------------------------------------------------------------------------------------------------
def _graph_outputs(gm: torch.fx.GraphModule) -> list[Any]:
    output = gm.graph.output_node().args[0]
    return list(output) if isinstance(output, (tuple, list)) else [output]


def _example(value: Any) -> Any:
    return value.meta.get("example_value") if isinstance(value, torch.fx.Node) else None


def autograd_reason(gm: torch.fx.GraphModule) -> str | None:
    """Why the graph must run in eager for autograd, or None. Dynamo compiles grad-mode and no-grad
    calls as separate graphs, so the grad mode now is the graph's."""
    if not torch.is_grad_enabled():
        return None
    for output in _graph_outputs(gm):
        example = _example(output)
        if isinstance(example, torch.Tensor) and example.requires_grad:
            return (
                f"grad mode is on and output '{output}' requires grad; luminal is inference-only, so the graph "
                "runs in eager and backward() works (compile under torch.no_grad() or torch.inference_mode())"
            )
    return None


# ------------------------------------------------------------------------------------------------
# Scalars Dynamo passes as tensors
# ------------------------------------------------------------------------------------------------
def _is_item_call(node: torch.fx.Node) -> bool:
    return node.op == "call_method" and node.target == "item"


def specialized_scalars(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> dict[int, Number]:
    """Positions and values of the 0-d CPU tensor inputs that Dynamo made from Python scalars and the
    graph only reads with ``.item()``: luminal compiles them as constants."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    found: dict[int, Number] = {}
    for position, (node, value) in enumerate(zip(placeholders, example_inputs, strict=False)):
        if not isinstance(value, torch.Tensor) or value.dim() != 0 or value.device.type != "cpu":
            continue
        if not node.users or not all(_is_item_call(user) for user in node.users):
            continue
        graph_arg = node.meta.get("grapharg")
        if graph_arg is not None and not getattr(graph_arg, "pass_arg_as_tensor", False):
            continue  # a user's tensor: its value may change every call
        found[position] = value.item()
    return found


def inline_scalars(gm: torch.fx.GraphModule, scalars: dict[int, Number]) -> None:
    """Replaces the ``.item()`` reads of the specialized inputs by their values (the placeholders
    stay, unused: the export drops unused inputs)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for position, value in scalars.items():
        for user in list(placeholders[position].users):
            user.replace_all_uses_with(value)  # type: ignore[arg-type]
            gm.graph.erase_node(user)
    gm.recompile()


def _same_scalar(actual: Number, expected: Number) -> bool:
    if isinstance(actual, float) and isinstance(expected, float) and math.isnan(actual) and math.isnan(expected):
        return True
    return actual == expected and type(actual) is type(expected)


# ------------------------------------------------------------------------------------------------
# Outputs aliasing inputs
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Alias:
    output: int  # position among the graph's outputs
    source: int  # position of the call argument (is_input) or of the base output
    is_input: bool
    same: bool  # the output is the input itself
    size: tuple[Any, ...] = ()
    stride: tuple[Any, ...] = ()
    offset: Any = 0  # relative to the source's storage offset, in elements (bytes when `dtype` is set)
    dtype: torch.dtype | None = None  # a view as another dtype (view(dtype), view_as_real): the output's


class _SymbolBinder:
    """Evaluates the symbolic sizes of a dynamic graph's example values for one call: each symbol
    is a size, stride or storage offset of some tensor input, or an integer input."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.sources: dict[Any, tuple[str, int, int]] = {}
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for position, node in enumerate(placeholders):
            example = node.meta.get("example_value")
            if isinstance(example, torch.SymInt):
                self._add(example, ("int", position, 0))
            elif isinstance(example, torch.Tensor):
                for dim, size in enumerate(example.shape):
                    self._add(size, ("size", position, dim))
                for dim, stride in enumerate(example.stride()):
                    self._add(stride, ("stride", position, dim))
                self._add(example.storage_offset(), ("offset", position, 0))

    def _add(self, value: Any, source: tuple[str, int, int]) -> None:
        if isinstance(value, torch.SymInt):
            expr = value.node.expr
            if getattr(expr, "is_Symbol", False):
                self.sources.setdefault(expr, source)

    def can_evaluate(self, value: Any) -> bool:
        if not isinstance(value, torch.SymInt):
            return True
        return all(symbol in self.sources for symbol in value.node.expr.free_symbols)

    def bind(self, args: Sequence[Any]) -> dict[Any, int]:
        values = {}
        for symbol, (kind, position, dim) in self.sources.items():
            argument = args[position]
            if kind == "int":
                values[symbol] = int(argument)
            elif kind == "size":
                values[symbol] = argument.shape[dim]
            elif kind == "stride":
                values[symbol] = argument.stride(dim)
            else:
                values[symbol] = argument.storage_offset()
        return values

    @staticmethod
    def evaluate(value: Any, values: dict[Any, int]) -> int:
        if not isinstance(value, torch.SymInt):
            return int(value)
        return int(value.node.expr.xreplace(values))


class AliasPlan:
    """Which outputs alias inputs (or a fresh base output) and how to rebuild them per call."""

    def __init__(self, aliases: list[_Alias], binder: _SymbolBinder | None) -> None:
        self._aliases = aliases
        self._binder = binder

    def __bool__(self) -> bool:
        return bool(self._aliases)

    def apply(self, args: Sequence[Any], outputs: Any) -> Any:
        results = list(outputs)
        values = self._binder.bind(args) if self._binder is not None else {}
        evaluate = _SymbolBinder.evaluate
        for alias in self._aliases:
            source = args[alias.source] if alias.is_input else results[alias.source]
            if alias.same:
                results[alias.output] = source
                continue
            size = [evaluate(s, values) for s in alias.size]
            stride = [evaluate(s, values) for s in alias.stride]
            if alias.dtype is not None:
                offset_bytes = evaluate(alias.offset, values)
                results[alias.output] = _reinterpreted(source, alias.dtype, size, stride, offset_bytes)
                continue
            offset = source.storage_offset() + evaluate(alias.offset, values)
            results[alias.output] = source.as_strided(size, stride, offset)
        return tuple(results) if isinstance(outputs, tuple) else results


def _reinterpreted(
    source: torch.Tensor, dtype: torch.dtype, size: list[int], stride: list[int], offset_bytes: int
) -> torch.Tensor:
    """A view of the source's memory as another dtype (as_strided keeps the source's dtype): the
    source's storage, `offset_bytes` past its first element."""
    start = source.storage_offset() * source.element_size() + offset_bytes
    if start % dtype.itemsize:
        raise RuntimeError(f"a view as {dtype} would start at byte {start}, not a multiple of its element size")
    return torch.empty(0, dtype=dtype, device=source.device).set_(
        source.untyped_storage(), start // dtype.itemsize, size, stride
    )


def _storage(value: Any) -> StorageWeakRef | None:
    if not isinstance(value, torch.Tensor):
        return None
    try:
        return StorageWeakRef(value.untyped_storage())
    except (RuntimeError, NotImplementedError):
        return None


def _is_base(value: torch.Tensor) -> bool:
    """Does the tensor cover its whole storage, contiguously from offset 0 (a fresh result)? Only
    decided for static layouts: deciding symbolic ones would add guards after Dynamo's tracing."""
    layout = (*value.shape, *value.stride(), value.storage_offset(), value.untyped_storage().nbytes())
    if any(isinstance(v, torch.SymInt) for v in layout):
        return False
    return (
        value.storage_offset() == 0
        and value.is_contiguous()
        and value.numel() * value.element_size() == value.untyped_storage().nbytes()
    )


def alias_plan(gm: torch.fx.GraphModule) -> AliasPlan | str:
    """The outputs that eager returns as views of inputs (or the inputs themselves), and the views
    of a fresh output among the outputs; a reason string when they cannot be rebuilt."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    input_storages: dict[StorageWeakRef, list[int]] = {}
    for position, node in enumerate(placeholders):
        storage = _storage(node.meta.get("example_value"))
        if storage is not None:
            input_storages.setdefault(storage, []).append(position)
    outputs = _graph_outputs(gm)
    output_storages: dict[StorageWeakRef, list[int]] = {}
    aliases: list[_Alias] = []
    binder = _SymbolBinder(gm)
    dynamic = False
    for k, output in enumerate(outputs):
        example = _example(output)
        storage = _storage(example)
        if storage is None:
            continue
        if storage not in input_storages:
            output_storages.setdefault(storage, []).append(k)
            continue
        sources = input_storages[storage]
        if len(sources) > 1:
            return f"output {k} ('{output}') is a view of inputs that share memory ({', '.join(map(str, sources))})"
        source = sources[0]
        source_example = placeholders[source].meta["example_value"]
        alias = _view_of(k, source, True, example, source_example)
        dynamic = dynamic or not alias.same and _symbolic(alias)
        if not all(binder.can_evaluate(v) for v in (*alias.size, *alias.stride, alias.offset)):
            return f"output {k} ('{output}') is a view of input {source} whose layout luminal cannot evaluate per call"
        aliases.append(alias)
    for members in output_storages.values():
        if len(members) < 2:
            continue
        bases = [k for k in members if _is_base(_example(outputs[k]))]
        if not bases:
            continue  # views of one intermediate: values are right; eager's aliasing among them is not kept
        base = bases[0]
        for k in members:
            if k == base:
                continue
            alias = _view_of(k, base, False, _example(outputs[k]), _example(outputs[base]))
            if not all(binder.can_evaluate(v) for v in (*alias.size, *alias.stride, alias.offset)):
                continue
            dynamic = dynamic or _symbolic(alias)
            aliases.append(alias)
    return AliasPlan(aliases, binder if dynamic else None)


def _symbolic(alias: _Alias) -> bool:
    return any(isinstance(v, torch.SymInt) for v in (*alias.size, *alias.stride, alias.offset))


def _view_of(k: int, source: int, is_input: bool, example: torch.Tensor, source_example: torch.Tensor) -> _Alias:
    """Output k as the source itself, or as a view of the source's storage (offset relative to the
    source's own storage offset, so that it holds for any call with the source's layout)."""
    if example is source_example:
        return _Alias(output=k, source=source, is_input=is_input, same=True)
    if example.dtype != source_example.dtype:  # offsets in bytes: the two count different elements
        offset = (
            example.storage_offset() * example.element_size()
            - source_example.storage_offset() * source_example.element_size()
        )
    else:
        offset = example.storage_offset() - source_example.storage_offset()
    return _Alias(
        output=k,
        source=source,
        is_input=is_input,
        same=False,
        size=tuple(example.shape),
        stride=tuple(example.stride()),
        offset=offset,
        dtype=example.dtype if example.dtype != source_example.dtype else None,
    )


# ------------------------------------------------------------------------------------------------
# The wrapper
# ------------------------------------------------------------------------------------------------
class GuardedFunction:
    """A compiled graph plus what keeps it equal to eager: the specialized scalars' check (a
    mismatch runs that call in eager) and the rebuilt output aliases."""

    def __init__(
        self,
        compiled: Callable[..., Any],
        eager: EagerPath,
        scalars: dict[int, Number],
        aliases: AliasPlan | None,
    ) -> None:
        self._compiled = compiled
        self._eager = eager
        self._scalars = tuple(scalars.items())
        self._aliases = aliases if aliases else None

    def __call__(self, *args: Any) -> Any:
        for position, expected in self._scalars:
            actual = args[position].item()
            if not _same_scalar(actual, expected):
                self._eager.warn_once(
                    f"scalar {position}",
                    f"luminal: a call runs in eager: the graph was compiled for scalar argument {position} = "
                    f"{expected!r} (a Python number Dynamo passes as a tensor), this call passes {actual!r}",
                )
                return self._eager(*args)
        outputs = self._compiled(*args)
        if self._aliases is not None:
            outputs = self._aliases.apply(args, outputs)
        return outputs

    def __getattr__(self, name: str) -> Any:  # ir(), stats(), cuda_source(), report() of the compiled graph
        if name.startswith("_"):  # not delegated (and no recursion before __init__ has run)
            raise AttributeError(name)
        return getattr(self._compiled, name)


# ------------------------------------------------------------------------------------------------
# Inputs sharing memory
# ------------------------------------------------------------------------------------------------
def _byte_extent(t: torch.Tensor) -> tuple[int, int]:
    if t.numel() == 0:
        return (0, 0)
    low = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True) if stride < 0)
    high = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True) if stride > 0)
    base = t.data_ptr()
    return base + low * t.element_size(), base + (high + 1) * t.element_size()


def overlapping_inputs(tensors: Sequence[Any], candidates: Sequence[int] | None = None) -> tuple[int, int] | None:
    """A pair (candidate, other) of tensors whose memory may overlap (by byte extent), or None.
    ``candidates``: the positions whose overlap with any other tensor matters (default: all). One
    sweep over the extents sorted by start, as in the C++ binding's check."""
    marked = set(range(len(tensors)) if candidates is None else candidates)
    extents = []
    for k, t in enumerate(tensors):
        if isinstance(t, torch.Tensor):
            start, end = _byte_extent(t)
            if start != end:
                extents.append((str(t.device), start, end, k))
    extents.sort()
    device = None
    reach_any: tuple[int, int] | None = None  # (furthest end so far, its input) on this device
    reach_marked: tuple[int, int] | None = None  # the same among the candidates
    for tensor_device, start, end, k in extents:
        if tensor_device != device:
            device, reach_any, reach_marked = tensor_device, None, None
        if k in marked and reach_any is not None and start < reach_any[0]:
            return k, reach_any[1]
        if reach_marked is not None and start < reach_marked[0]:
            return reach_marked[1], k
        if reach_any is None or end > reach_any[0]:
            reach_any = (end, k)
        if k in marked and (reach_marked is None or end > reach_marked[0]):
            reach_marked = (end, k)
    return None
