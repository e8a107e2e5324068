"""``luminal.explain(model, *inputs)``: what luminal would make of a model, before relying on it.

Runs the model once through Dynamo with a recording backend (the model itself runs in eager), and
for every graph Dynamo captures reports the ATen ops after decomposition, the ops luminal does not
support and why (they would run in eager, see ``luminal.fallback``; all found in one pass of the
translator), the share of ops and of FLOPs luminal would run, whether the whole graph would run in
eager (autograd, outputs luminal cannot alias, an export failure), and for fully supported graphs
whether the DLRM megakernel would run on CUDA, or which check declined it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from luminal import _C
from luminal.export import _serialize, export_program
from luminal.fallback import compute_nodes, eager_nodes, find_refusals, target_name
from luminal.flops import shares
from luminal.guards import alias_plan, autograd_reason
from luminal.policy import describe_error, first_line


@dataclass
class GraphReport:
    """One Dynamo graph."""

    ops: dict[str, int]  # ATen target -> number of nodes
    unsupported: dict[str, list[str]]  # target -> nodes that would run in eager
    reasons: dict[str, str] = field(default_factory=dict)  # node -> why it would run in eager
    megakernel: bool | None = None  # None when the graph was not compiled (unsupported ops)
    megakernel_reason: str = ""
    error: str = ""  # a compile error other than unsupported ops
    eager_reason: str = ""  # why the whole graph would run in eager (autograd, aliasing, export)
    luminal_node_share: float = 1.0  # of the compute nodes, the share luminal would run
    luminal_flop_share: float = 1.0  # of the estimated FLOPs, the share luminal would run

    @property
    def fully_supported(self) -> bool:
        return not self.unsupported and not self.error and not self.eager_reason


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
            lines.append(
                f"graph {k}: {total} ATen op node(s), {len(graph.ops)} distinct target(s); luminal runs "
                f"{graph.luminal_node_share:.0%} of the ops, {graph.luminal_flop_share:.1%} of the FLOPs"
            )
            if graph.eager_reason:
                lines.append(f"  runs in eager: {graph.eager_reason}")
            elif graph.unsupported:
                described = "; ".join(
                    f"{target.removeprefix('torch.ops.')} ({', '.join(nodes)}): "
                    + "; ".join(sorted({graph.reasons.get(n, "") for n in nodes}))
                    for target, nodes in sorted(graph.unsupported.items())
                )
                lines.append(f"  runs partly in eager: {described}")
            elif graph.error:
                lines.append(f"  does not compile: {graph.error}")
            else:
                lines.append("  fully supported")
                verdict = (
                    "one megakernel per call on CUDA where it measures faster than the general path"
                    if graph.megakernel
                    else "general path on CUDA"
                )
                lines.append(f"  {verdict}: {graph.megakernel_reason}")
        return "\n".join(lines)


def _graph_report(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> GraphReport:
    plan = alias_plan(gm)
    eager_reason = autograd_reason(gm) or (plan if isinstance(plan, str) else "")
    try:
        program, _, roles = export_program(gm, example_inputs)
    except Exception as error:  # noqa: BLE001  (reported, not raised: explaining must not fail)
        return GraphReport(
            ops={},
            unsupported={},
            eager_reason=eager_reason or f"torch.export failed: {first_line(error)}",
            luminal_node_share=0.0,
            luminal_flop_share=0.0,
        )
    ops = Counter(target_name(n.target) for n in program.graph.nodes if n.op == "call_function")
    report = GraphReport(ops=dict(ops), unsupported={}, eager_reason=eager_reason)
    archive = _serialize(program)
    try:
        eager = eager_nodes(program.graph, find_refusals(program.graph, archive, roles))
    except Exception as error:  # noqa: BLE001
        report.error = describe_error(error).splitlines()[0]
        report.luminal_node_share = report.luminal_flop_share = 0.0
        return report
    for node in eager.values():
        report.unsupported.setdefault(node.target, []).append(node.name)
        report.reasons[node.name] = node.reason
    everything = compute_nodes(program.graph.nodes)
    report.luminal_node_share, report.luminal_flop_share = shares(everything, {n.name for n in everything} - set(eager))
    if eager_reason:
        report.luminal_node_share = report.luminal_flop_share = 0.0
    if not eager:
        try:
            compiled = _C.compile(archive, list(roles), True)
            stats = compiled.stats()
            report.megakernel = bool(stats["megakernel"])
            report.megakernel_reason = str(stats["megakernel_reason"])
        except Exception as error:  # noqa: BLE001
            report.error = describe_error(error).splitlines()[0]
            report.luminal_node_share = report.luminal_flop_share = 0.0
    return report


def explain(model: Any, *args: Any, **kwargs: Any) -> Explanation:
    """Reports what luminal supports of ``model(*args, **kwargs)``; the model runs once in eager."""
    explanation = Explanation()

    def recorder(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        explanation.graphs.append(_graph_report(gm, example_inputs))
        return gm.forward

    torch.compile(model, backend=recorder)(*args, **kwargs)
    return explanation
