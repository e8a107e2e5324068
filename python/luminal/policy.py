"""The failure policy: what runs in eager when luminal cannot run something, and how users hear of it.

Without ``strict``, nothing in luminal's path may stop a user's model: what luminal cannot export,
translate, compile or run the first time runs in eager instead (the whole Dynamo graph, or just the
affected partition), and one ``LuminalFallbackWarning`` per compiled graph says what and why. With
``options={"strict": True}`` the same message is raised as a ``LuminalError``.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from luminal import _C
from luminal._C import LuminalError

log = logging.getLogger("luminal")


class LuminalWarning(UserWarning):
    """Base of luminal's warnings; on its own: a debugging setting (LUMINAL_DUMP_*) cannot be honoured."""


class LuminalFallbackWarning(LuminalWarning):
    """Part of a compiled graph runs in eager because luminal does not support it."""


class LuminalCacheWarning(LuminalWarning):
    """An on-disk cache entry or directory could not be used: the entry was rebuilt, or caching is
    off. Nothing ran in eager and the results are unaffected."""


# ------------------------------------------------------------------------------------------------
# Options
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Options:
    """Options of the luminal backend (``torch.compile(..., options={...})``)."""

    strict: bool = False  # raise instead of running in eager what luminal cannot run
    megakernel: bool = True  # run row-local graphs (DLRM-like) as one CUDA kernel
    min_partition_size: int = 1  # smaller luminal partitions of a partly supported graph run in eager


_OPTION_TYPES: dict[str, str] = {
    "strict": "bool",
    "megakernel": "bool",
    "min_partition_size": "int >= 1",
}


def parse_options(settings: dict[str, Any]) -> Options:
    """Validates the backend's options: known keys, exact types (``{"strict": "no"}`` is an error,
    not a truthy string). Raises LuminalError naming the known options."""
    known = ", ".join(f"{name} ({kind})" for name, kind in _OPTION_TYPES.items())
    unknown = sorted(set(settings) - set(_OPTION_TYPES))
    if unknown:
        raise LuminalError(f"unknown luminal option(s) {unknown}; known options: {known}")
    for name in ("strict", "megakernel"):
        if name in settings and not isinstance(settings[name], bool):
            raise LuminalError(
                f"luminal option '{name}' must be a bool, got {type(settings[name]).__name__} "
                f"{settings[name]!r}; known options: {known}"
            )
    size = settings.get("min_partition_size", 1)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise LuminalError(
            f"luminal option 'min_partition_size' must be an int >= 1, got {type(size).__name__} {size!r}; "
            f"known options: {known}"
        )
    return Options(**settings)


# ------------------------------------------------------------------------------------------------
# Warnings and eager fallbacks
# ------------------------------------------------------------------------------------------------
def warn_fallback(message: str) -> None:
    """The one user-visible message of a fallback (also logged)."""
    warnings.warn(message, LuminalFallbackWarning, stacklevel=3)
    log.info(message)


_warned_once: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(key: str, message: str, category: type[Warning] = LuminalWarning) -> None:
    """Warns (and logs) `message` the first time this process sees `key`."""
    with _warned_lock:
        if key in _warned_once:
            return
        _warned_once.add(key)
    warnings.warn(message, category, stacklevel=3)
    log.warning(message)


def report_core_notices() -> None:
    """The warnings the C++ core queued (a bad kernel cache entry, an unusable directory), as Python
    warnings; the core already sends each at most once per process."""
    for kind, message in _C.take_notices():
        warnings.warn(message, LuminalCacheWarning if kind == "cache" else LuminalWarning, stacklevel=3)
        log.warning(message)


def first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def describe_error(error: BaseException) -> str:
    """A LuminalError's own message (it names what failed); other errors with their type."""
    if isinstance(error, LuminalError):
        return str(error).strip()
    return f"{type(error).__name__}: {str(error).strip()}"


class EagerPath:
    """The Dynamo graph itself (``gm.forward``), run by torch, for whatever luminal must not run.

    ``switch`` and ``warn_once`` keep the policy in one place: in strict mode they raise, otherwise
    they warn once per distinct reason."""

    def __init__(self, function: Callable[..., Any], strict: bool) -> None:
        self.function = function
        self.strict = strict
        self._warned: set[str] = set()

    def __call__(self, *args: Any) -> Any:
        return self.function(*args)

    def warn_once(self, key: str, message: str) -> None:
        if self.strict:
            raise LuminalError(message)
        if key not in self._warned:
            self._warned.add(key)
            warn_fallback(message)


class EagerGraph:
    """What the backend returns for a Dynamo graph that runs wholly in eager, with the reason."""

    def __init__(self, function: Callable[..., Any], reason: str) -> None:
        self._function = function
        self.reason = reason

    def __call__(self, *args: Any) -> Any:
        return self._function(*args)

    def ir(self, optimized: bool = True) -> str:
        return ""

    def cuda_source(self) -> str:
        return ""

    def stats(self) -> dict[str, Any]:
        return {"fallback": True, "eager_reason": self.reason, "luminal_node_share": 0.0, "luminal_flop_share": 0.0}


def run_in_eager(
    function: Callable[..., Any], reason: str, options: Options, cause: BaseException | None = None
) -> EagerGraph:
    """The whole graph runs in eager: warns (or raises LuminalError in strict mode) with ``reason``."""
    message = f"luminal: this graph runs in eager: {reason}"
    if options.strict:
        raise LuminalError(message) from cause
    warn_fallback(message)
    return EagerGraph(function, reason)
