"""On-disk cache of exported graphs: a warm compile skips torch.export.

torch.export plus the Core-ATen decomposition costs most of a compile (~0.3-0.5 s for a DLRM),
while the Dynamo graph that goes in fully determines the archive that comes out. The key is the
graph's generated code plus every input's type, dtype, shape, strides, device and role, the grad
mode, and the torch and luminal versions. Graphs that read state the code does not show (get_attr
constants, call_module submodules) are never cached.

The cache lives next to the kernel cache: ``$LUMINAL_CACHE_DIR/graphs`` (default
``$XDG_CACHE_HOME/luminal`` or ``~/.cache/luminal``); ``LUMINAL_CACHE_DIR=""`` disables both.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.utils._pytree as pytree

from luminal.decompositions import natively_translated

if TYPE_CHECKING:
    from collections.abc import Sequence

    from luminal.backend import ExportedGraph

log = logging.getLogger("luminal")

_FORMAT = 1  # bump when the stored layout or the export recipe changes


def cache_directory() -> Path | None:
    configured = os.environ.get("LUMINAL_CACHE_DIR")
    if configured is not None:
        return Path(configured) / "graphs" if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "luminal" / "graphs"


def _describe_input(value: Any, role: str | None) -> str:
    if isinstance(value, torch.Tensor):
        return (
            f"tensor {value.dtype} {value.device.type} shape={tuple(value.shape)} "
            f"stride={tuple(value.stride())} grad={value.requires_grad} role={role}"
        )
    return f"{type(value).__name__} {value}"


@functools.cache
def _recipe_fingerprint() -> str:
    """The luminal version and the export code itself: editing the recipe invalidates entries."""
    digest = hashlib.sha256()
    for module in ("backend.py", "decompositions.py", "export_cache.py"):
        digest.update((Path(__file__).parent / module).read_bytes())
    # The ops kept whole by the export depend on the translators the core has.
    digest.update(" ".join(sorted(natively_translated())).encode())
    try:
        digest.update(importlib.metadata.version("luminal").encode())
    except importlib.metadata.PackageNotFoundError:
        pass
    return digest.hexdigest()


def cache_key(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], roles: Sequence[str | None]) -> str | None:
    """The key of this graph's export, or None when the code alone does not determine it."""
    if any(node.op in ("get_attr", "call_module") for node in gm.graph.nodes):
        return None
    parts = [
        f"format {_FORMAT}",
        f"recipe {_recipe_fingerprint()}",
        f"torch {torch.__version__}",
        f"grad {torch.is_grad_enabled()}",
        gm.code,
    ]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value, role in zip(placeholders, example_inputs, roles, strict=True):
        example = node.meta.get("example_value", value)
        parts.append(f"{node.name}: {_describe_input(example, role)} used={bool(node.users)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def load(key: str) -> ExportedGraph | None:
    from luminal.backend import ExportedGraph  # noqa: PLC0415

    directory = cache_directory()
    if directory is None:
        return None
    meta_path, archive_path = directory / f"{key}.json", directory / f"{key}.pt2"
    try:
        meta = json.loads(meta_path.read_text())
        archive = archive_path.read_bytes()
        if hashlib.sha256(archive).hexdigest() != meta["archive_sha256"]:
            raise ValueError("archive does not match its checksum")
        out_spec = pytree.treespec_loads(meta["out_spec"]) if meta["out_spec"] is not None else None
        return ExportedGraph(
            archive=archive,
            tensor_positions=tuple(int(p) for p in meta["tensor_positions"]),
            input_roles=tuple(str(r) for r in meta["input_roles"]),
            out_spec=out_spec,
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        log.warning("luminal: ignoring unreadable export cache entry %s: %s", meta_path, error)
        return None


def store(key: str, exported: ExportedGraph) -> None:
    directory = cache_directory()
    if directory is None:
        return
    try:
        out_spec = pytree.treespec_dumps(exported.out_spec) if exported.out_spec is not None else None
    except (TypeError, NotImplementedError) as error:  # output types pytree cannot serialize
        log.debug("luminal: export not cached: %s", error)
        return
    meta = {
        "tensor_positions": list(exported.tensor_positions),
        "input_roles": list(exported.input_roles),
        "out_spec": out_spec,
        "archive_sha256": hashlib.sha256(exported.archive).hexdigest(),
    }
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # The archive first, its metadata last: a reader never sees metadata without its archive.
        _write_atomically(directory / f"{key}.pt2", exported.archive)
        _write_atomically(directory / f"{key}.json", json.dumps(meta).encode())
    except OSError as error:
        log.warning("luminal: could not write the export cache in %s: %s", directory, error)


def _write_atomically(path: Path, data: bytes) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    try:
        with os.fdopen(descriptor, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
