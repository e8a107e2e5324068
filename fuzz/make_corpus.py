"""Writes the fuzzers' seed corpus (fuzz/corpus/*.pt2): small archives saved by torch.export.save.

Regenerate (from the repository root) with:

    .venv/bin/python fuzz/make_corpus.py

Each model covers a different part of the format and of the translators: weights (a linear
layer), a dynamic dimension (symbolic sizes, sym_size nodes, sympy expressions), lifted tensor
constants with a buffer and an in-place update of an input, integer index inputs (embedding and
gather), and a reduction with softmax. Every archive is also written in a "slim" form whose node
metadata (stack traces, module stacks) is dropped: the reader ignores it, and smaller inputs let
the fuzzer's mutations land on the structure more often. Hand-written hostile variants (deep sympy and
JSON nesting, overflowing sizes, invalid UTF-8, deflated entries, which the reader refuses: torch stores
entries uncompressed) go to fuzz/regressions/crafted_*.pt2. Archives stay below 20 KB (checked).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.export import Dim

HERE = Path(__file__).resolve().parent / "corpus"
REGRESSIONS = Path(__file__).resolve().parent / "regressions"
MAX_BYTES = 20_000


class Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class DynamicElementwise(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.relu(x) * 2.0 + 1.0).view(x.shape[0], -1).sum(-1)


class Constants(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor([0.5, 2.0, 4.0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1.0)
        return x * self.scale + torch.tensor([1.0, 2.0, 3.0])


class Indexing(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(6, 2)

    def forward(self, ids: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return torch.gather(self.table(ids).sum(-1), 1, rows)


class Softmax(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1).amax(-1)


def programs() -> dict[str, torch.export.ExportedProgram]:
    export = torch.export.export
    return {
        "linear": export(Linear().eval(), (torch.randn(2, 4),)),
        "dynamic": export(DynamicElementwise(), (torch.randn(3, 2, 4),), dynamic_shapes={"x": {0: Dim.AUTO}}),
        "constants": export(Constants(), (torch.zeros(2, 3),)),
        "indexing": export(
            Indexing().eval(),
            (torch.tensor([[0, 5], [3, 1]]), torch.tensor([[1, 0], [0, 0]])),
        ),
        "softmax": export(Softmax(), (torch.randn(1, 3, 4), torch.randn(1, 5, 4))),
    }


def saved_bytes(program: torch.export.ExportedProgram) -> bytes:
    buffer = io.BytesIO()
    torch.export.save(program.run_decompositions(), buffer)
    return buffer.getvalue()


def slim(archive: bytes, compression: int = zipfile.ZIP_STORED) -> bytes:
    """The same archive with every node's metadata emptied and without the pickled sample inputs
    (which the reader never opens), the other entries in the same order."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as source, zipfile.ZipFile(out, "w", compression) as target:
        for info in source.infolist():
            if "/sample_inputs/" in info.filename:
                continue
            data = source.read(info)
            if "/models/" in info.filename and info.filename.endswith(".json"):
                program = json.loads(data)
                for node in program["graph_module"]["graph"]["nodes"]:
                    node["metadata"] = {}
                data = json.dumps(program, separators=(",", ":")).encode()
            target.writestr(info.filename, data)
    return out.getvalue()


def rewrite_entry(archive: bytes, suffix: str, edit: Callable[[bytes], bytes]) -> bytes:
    """The archive with the entry whose name ends with `suffix` replaced by edit(its bytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            target.writestr(info.filename, edit(data) if info.filename.endswith(suffix) else data)
    return out.getvalue()


def edit_json(edit: Callable[[dict[str, Any]], None]) -> Callable[[bytes], bytes]:
    def apply(data: bytes) -> bytes:
        document = json.loads(data)
        edit(document)
        return json.dumps(document, separators=(",", ":")).encode()

    return apply


def graph_of(program: dict[str, Any]) -> dict[str, Any]:
    return program["graph_module"]["graph"]


def nest_first_size(depth: int) -> Callable[[dict[str, Any]], None]:
    """Wraps the first symbolic size of every tensor in `depth` Add(0, ...) calls."""

    def edit(program: dict[str, Any]) -> None:
        for meta in graph_of(program)["tensor_values"].values():
            size = meta["sizes"][0]
            if "as_expr" in size:
                size["as_expr"]["expr_str"] = "Add(Integer(0), " * depth + size["as_expr"]["expr_str"] + ")" * depth

    return edit


def deep_metadata(data: bytes) -> bytes:
    """50,000 nested arrays in the first node's metadata (written as text: json.dumps recurses)."""
    depth = 50_000
    return data.replace(b'"metadata":{}', b'"metadata":{"deep":' + b"[" * depth + b"]" * depth + b"}", 1)


def huge_sizes(program: dict[str, Any]) -> None:
    meta = graph_of(program)["tensor_values"]["x"]
    meta["sizes"][1] = {"as_int": 2**62}
    meta["strides"][0] = {"as_int": 2**63 - 1}


def overflowing_weight(config: dict[str, Any]) -> None:
    for entry in config["config"].values():
        entry["tensor_meta"]["sizes"] = [{"as_int": 2**62}, {"as_int": 2**62}]
        entry["tensor_meta"]["strides"] = [{"as_int": 2**62}, {"as_int": 1}]


def invalid_utf8(data: bytes) -> bytes:
    """Every "relu" name spelled with bytes that are not UTF-8."""
    return data.replace(b'"relu"', b'"rel\xc3\xff"')


def hostile(slim_archives: dict[str, bytes]) -> dict[str, bytes]:
    """Hand-written hostile archives, kept with the fuzzers' regression inputs: each must be
    accepted or rejected with a luminal::Error, never crash, hang or allocate what it declares."""
    dynamic, linear = slim_archives["dynamic"], slim_archives["linear"]
    model, weights = "models/model.json", "_weights_config.json"
    return {
        # 400 levels parse (the limit is 512) and reach translation; 600 are refused.
        "crafted_sympy_nesting_400.pt2": rewrite_entry(dynamic, model, edit_json(nest_first_size(400))),
        "crafted_sympy_nesting_600.pt2": rewrite_entry(dynamic, model, edit_json(nest_first_size(600))),
        "crafted_json_nesting.pt2": rewrite_entry(dynamic, model, deep_metadata),
        "crafted_huge_sizes.pt2": rewrite_entry(dynamic, model, edit_json(huge_sizes)),
        "crafted_weight_overflow.pt2": rewrite_entry(linear, weights, edit_json(overflowing_weight)),
        "crafted_invalid_utf8.pt2": rewrite_entry(dynamic, model, invalid_utf8),
        "crafted_deflated.pt2": slim(linear, zipfile.ZIP_DEFLATED),  # refused: compressed entries
    }


def main() -> None:
    torch.manual_seed(0)
    HERE.mkdir(exist_ok=True)
    slim_archives = {}
    for name, program in programs().items():
        archive = saved_bytes(program)
        slim_archives[name] = slim(archive)
        variants = [("", archive), ("_slim", slim_archives[name])]
        for suffix, data in variants:
            path = HERE / f"{name}{suffix}.pt2"
            path.write_bytes(data)
            assert len(data) < MAX_BYTES, f"{path.name} is {len(data)} bytes; seeds stay < {MAX_BYTES}"
            print(f"{path.name}: {len(data)} bytes")
    for file_name, data in hostile(slim_archives).items():
        (REGRESSIONS / file_name).write_bytes(data)
        print(f"regressions/{file_name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
