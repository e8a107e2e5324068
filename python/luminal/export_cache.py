"""On-disk cache of exported graphs: a warm compile skips torch.export.

torch.export plus the Core-ATen decomposition costs most of a compile (~0.3-0.5 s for a DLRM),
while the Dynamo graph that goes in fully determines the archive that comes out. The key is the
graph's generated code plus every input's type, dtype, shape, strides, device and role, the grad
mode, and the torch and luminal versions. Graphs that read state the code does not show (get_attr
constants, call_module submodules) are never cached.

The cache lives next to the kernel cache: ``$LUMINAL_CACHE_DIR/graphs`` (default
``$XDG_CACHE_HOME/luminal`` or ``~/.cache/luminal``); ``LUMINAL_CACHE_DIR=""`` disables both.
Both are bounded together: after every new entry, the least recently used files go until the
cache fits in ``LUMINAL_CACHE_MAX_BYTES`` (default 2 GiB; suffixes K, M, G allowed).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.utils._pytree as pytree

from luminal.decompositions import natively_translated
from luminal.guards import specialized_scalars

if TYPE_CHECKING:
    from collections.abc import Sequence

    from luminal.backend import ExportedGraph

log = logging.getLogger("luminal")

_FORMAT = 2  # bump when the stored layout or the export recipe changes
_DEFAULT_LIMIT_BYTES = 2 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


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


def _concrete_sizes(value: Any) -> str:
    """The sizes (or the value of an integer) a symbolic example input had in this compile."""
    if isinstance(value, torch.Tensor):
        return str([int(s.node.hint) if isinstance(s, torch.SymInt) else int(s) for s in value.shape])
    if isinstance(value, torch.SymInt):
        return str(value.node.hint)
    return ""


@functools.cache
def _recipe_fingerprint() -> str:
    """The luminal version and the export code itself: editing the recipe invalidates entries."""
    digest = hashlib.sha256()
    for module in ("backend.py", "decompositions.py", "export_cache.py", "guards.py"):
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
        # torch.export traces with the concrete sizes behind the symbols and may specialize on them
        # (a decomposition's branch on a size): the same symbolic graph with other sizes is another key.
        parts.append(f"  concrete: {_concrete_sizes(value)}")
    # Scalars the export bakes in (see guards.specialized_scalars): their values are part of the key.
    for position, scalar in sorted(specialized_scalars(gm, example_inputs).items()):
        parts.append(f"scalar {position} = {scalar!r}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def load(key: str) -> ExportedGraph | None:
    from luminal.backend import CallLayout, ExportedGraph  # noqa: PLC0415

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
        for used in (archive_path, meta_path):  # recently used: the last to be evicted
            os.utime(used)
        return ExportedGraph(
            archive=archive,
            layout=CallLayout(
                tuple(int(p) for p in meta["tensor_positions"]), tuple(int(p) for p in meta["size_positions"])
            ),
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
        "tensor_positions": list(exported.layout.tensors),
        "size_positions": list(exported.layout.sizes),
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
        return
    _enforce_limit(directory.parent, len(exported.archive))


# Per cache root, what this process last measured (bytes, bytes stored since, when), so that a store
# scans the directory only when the cache may have outgrown its limit, or after a while (other
# processes and the kernel cache grow it too).
_RESCAN_SECONDS = 60.0
_measured: dict[Path, tuple[int, int, float]] = {}


def _enforce_limit(root: Path, added_bytes: int) -> None:
    limit = cache_limit_bytes()
    measured, added, at = _measured.get(root, (-1, 0, 0.0))
    added += added_bytes
    if measured >= 0 and time.monotonic() - at < _RESCAN_SECONDS and measured + added <= limit:
        _measured[root] = (measured, added, at)
        return
    freed, remaining = _prune(root, limit)
    _measured[root] = (remaining, 0, time.monotonic())
    if freed:
        log.info("luminal: cache over %d bytes, removed %d bytes of least recently used entries", limit, freed)


def cache_limit_bytes() -> int:
    """LUMINAL_CACHE_MAX_BYTES: a byte count, optionally with a K, M or G suffix."""
    text = os.environ.get("LUMINAL_CACHE_MAX_BYTES", "").strip().upper()
    if not text:
        return _DEFAULT_LIMIT_BYTES
    unit = text[-1] if text[-1] in _UNITS else ""
    number = text[: len(text) - len(unit)].strip()
    if not number.isdigit():
        log.warning("luminal: ignoring LUMINAL_CACHE_MAX_BYTES=%r (not a size)", text)
        return _DEFAULT_LIMIT_BYTES
    return int(number) * _UNITS[unit]


def prune(root: Path, limit_bytes: int) -> int:
    """Deletes the least recently used cache files (kernels in `root`, exported graphs in
    `root/graphs`) until the rest fit in `limit_bytes`. Returns the bytes freed. Files that another
    process removes or replaces meanwhile are skipped."""
    return _prune(root, limit_bytes)[0]


def _prune(root: Path, limit_bytes: int) -> tuple[int, int]:
    """prune(), also returning the bytes that remain."""
    entries = []
    for pattern in ("*.cubin", "graphs/*.pt2", "graphs/*.json"):
        for path in root.glob(pattern):
            try:
                info = path.stat()
            except OSError:
                continue
            entries.append((info.st_mtime, info.st_size, path))
    total = sum(size for _, size, _ in entries)
    freed = 0
    for _, size, path in sorted(entries, key=lambda entry: entry[0]):
        if total - freed <= limit_bytes:
            break
        try:
            path.unlink()
        except OSError:
            continue
        freed += size
    return freed, total - freed


def _write_atomically(path: Path, data: bytes) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    try:
        with os.fdopen(descriptor, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
