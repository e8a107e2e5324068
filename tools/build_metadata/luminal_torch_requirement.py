"""scikit-build-core metadata provider: the package's torch requirement is the torch it is built against.

The extension links against torch's C++ libraries (libtorch, libc10, libtorch_python), whose ABI changes
from one minor release to the next: a wheel built with torch 2.15 fails to import under torch 2.14 or 2.16
(undefined symbols). So the wheel requires the minor release it was built with, and pip installs or keeps
a compatible torch instead of an import error at run time. Named in pyproject.toml
([tool.scikit-build.metadata.dependencies]); torch is importable in the build environment because it is a
build requirement (or, with --no-build-isolation, installed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def torch_requirement(version: str) -> str:
    """'2.15.0+cu132' -> 'torch>=2.15.0,<2.16' (the local part, CUDA or CPU build, is not expressible)."""
    release = version.split("+")[0]
    parts = release.split(".")
    major, minor = int(parts[0]), int(parts[1])
    return f"torch>={release},<{major}.{minor + 1}"


def dynamic_metadata(field: str, settings: Mapping[str, Any] | None = None) -> list[str]:
    if field != "dependencies":
        raise ValueError(f"luminal_torch_requirement provides 'dependencies', not {field!r}")
    if settings:
        raise ValueError(f"luminal_torch_requirement takes no settings, got {sorted(settings)}")
    import torch

    return [torch_requirement(torch.__version__)]
