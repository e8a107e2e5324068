"""Snapshots of the CUDA source luminal generates for reference models, to show that a refactor
left code generation unchanged (byte for byte) or to see exactly what a change changed.

    python tools/codegen_snapshot.py write DIR   # one .cu file per compiled graph
    python tools/codegen_snapshot.py check DIR   # regenerate and compare; exit 1 on any difference

Runs on a machine without a GPU: the graphs are exported and compiled on the CPU and the CUDA
module is generated without launching it (``CompiledFunction.cuda_source``). The models: the DLRM
example (mini and Kaggle-shaped, megakernel on and off) and zoo decoders and encoders in f32 and
bf16, plus small vision models (convolutions, pooling, normalization).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "dlrm"))
sys.path.insert(0, str(ROOT))

import luminal  # noqa: E402
from model import DLRM, KAGGLE, MINI, make_inputs  # noqa: E402
from tests.models.zoo import ZOO, available  # noqa: E402

Case = Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]


def _dlrm(config: Any, batch: int) -> Case:
    def build() -> tuple[Callable[..., Any], tuple[Any, ...]]:
        torch.manual_seed(0)
        model = DLRM(config).eval()
        return model, make_inputs(config, batch, generator=torch.Generator().manual_seed(0))

    return build


def _zoo(name: str, dtype: torch.dtype) -> Case:
    def build() -> tuple[Callable[..., Any], tuple[Any, ...]]:
        entry = next(entry for entry in ZOO if entry.name == name)
        _, forward, inputs = entry.build("cpu", dtype)
        return forward, inputs

    return build


CASES: dict[str, tuple[Case, dict[str, Any]]] = {
    "dlrm_mini_megakernel": (_dlrm(MINI, 2048), {}),
    "dlrm_mini_general": (_dlrm(MINI, 2048), {"megakernel": False}),
    "dlrm_kaggle": (_dlrm(KAGGLE, 2048), {"megakernel": False}),
    "dlrm_kaggle_megakernel": (_dlrm(KAGGLE, 2048), {}),
    "llama_f32": (_zoo("llama", torch.float32), {}),
    "llama_bf16": (_zoo("llama", torch.bfloat16), {}),
    "gpt2_f32": (_zoo("gpt2", torch.float32), {}),
    "qwen3_moe_f32": (_zoo("qwen3_moe", torch.float32), {}),
    "bert_f32": (_zoo("bert", torch.float32), {}),
    "tv_resnet18_f32": (_zoo("tv_resnet18", torch.float32), {}),
    "tv_resnet18_bf16": (_zoo("tv_resnet18", torch.bfloat16), {}),
    "tv_mobilenet_v3_small_f32": (_zoo("tv_mobilenet_v3_small", torch.float32), {}),
}


def generate(name: str) -> list[str]:
    """The CUDA module of every graph Dynamo hands luminal for case `name`, in capture order."""
    build, options = CASES[name]
    captured: list[Any] = []

    def backend(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> Any:
        compiled = luminal.luminal_backend(gm, inputs, options={"strict": True, **options})
        captured.append(compiled)
        return compiled

    torch._dynamo.reset()
    forward, inputs = build()
    with torch.no_grad():
        torch.compile(forward, backend=backend)(*inputs)
    return [compiled.cuda_source() for compiled in captured]


def files_of(name: str) -> dict[str, str]:
    sources = generate(name)
    if len(sources) == 1:
        return {f"{name}.cu": sources[0]}
    return {f"{name}.{k}.cu": source for k, source in enumerate(sources)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["write", "check"])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--only", nargs="+", choices=sorted(CASES), help="cases to run (default: all)")
    args = parser.parse_args()
    names = args.only or list(CASES)
    differences = 0
    for name in names:
        library = next((entry.library for entry in ZOO if entry.name == name.rsplit("_", 1)[0]), "torch")
        if library != "torch" and not available(library):
            print(f"{name}: skipped ({library} is not installed)")
            continue
        for file, source in files_of(name).items():
            path = args.directory / file
            if args.mode == "write":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(source)
                print(f"{file}: {len(source)} bytes written")
                continue
            old = path.read_text() if path.exists() else ""
            if old == source:
                print(f"{file}: identical ({len(source)} bytes)")
                continue
            differences += 1
            diff = difflib.unified_diff(old.splitlines(), source.splitlines(), str(path), "generated", lineterm="", n=1)
            print(f"{file}: DIFFERENT\n" + "\n".join(list(diff)[:80]))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
