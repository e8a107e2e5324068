"""Rough FLOP counts of ATen graph nodes, from the export's tensor metadata (``node.meta["val"]``).

Used to report which share of a model's work luminal runs when part of it falls back to eager:
contractions count 2*M*N*K-style multiply-adds, views count nothing, everything else (elementwise
ops, reductions, gathers) one operation per element of its largest input or output. Symbolic sizes
count at their example values.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from typing import Any

import torch

aten = torch.ops.aten


def _int(value: Any) -> int:
    if isinstance(value, int):
        return value
    try:
        from torch.fx.experimental.symbolic_shapes import hint_int  # noqa: PLC0415

        return int(hint_int(value, fallback=1))
    except (ImportError, TypeError, RuntimeError, ValueError):
        return 1


def _shape(value: Any) -> list[int]:
    return [_int(size) for size in value.shape] if isinstance(value, torch.Tensor) else []


def _numel(value: Any) -> int:
    return math.prod(_shape(value)) if isinstance(value, torch.Tensor) else 0


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _val(argument: Any) -> Any:
    return argument.meta.get("val") if isinstance(argument, torch.fx.Node) else argument


def _matmul_flops(node: torch.fx.Node) -> int | None:
    """2 * (multiply-adds) for the contraction ops; None for any other op."""
    target = node.target
    out = _shape(node.meta.get("val"))
    args = [_val(a) for a in node.args]
    if target in (aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default):
        first = args[1] if target in (aten.addmm.default, aten.baddbmm.default) else args[0]
        inner = _shape(first)[-1] if _shape(first) else 1
        return 2 * math.prod(out) * inner
    if target in (aten.mv.default, aten.addmv.default, aten.dot.default):
        first = args[1] if target == aten.addmv.default else args[0]
        return 2 * _numel(first)
    if target == aten.convolution.default:
        weight = _shape(args[1])  # [C_out, C_in / groups, *kernel] (transposed: [C_in, C_out / groups, ...])
        transposed = bool(args[6]) if len(args) > 6 else False
        if transposed:
            return 2 * _numel(args[0]) * math.prod(weight[1:])
        return 2 * math.prod(out) * math.prod(weight[1:])
    name = str(target)
    if "_grouped_mm" in name:
        a, b = _shape(args[0]), _shape(args[1])
        inner = a[-1] if a else 1
        if len(a) == 2 and len(b) == 2 and out:  # grouped inner dimension: out [G, M, N], K split by groups
            inner = inner // max(out[0], 1)
        return 2 * math.prod(out) * inner
    if "scaled_dot_product" in name or "attention" in name:
        query, key = _shape(args[0]), _shape(args[1])
        if len(query) >= 2 and len(key) >= 2:
            value_dim = _shape(args[2])[-1] if len(args) > 2 and _shape(args[2]) else query[-1]
            batch = math.prod(query[:-2])
            return 2 * batch * query[-2] * key[-2] * (query[-1] + value_dim)
    return None


def _is_view(node: torch.fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return bool(schema and schema.returns and schema.returns[0].alias_info is not None)


def node_flops(node: torch.fx.Node) -> int:
    """Estimated floating-point (or integer) operations of one call_function node."""
    if node.op != "call_function" or node.target is operator.getitem or _is_view(node):
        return 0
    contraction = _matmul_flops(node)
    if contraction is not None:
        return contraction
    sizes = [_numel(t) for t in _tensors(node.meta.get("val"))]
    for argument in node.args:
        sizes.extend(_numel(t) for t in _tensors(_val(argument)))
    return max(sizes, default=0)


def shares(nodes: Iterable[torch.fx.Node], in_luminal: set[str]) -> tuple[float, float]:
    """(share of nodes, share of FLOPs) of ``nodes`` whose names are in ``in_luminal``. A graph
    without FLOPs (only views) reports its node share for both."""
    total_nodes = luminal_nodes = 0
    total_flops = luminal_flops = 0
    for node in nodes:
        flops = node_flops(node)
        total_nodes += 1
        total_flops += flops
        if node.name in in_luminal:
            luminal_nodes += 1
            luminal_flops += flops
    node_share = luminal_nodes / total_nodes if total_nodes else 1.0
    flop_share = luminal_flops / total_flops if total_flops else node_share
    return node_share, flop_share
