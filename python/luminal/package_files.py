"""The files of a compiled module's package (luminal.compile's LuminalModule.save, luminal.load and
the C++ runner's csrc/runner/package.*): the state stored torch-free (state.json and each tensor's
raw bytes), the cache entries a module used, and opening a file as a package."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from luminal import _C
from luminal._C import LuminalError

PREFIX = "luminal_module/"


class TensorSpec(Protocol):
    """What the state decoder checks a stored tensor against (luminal.aot.TensorSpec)."""

    dtype: str
    shape: tuple[int | None, ...]
    device: str

    def describe(self) -> str: ...


STATE_FORMAT = "luminal-state 1"
# The dtypes a package's state may hold, by torch's name: the core's (csrc/common/dtype.h), and the
# complex ones it binds as pairs of f32 or f64.
STATE_DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                  torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128)
}  # fmt: skip


def _storage_extent(tensor: torch.Tensor) -> int:
    """How many elements a tensor's strides reach from its first element (0 when it has none)."""
    if tensor.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))


def encode_state(names: Sequence[str], tensors: Sequence[torch.Tensor]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """state.json and the state/<k>.bin entries: each tensor's bytes from its first element over
    what its strides reach, so that the layout (and the program's choices that depend on it) is
    kept as bound."""
    index: list[dict[str, Any]] = []
    entries: dict[str, bytes] = {}
    for k, (name, tensor) in enumerate(zip(names, tensors, strict=True)):
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in STATE_DTYPES:
            raise LuminalError(
                f"luminal.compile: state tensor '{name}' has dtype {tensor.dtype}, which a package cannot hold"
            )
        flat = torch.as_strided(tensor.detach(), (_storage_extent(tensor),), (1,), tensor.storage_offset())
        data = flat.cpu().contiguous().view(torch.uint8).numpy().tobytes()
        entry = f"state/{k}.bin"
        entries[entry] = data
        index.append(
            {"name": name, "dtype": dtype, "sizes": list(tensor.shape), "strides": list(tensor.stride()),
             "entry": entry, "nbytes": len(data)}
        )  # fmt: skip
    return {"format": STATE_FORMAT, "tensors": index}, entries


def decode_state(
    package: zipfile.ZipFile, path: str | os.PathLike[str], names: Sequence[str], specs: Sequence[TensorSpec]
) -> list[torch.Tensor]:
    """The state of a package of format 2, checked against the package's own specs, on each spec's device."""
    index = json.loads(package.read(PREFIX + "state.json"))
    tensors = index.get("tensors") if isinstance(index, dict) else None
    if not isinstance(tensors, list) or index.get("format") != STATE_FORMAT:
        raise LuminalError(f"{path}: state.json is not a {STATE_FORMAT!r} index")
    stored = [t.get("name") if isinstance(t, dict) else None for t in tensors]
    if stored != list(names):
        raise LuminalError(f"{path}: the package's state holds {stored}, expected {list(names)}")
    state = []
    for record, spec in zip(tensors, specs, strict=True):
        dtype = STATE_DTYPES.get(record.get("dtype"))
        sizes, strides = record.get("sizes"), record.get("strides")
        if (
            dtype is None
            or str(dtype) != spec.dtype
            or not isinstance(sizes, list)
            or not isinstance(strides, list)
            or len(sizes) != len(strides)
            or tuple(sizes) != spec.shape
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in sizes + strides)
        ):
            raise LuminalError(
                f"{path}: state tensor {record.get('name')!r} does not match {spec.describe()}: {record}"
            )
        entry = record.get("entry")
        if not isinstance(entry, str) or not re.fullmatch(r"state/[0-9]+\.bin", entry):
            raise LuminalError(f"{path}: state tensor {record['name']!r} names the entry {entry!r}")
        data = package.read(PREFIX + entry)
        extent = 0 if 0 in sizes else 1 + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True))
        if len(data) != extent * dtype.itemsize:
            raise LuminalError(
                f"{path}: state tensor {record['name']!r} ({spec.describe()}, strides {strides}) needs "
                f"{extent * dtype.itemsize} bytes, its entry holds {len(data)}"
            )
        flat = torch.frombuffer(bytearray(data), dtype=dtype) if data else torch.empty(0, dtype=dtype)
        state.append(torch.as_strided(flat.to(spec.device), sizes, strides))
    return state


def cache_entries(journal_start: int) -> dict[str, bytes]:
    """The on-disk cache entries (relative path -> file bytes) used since `journal_start`."""
    root = _C.cache_directory()
    if not root:
        return {}
    entries: dict[str, bytes] = {}
    for path, _ in _C.cache_journal_since(journal_start):
        relative = os.path.relpath(path, root)
        if relative.startswith("..") or not SAFE_RELATIVE.fullmatch(relative):
            continue
        try:
            entries[relative] = Path(path).read_bytes()
        except OSError:
            continue  # evicted since: the loaded module builds it again
    return entries


SAFE_RELATIVE = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")


def torch_state(state_bytes: bytes, path: str | os.PathLike[str], names: Sequence[str]) -> list[torch.Tensor]:
    """The state of a package of format 1 (torch.save, loaded with weights_only)."""
    saved = torch.load(io.BytesIO(state_bytes), weights_only=True)
    missing = [name for name in names if name not in saved]
    if missing:
        raise LuminalError(f"{path}: the package's state lacks {missing}")
    return [saved[name] for name in names]


def open_package(path: str | os.PathLike[str]) -> zipfile.ZipFile | None:
    """The package at `path`, or None when it is no package (pt2.load then reports what is wrong
    with the file). Only a regular file is read: opened without blocking (a FIFO waits for no
    writer) and examined on the open descriptor, so nothing can be swapped in between."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(descriptor).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(descriptor)
        return None
    file = os.fdopen(descriptor, "rb")
    try:
        if not zipfile.is_zipfile(file):
            file.close()
            return None
        package = zipfile.ZipFile(file)
    except (OSError, zipfile.BadZipFile):
        file.close()
        return None
    if PREFIX + "format" not in package.namelist():
        package.close()
        file.close()
        return None
    return OwningZipFile(package, file)


class OwningZipFile:
    """A ZipFile with the file it reads, closed together (ZipFile leaves a given file open)."""

    def __init__(self, package: zipfile.ZipFile, file: Any) -> None:
        self.package = package
        self.file = file

    def __enter__(self) -> zipfile.ZipFile:
        return self.package

    def __exit__(self, *exc: object) -> None:
        self.package.close()
        self.file.close()


def install_cache_entries(package: zipfile.ZipFile, entries: list[str]) -> None:
    """Puts the package's cache entries into this machine's cache (never over an existing file):
    the compile then finds its kernels and choices there. Caching off: nothing is installed."""
    root = _C.cache_directory()
    if not root:
        return
    for relative in entries:
        if not isinstance(relative, str) or not SAFE_RELATIVE.fullmatch(relative) or ".." in relative.split("/"):
            raise LuminalError(f"the package names a cache entry {relative!r} outside the cache")
        target = Path(root) / relative
        if target.exists():
            continue
        data = package.read(PREFIX + "cache/" + relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, target)
        except OSError:
            temporary.unlink(missing_ok=True)  # the compile builds the entry again
