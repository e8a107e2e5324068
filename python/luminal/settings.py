"""Every environment variable the Python side reads, read once.

    LUMINAL_DUMP_PT2=<dir>           keep every archive handed to the core (for bug reports); "~"
                                     is expanded
    LUMINAL_CACHE_MAX_BYTES=<n>[KMG] the on-disk cache's size limit (default 2 GiB); anything else
                                     warns once and the default applies
    CUDA_HOME, CUDA_PATH             toolkits searched for NVRTC and cuBLASLt after torch's bundled
                                     NVIDIA libraries

The core reads its own variables (LUMINAL_CACHE_DIR, LUMINAL_POISON_OUTPUTS,
LUMINAL_CHECK_CUDA_CODEGEN, LUMINAL_MAX_ARCHIVE_BYTES, ...): they are listed in
csrc/common/config.h, and the cache directory is resolved there only (``_C.cache_directory``).
Both sides take their snapshot at first use; a process that changes its environment afterwards
calls :func:`reload`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from luminal import _C

DEFAULT_CACHE_LIMIT_BYTES = 2 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass(frozen=True)
class Settings:
    dump_pt2: str  # "" when off
    cache_max_bytes_text: str  # LUMINAL_CACHE_MAX_BYTES as given ("" when unset)
    cache_max_bytes: int | None  # its value; None when it is no size (the default applies)
    cuda_homes: tuple[str, ...]  # CUDA_HOME, CUDA_PATH where set


def _parse_size(raw: str) -> int | None:
    text = raw.strip().upper()
    if not text:
        return DEFAULT_CACHE_LIMIT_BYTES
    unit = text[-1] if text[-1] in _UNITS else ""
    number = text[: len(text) - len(unit)].strip()
    if not (number.isascii() and number.isdigit()):
        return None
    return int(number) * _UNITS[unit]


def _read() -> Settings:
    environ = os.environ
    cache_text = environ.get("LUMINAL_CACHE_MAX_BYTES", "")
    return Settings(
        dump_pt2=environ.get("LUMINAL_DUMP_PT2", ""),
        cache_max_bytes_text=cache_text,
        cache_max_bytes=_parse_size(cache_text),
        cuda_homes=tuple(value for value in (environ.get("CUDA_HOME"), environ.get("CUDA_PATH")) if value),
    )


_current: Settings | None = None


def settings() -> Settings:
    """The snapshot taken at first use (or at the last reload)."""
    global _current
    if _current is None:
        _current = _read()
    return _current


def reload() -> Settings:
    """Reads the environment again, here and in the core (``_C.reload_config``)."""
    global _current
    _current = _read()
    _C.reload_config()
    return _current
