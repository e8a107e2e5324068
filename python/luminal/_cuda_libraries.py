"""Tells the core where NVRTC and cuBLASLt live: torch's bundled NVIDIA libraries first, then the
CUDA toolkit. The core loads them on first use (dlopen), so nothing here needs a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

from luminal import _C
from luminal.settings import settings


def _candidate_dirs() -> list[str]:
    dirs: list[str] = []
    for entry in sys.path:
        nvidia = Path(entry) / "nvidia"
        if nvidia.is_dir():
            dirs.extend(str(lib) for lib in sorted(nvidia.glob("*/lib")) if lib.is_dir())
    dirs.extend(str(Path(root) / "lib64") for root in settings().cuda_homes)
    dirs.append("/usr/local/cuda/lib64")
    return list(dict.fromkeys(dirs))


_C.add_cuda_library_dirs(_candidate_dirs())
