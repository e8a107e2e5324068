"""Compiling PT2 archives directly (ahead of time, without Dynamo)."""

from __future__ import annotations

import os
from typing import Any

import torch

from luminal import _C
from luminal._C import LuminalError


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


def load(path: str | os.PathLike[str], max_archive_bytes: int | None = None) -> CompiledProgram:
    """Compiles a .pt2 file written by ``torch.export.save``.

    Call the result with the exported program's user inputs (tensors, flattened in order); it
    returns the user outputs as a list.

    An archive is data: ``max_archive_bytes`` bounds what reading it may allocate (all entries
    together, weights included; default: the environment variable ``LUMINAL_MAX_ARCHIVE_BYTES``,
    else 64 GiB). JSON entries are also bounded (``LUMINAL_MAX_ARCHIVE_JSON_BYTES``, default
    64 MiB). Raises ``LuminalError`` for a file that is missing, not a regular file, a corrupt zip
    or over a limit.
    """
    valid = isinstance(max_archive_bytes, int) and not isinstance(max_archive_bytes, bool)
    if max_archive_bytes is not None and not (valid and 1 <= max_archive_bytes < 2**63):
        raise LuminalError(
            f"max_archive_bytes must be a positive int, got {type(max_archive_bytes).__name__} {max_archive_bytes!r}"
        )
    return CompiledProgram(_C.load(os.fspath(path), max_archive_bytes))
