"""``luminal.explain(model, *inputs)``: what luminal would make of a model, before relying on it.

Runs the model once through Dynamo with a recording backend (the model itself runs in eager), and
for every graph Dynamo captures reports the ATen ops after decomposition, the ops luminal does not
support (they would run in eager, see ``luminal.fallback``), and for fully supported graphs
whether the DLRM megakernel would run on CUDA, or which check declined it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from luminal import _C
from luminal._C import LuminalError
from luminal.backend import export_program
from luminal.fallback import LuminalSupport, describe_unsupported, target_name, unsupported_nodes


@dataclass
class GraphReport:
    """One Dynamo graph."""

    ops: dict[str, int]  # ATen target -> number of nodes
    unsupported: dict[str, list[str]]  # target -> nodes that would run in eager
    megakernel: bool | None = None  # None when the graph was not compiled (unsupported ops)
    megakernel_reason: str = ""
    error: str = ""  # a compile error other than unsupported ops

    @property
    def fully_supported(self) -> bool:
        return not self.unsupported and not self.error


@dataclass
class Explanation:
    graphs: list[GraphReport] = field(default_factory=list)

    @property
    def graph_breaks(self) -> int:
        return max(len(self.graphs) - 1, 0)

    @property
    def unsupported(self) -> dict[str, list[str]]:
        merged: dict[str, list[str]] = {}
        for graph in self.graphs:
            for target, nodes in graph.unsupported.items():
                merged.setdefault(target, []).extend(nodes)
        return merged

    def __str__(self) -> str:
        lines = [f"luminal: {len(self.graphs)} graph(s), {self.graph_breaks} graph break(s)"]
        for k, graph in enumerate(self.graphs):
            total = sum(graph.ops.values())
            lines.append(f"graph {k}: {total} ATen op node(s), {len(graph.ops)} distinct target(s)")
            if graph.unsupported:
                lines.append(f"  runs partly in eager: {describe_unsupported(graph.unsupported)}")
            elif graph.error:
                lines.append(f"  does not compile: {graph.error}")
            else:
                lines.append("  fully supported")
                verdict = "one megakernel per call on CUDA" if graph.megakernel else "general path on CUDA"
                lines.append(f"  {verdict}: {graph.megakernel_reason}")
        return "\n".join(lines)


def explain(model: Any, *args: Any, **kwargs: Any) -> Explanation:
    """Reports what luminal supports of ``model(*args, **kwargs)``; the model runs once in eager."""
    explanation = Explanation()
    support = LuminalSupport()

    def recorder(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        program, _, roles = export_program(gm, example_inputs)
        ops = Counter(target_name(n.target) for n in program.graph.nodes if n.op == "call_function")
        report = GraphReport(ops=dict(ops), unsupported=unsupported_nodes(program.graph, support))
        if not report.unsupported:
            from luminal.backend import _serialize  # noqa: PLC0415

            try:
                compiled = _C.compile(_serialize(program), list(roles), True)
                stats = compiled.stats()
                report.megakernel = bool(stats["megakernel"])
                report.megakernel_reason = str(stats["megakernel_reason"])
            except LuminalError as error:
                report.error = str(error).splitlines()[0]
        explanation.graphs.append(report)
        return gm.forward

    torch.compile(model, backend=recorder)(*args, **kwargs)
    return explanation
