"""Writes the fuzzers' seed corpus (fuzz/corpus/*.pt2): small archives saved by torch.export.save.

Regenerate (from the repository root) with:

    .venv/bin/python fuzz/make_corpus.py

Each model covers a different part of the format and of the translators: weights (a linear
layer), a dynamic dimension (symbolic sizes, sym_size nodes, sympy expressions), lifted tensor
constants with a buffer and an in-place update of an input, integer index inputs (embedding and
gather), and a reduction with softmax. Every archive is also written in a "slim" form whose node
metadata (stack traces, module stacks) is dropped: the reader ignores it, and smaller inputs let
the fuzzer's mutations land on the structure more often; the linear layer is also written deflated
(torch stores entries uncompressed). Archives stay below 20 KB (checked).
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import torch
from torch.export import Dim

HERE = Path(__file__).resolve().parent / "corpus"
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


def main() -> None:
    torch.manual_seed(0)
    HERE.mkdir(exist_ok=True)
    for name, program in programs().items():
        archive = saved_bytes(program)
        variants = [("", archive), ("_slim", slim(archive))]
        if name == "linear":  # one deflated archive, so that mutations reach the inflate path
            variants.append(("_deflated", slim(archive, zipfile.ZIP_DEFLATED)))
        for suffix, data in variants:
            path = HERE / f"{name}{suffix}.pt2"
            path.write_bytes(data)
            assert len(data) < MAX_BYTES, f"{path.name} is {len(data)} bytes; seeds stay < {MAX_BYTES}"
            print(f"{path.name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
