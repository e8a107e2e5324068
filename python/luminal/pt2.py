"""Compiling PT2 archives directly (ahead of time, without Dynamo)."""

from __future__ import annotations

import os
from typing import Any

import torch

from luminal import _C


class CompiledProgram:
    """A .pt2 archive compiled by luminal; weights and constants come from the archive."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def __call__(self, *tensors: torch.Tensor) -> list[Any]:
        return self.graph.run(list(tensors))

    def ir(self, optimized: bool = True) -> str:
        return self.graph.ir(optimized)

    def stats(self) -> dict[str, Any]:
        return self.graph.stats()


def load(path: str | os.PathLike[str]) -> CompiledProgram:
    """Compiles a .pt2 file written by ``torch.export.save``.

    Call the result with the exported program's user inputs (tensors, flattened in order); it
    returns the user outputs as a list.
    """
    return CompiledProgram(_C.load(os.fspath(path)))
