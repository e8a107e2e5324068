"""Which ATen targets luminal translates, measured against torch's Core ATen operator set.

    python -m luminal.coverage          # summary, missing Core ATen ops, exclusions with reasons
    python -m luminal.coverage --json   # the same as JSON

Core ATen = the overloads tagged ``torch.Tag.core`` in the installed torch. Exclusions are
overloads that make no sense for an inference compiler; each carries its reason. Targets that the
core accepts without a translator (symbolic-size arithmetic, export-time assertions) count as
supported.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass

import torch

from luminal import _C

# (pattern over the overload name "torch.ops.aten.<op>.<overload>", reason); first match wins.
EXCLUSIONS: list[tuple[str, str]] = [
    (r"_backward(_data|_input)?\.", "training only: gradients are computed by autograd, not at inference"),
    (r"\.native_dropout\.", "training only: dropout is the identity at inference (eval mode)"),
    (r"\.(rand|randn|randperm|bernoulli|normal|uniform|exponential|multinomial)\.", "random number generation"),
    (r"\.out$", "out= variant: exported graphs are functional and never contain it"),
    (r"\._fft_", "FFTs: complex values are computed only by polar, view_as_complex/real, mul"),
    (r"\._local_scalar_dense\.", "copies a tensor value to the host (.item()): a data-dependent host sync"),
    (r"\.nonzero\.", "data-dependent output shape: runs in eager through the fallback"),
]


@dataclass
class Coverage:
    torch_version: str
    supported: list[str]
    core: list[str]
    core_supported: list[str]
    core_missing: list[str]
    core_excluded: dict[str, str]  # target -> reason

    @property
    def core_inference(self) -> int:
        return len(self.core) - len(self.core_excluded)


def core_aten_targets() -> list[str]:
    found = []
    for name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, name, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if torch.Tag.core in op.tags:
                found.append(f"torch.ops.{op}")
    return sorted(found)


def exclusion_reason(target: str) -> str | None:
    for pattern, reason in EXCLUSIONS:
        if re.search(pattern, target):
            return reason
    return None


def measure() -> Coverage:
    supported = sorted(set(_C.supported_targets()) | set(_C.passthrough_targets()))
    supported_set = set(supported)
    core = core_aten_targets()
    excluded = {t: r for t in core if t not in supported_set and (r := exclusion_reason(t)) is not None}
    return Coverage(
        torch_version=torch.__version__,
        supported=supported,
        core=core,
        core_supported=[t for t in core if t in supported_set],
        core_missing=[t for t in core if t not in supported_set and t not in excluded],
        core_excluded=excluded,
    )


def render(coverage: Coverage) -> str:
    lines = [
        f"luminal supports {len(coverage.supported)} targets (torch {coverage.torch_version})",
        f"Core ATen: {len(coverage.core)} overloads, {len(coverage.core_excluded)} excluded, "
        f"{len(coverage.core_supported)} of {coverage.core_inference} for inference supported, "
        f"{len(coverage.core_missing)} missing",
    ]
    if coverage.core_missing:
        lines.append("missing Core ATen overloads:")
        lines += [f"  {t.removeprefix('torch.ops.')}" for t in coverage.core_missing]
    lines.append("excluded Core ATen overloads:")
    lines += [f"  {t.removeprefix('torch.ops.')}: {r}" for t, r in sorted(coverage.core_excluded.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    coverage = measure()
    if args.json:
        report = asdict(coverage)
        report["core_inference"] = coverage.core_inference
        print(json.dumps(report, indent=1))
    else:
        print(render(coverage))
    return 0


if __name__ == "__main__":
    sys.exit(main())
