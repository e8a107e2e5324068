"""On-disk cache of exported graphs: a warm compile skips torch.export.

torch.export plus the Core-ATen decomposition costs most of a compile (~0.3-0.5 s for a DLRM),
while the Dynamo graph that goes in fully determines the archive that comes out. The key is the
graph's generated code plus every input's type, dtype, shape, strides, device and role, the grad
mode, and the torch and luminal versions. Graphs that read state the code does not show (get_attr
constants, call_module submodules) are never cached.

The cache lives next to the kernel cache, in ``<cache root>/graphs``. The root is resolved by the
core (``_C.cache_directory``, one implementation for both caches): ``LUMINAL_CACHE_DIR`` (``~``
and ``~/...`` expanded, a relative path made absolute at first use, ``""`` disables both caches),
else ``$XDG_CACHE_HOME/luminal`` or ``~/.cache/luminal``; a directory that cannot be used turns
caching off with one LuminalCacheWarning. Both caches are bounded together: after every new entry,
the least recently used files go until the cache fits in ``LUMINAL_CACHE_MAX_BYTES`` (default
2 GiB; suffixes K, M, G allowed).

An entry is one file, ``<key>.graph``: a header (magic, format, lengths, a sha256 over header,
metadata and archive), the metadata JSON (which names the key) and the PT2 archive. It is written
to a temporary file and renamed into place, so a reader sees one writer's whole entry or none. It
is read without following links or blocking, only when a regular file no larger than the cache
limit, and its metadata is checked against this compile's inputs. A bad entry is removed, the graph
exported again, and a LuminalCacheWarning naming the file is given once per process and path.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import stat
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.utils._pytree as pytree

from luminal import _C
from luminal.decompositions import natively_translated
from luminal.export import CallLayout, ExportedGraph, _input_role, _require_one_device, export_graph
from luminal.guards import specialized_scalars
from luminal.policy import LuminalCacheWarning, report_core_notices, warn_once
from luminal.settings import DEFAULT_CACHE_LIMIT_BYTES, settings

if TYPE_CHECKING:
    from collections.abc import Sequence

log = logging.getLogger("luminal")

_FORMAT = 3  # bump when the stored layout or the export recipe changes
_SUFFIX = ".graph"
_MAGIC = b"LMGRAPH\n"
_HEADER = struct.Struct("<8sIIQ")  # magic, format, metadata bytes, archive bytes; then the sha256
_PREFIX_BYTES = _HEADER.size + 32  # the header and the sha256
_MAX_METADATA_BYTES = 16 << 20
# Archives hold no weights (only lifted constants), so entries are small; a larger file is not
# read (memory stays bounded whatever is found in the cache) and a larger export is not stored.
_MAX_ENTRY_BYTES = 256 << 20
_ROLES = ("user", "parameter", "buffer")


def cache_directory() -> Path | None:
    """Where exported graphs are cached, or None when caching is off."""
    root = _C.cache_directory()
    report_core_notices()  # an unusable LUMINAL_CACHE_DIR: one warning
    if not root:
        return None
    graphs = Path(root) / "graphs"
    if os.path.lexists(graphs) and not graphs.is_dir():
        warn_once(
            f"graphs-directory:{graphs}",
            f"luminal: exported graphs are not cached: {graphs} is not a directory",
            LuminalCacheWarning,
        )
        return None
    return graphs


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
    for module in ("export.py", "decompositions.py", "export_cache.py", "guards.py"):
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


class BadEntry(Exception):
    """A cache entry that cannot be used; the message says why (after the entry's path)."""


@dataclass(frozen=True)
class ExpectedLayout:
    """What a cached entry must say about this compile's inputs (see export.CallLayout): tensor
    positions drawn from these (in order, with these roles; the export drops tensors whose values
    it bakes in, such as 0-dim buffers read with ``.item()``, whose values are part of the key), and
    size positions drawn from the integer inputs."""

    tensors: tuple[int, ...]
    roles: tuple[str, ...]
    integers: frozenset[int]


def expected_layout(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], roles: Sequence[str | None]
) -> ExpectedLayout:
    """The layout export.export_program gives this graph: every used tensor input, in order."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    used = [i for i, node in enumerate(placeholders) if node.users and i < len(example_inputs)]
    tensors = tuple(i for i in used if isinstance(example_inputs[i], torch.Tensor))
    integers = frozenset(
        i
        for i in used
        if isinstance(example_inputs[i], (int, torch.SymInt)) and not isinstance(example_inputs[i], bool)
    )
    return ExpectedLayout(tensors, tuple(str(roles[i]) for i in tensors), integers)


def entry_path(directory: Path, key: str) -> Path:
    return directory / f"{key}{_SUFFIX}"


def load(key: str, expected: ExpectedLayout) -> ExportedGraph | None:
    """The cached export under `key`, or None (a miss, or a bad entry: removed and reported)."""
    directory = cache_directory()
    if directory is None:
        return None
    path = entry_path(directory, key)
    try:
        data = _read_entry(path, _entry_limit())
        if data is None:
            return None
        meta, archive = unpack_entry(data)
        exported = _exported_graph(meta, archive, key, expected)
    except BadEntry as bad:
        _evict(path, str(bad))
        return None
    try:
        os.utime(path)  # recently used: the last to be evicted
    except OSError:
        pass
    return exported


def _read_entry(path: Path, limit: int) -> bytearray | None:
    """The entry's bytes, None when there is none; BadEntry for anything but a bounded regular file
    whose header matches its size (checked before the rest is read)."""
    # O_NONBLOCK: a FIFO in the entry's place does not wait for a writer; O_NOFOLLOW: no links.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise BadEntry("is a symbolic link") from None
        raise BadEntry(f"cannot be opened: {error.strerror}") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise BadEntry(f"is {_file_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise BadEntry(f"is {info.st_size} bytes, over the cache limit of {limit} bytes")
        data = bytearray(info.st_size)
        prefix = min(info.st_size, _PREFIX_BYTES)
        _read_into(descriptor, memoryview(data)[:prefix])
        _check_header(data[:prefix], info.st_size)
        _read_into(descriptor, memoryview(data)[prefix:])
        return data
    except OSError as error:
        raise BadEntry(f"cannot be read: {error.strerror}") from None
    finally:
        os.close(descriptor)


def _read_into(descriptor: int, view: memoryview) -> None:
    done = 0
    while done < len(view):
        count = os.readv(descriptor, [view[done:]])
        if count == 0:
            raise BadEntry("is shorter than its size said (truncated while read)")
        done += count


def _file_kind(mode: int) -> str:
    kinds = [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def pack_entry(meta: dict[str, Any], archive: bytes) -> bytes:
    """One entry file: header, sha256 over header, metadata and archive, metadata, archive."""
    meta_bytes = json.dumps(meta).encode()
    header = _HEADER.pack(_MAGIC, _FORMAT, len(meta_bytes), len(archive))
    digest = hashlib.sha256(header)
    digest.update(meta_bytes)
    digest.update(archive)
    return header + digest.digest() + meta_bytes + archive


def _check_header(header: bytes | bytearray, size: int) -> tuple[int, int]:
    """The metadata and archive sizes of an entry of `size` bytes starting with `header`."""
    if size < _PREFIX_BYTES or len(header) < _PREFIX_BYTES:
        raise BadEntry(f"is truncated ({size} bytes, shorter than its header)")
    magic, version, meta_size, archive_size = _HEADER.unpack_from(header)
    if magic != _MAGIC:
        raise BadEntry("is not a luminal export cache entry")
    if version != _FORMAT:
        raise BadEntry(f"has format version {version}, expected {_FORMAT}")
    if meta_size > _MAX_METADATA_BYTES or _PREFIX_BYTES + meta_size + archive_size != size:
        raise BadEntry(
            f"is {size} bytes, but its header declares {meta_size} + {archive_size} after the header "
            "(truncated or extended)"
        )
    return meta_size, archive_size


def unpack_entry(data: bytes | bytearray) -> tuple[dict[str, Any], bytes]:
    """The metadata and archive of an entry file; BadEntry when it is not one whole entry."""
    start = _PREFIX_BYTES
    meta_size, _ = _check_header(data[:start], len(data))
    digest = hashlib.sha256(memoryview(data)[: _HEADER.size])
    digest.update(memoryview(data)[start:])
    if digest.digest() != data[_HEADER.size : start]:
        raise BadEntry("does not match its checksum")
    try:
        meta = json.loads(bytes(memoryview(data)[start : start + meta_size]).decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise BadEntry(f"has unreadable metadata: {error}") from None
    if not isinstance(meta, dict):
        raise BadEntry("has metadata that is not a JSON object")
    return meta, bytes(memoryview(data)[start + meta_size :])


def _exported_graph(meta: dict[str, Any], archive: bytes, key: str, expected: ExpectedLayout) -> ExportedGraph:
    """The entry as an ExportedGraph, after checking everything later code indexes with."""
    fields = {"key", "tensor_positions", "size_positions", "input_roles", "out_spec"}
    if set(meta) != fields:
        raise BadEntry(f"has metadata fields {sorted(meta)}, expected {sorted(fields)}")
    if meta["key"] != key:
        raise BadEntry("was written for another key")
    tensors = _positions(meta["tensor_positions"], "tensor")
    if not set(tensors) <= set(expected.tensors):
        raise BadEntry(
            f"has tensor positions {list(tensors)}, but this graph's tensor inputs are {list(expected.tensors)}"
        )
    sizes = _positions(meta["size_positions"], "size")
    if not set(sizes) <= expected.integers:
        raise BadEntry(
            f"has size positions {list(sizes)}, but this graph's integer inputs are {sorted(expected.integers)}"
        )
    roles = meta["input_roles"]
    role_of = dict(zip(expected.tensors, expected.roles, strict=True))
    wanted = [*(role_of[position] for position in tensors), *("user",) * len(sizes)]
    if not isinstance(roles, list) or roles != wanted:
        raise BadEntry(f"has input roles {roles!r}, expected {wanted}")
    out_spec = meta["out_spec"]
    if out_spec is not None:
        if not isinstance(out_spec, str):
            raise BadEntry(f"has an output structure of type {type(out_spec).__name__}")
        try:
            out_spec = pytree.treespec_loads(out_spec)
        except Exception as error:  # noqa: BLE001  (pytree raises many types for bad input)
            raise BadEntry(f"has an unreadable output structure: {type(error).__name__}: {error}") from None
    return ExportedGraph(
        archive=archive, layout=CallLayout(tensors, sizes), input_roles=tuple(roles), out_spec=out_spec
    )


def _positions(value: Any, what: str) -> tuple[int, ...]:
    """Strictly increasing non-negative ints (so no repeats, no permutation)."""
    if not isinstance(value, list) or not all(type(p) is int and p >= 0 for p in value):
        raise BadEntry(f"has {what} positions {value!r}, not a list of input positions")
    if any(a >= b for a, b in zip(value, value[1:], strict=False)):
        raise BadEntry(f"has {what} positions {value} out of order or repeated")
    return tuple(value)


def _evict(path: Path, reason: str) -> None:
    """Removes a bad entry (a link itself, never its target; a directory only when empty) and says so once."""
    left = _remove_entry(path)
    if left:
        _bypassed.add(path)
        outcome = f"exported the graph again without caching it: {left}"
    else:
        outcome = "removed it and exported the graph again"
    warn_once(
        f"export-entry:{path}", f"luminal: the export cache entry {path} {reason}; {outcome}", LuminalCacheWarning
    )


def _remove_entry(path: Path) -> str:
    """Empty when nothing is left at `path`, else why something is."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return ""
    except OSError as error:
        return f"it cannot be examined ({error.strerror})"
    try:
        if stat.S_ISDIR(info.st_mode):
            path.rmdir()
        else:
            path.unlink()
    except FileNotFoundError:
        return ""
    except OSError as error:
        what = (
            "a directory that is not empty is left in place" if stat.S_ISDIR(info.st_mode) else "it cannot be removed"
        )
        return f"{what} ({error.strerror})"
    return ""


# Entry paths occupied by something this process could not remove: never written.
_bypassed: set[Path] = set()


def store(key: str, exported: ExportedGraph) -> None:
    directory = cache_directory()
    if directory is None or entry_path(directory, key) in _bypassed:
        return
    try:
        out_spec = pytree.treespec_dumps(exported.out_spec) if exported.out_spec is not None else None
    except (TypeError, NotImplementedError) as error:  # output types pytree cannot serialize
        log.debug("luminal: export not cached: %s", error)
        return
    meta = {
        "key": key,
        "tensor_positions": list(exported.layout.tensors),
        "size_positions": list(exported.layout.sizes),
        "input_roles": list(exported.input_roles),
        "out_spec": out_spec,
    }
    entry = pack_entry(meta, exported.archive)
    limit = _entry_limit()
    if len(entry) > limit:
        log.debug("luminal: export not cached: %d bytes, over the cache limit of %d", len(entry), limit)
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write_atomically(entry_path(directory, key), entry)
    except OSError as error:
        warn_once(
            f"export-write:{directory}",
            f"luminal: exported graphs are not cached: cannot write in {directory}: {error}",
            LuminalCacheWarning,
        )
        return
    _enforce_limit(directory.parent, len(entry))


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


def _entry_limit() -> int:
    return min(cache_limit_bytes(), _MAX_ENTRY_BYTES)


def cache_limit_bytes() -> int:
    """LUMINAL_CACHE_MAX_BYTES (luminal.settings): a byte count, optionally with a K, M or G
    suffix; anything else warns once and the default applies."""
    current = settings()
    if current.cache_max_bytes is None:
        raw = current.cache_max_bytes_text
        warn_once(
            f"cache-max-bytes:{raw}",
            f"luminal: LUMINAL_CACHE_MAX_BYTES={raw!r} is not a size (a byte count with an optional K, M or G "
            f"suffix); the default of {DEFAULT_CACHE_LIMIT_BYTES} bytes applies",
            LuminalCacheWarning,
        )
        return DEFAULT_CACHE_LIMIT_BYTES
    return current.cache_max_bytes


def prune(root: Path, limit_bytes: int) -> int:
    """Deletes the least recently used cache files (kernels in `root`, exported graphs in
    `root/graphs`, measured choices in `root/choices`) until the rest fit in `limit_bytes`.
    Returns the bytes freed. Files that another process removes or replaces meanwhile are skipped."""
    return _prune(root, limit_bytes)[0]


# Cache files: kernels, exported graphs, measured kernel choices (csrc/common/choice_cache.h), and
# the files of earlier formats (graphs/*.pt2, *.json).
_CACHE_PATTERNS = ("*.cubin", f"graphs/*{_SUFFIX}", "graphs/*.pt2", "graphs/*.json", "choices/*.choice")
# A temporary file this old was left by a writer that died: removed by the next scan.
_STALE_TEMPORARY_SECONDS = 3600.0


def _prune(root: Path, limit_bytes: int) -> tuple[int, int]:
    """prune(), also returning the bytes that remain."""
    _remove_stale_temporaries(root)
    entries = []
    for pattern in _CACHE_PATTERNS:
        for path in root.glob(pattern):
            try:
                info = path.lstat()  # a link counts as itself: its target is not the cache's
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode):
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


def _remove_stale_temporaries(root: Path) -> None:
    now = time.time()
    for pattern in (".*.tmp.*", "graphs/.*.tmp.*", "choices/.*.tmp.*"):
        for path in root.glob(pattern):
            try:
                info = path.lstat()
                if stat.S_ISREG(info.st_mode) and now - info.st_mtime > _STALE_TEMPORARY_SECONDS:
                    path.unlink()
            except OSError:
                continue


def _write_atomically(path: Path, data: bytes) -> None:
    """A temporary file unique to this process, renamed over `path`: readers see all or nothing."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp.")
    try:
        with os.fdopen(descriptor, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def export_through_cache(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> ExportedGraph:
    roles = [_input_role(v) if isinstance(v, torch.Tensor) else None for v in example_inputs]
    key = cache_key(gm, example_inputs, roles)
    cached = None
    if key is not None:
        cached = load(key, expected_layout(gm, example_inputs, roles))
    if cached is not None:
        log.debug("luminal: export cache hit %s", key)
        tensors = [example_inputs[i] for i in cached.layout.tensors]
        _require_one_device([f"input {i}" for i in cached.layout.tensors], tensors)
        return cached
    exported = export_graph(gm, example_inputs)
    if key is not None and not exported.layout.host:  # the cache's layout has no host inputs
        store(key, exported)
    return exported
