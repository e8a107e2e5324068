"""luminal: a torch.compile backend with a C++ core.

    compiled = torch.compile(model, backend="luminal")
    compiled = luminal.compile(model, example_inputs)   # no Dynamo; .save(path), luminal.load(path)

The backend exports the Dynamo graph with torch.export, decomposes it to Core ATen, serializes the
PT2 archive in memory and hands it to the C++ core, which translates it to its own IR, optimizes
and runs it. Parameters are passed by pointer on every call; they are never copied or serialized.
"""

import torch  # noqa: F401  (first: the extension links against libtorch, which torch loads)

from luminal import (
    _cuda_libraries,  # noqa: F401  (registers where NVRTC and cuBLASLt live)
    settings,  # noqa: F401  (luminal.settings.reload() after changing LUMINAL_* variables)
)
from luminal._C import LuminalError, LuminalUnsupportedError, clear_kernel_cache
from luminal.aot import LuminalModule, compile, load
from luminal.backend import compile_count, luminal_backend, reset_compile_count
from luminal.compiled import CompiledFunction
from luminal.explain import Explanation, explain
from luminal.policy import LuminalCacheWarning, LuminalFallbackWarning, LuminalWarning

__all__ = [
    "CompiledFunction",
    "Explanation",
    "LuminalCacheWarning",
    "LuminalError",
    "LuminalFallbackWarning",
    "LuminalModule",
    "LuminalUnsupportedError",
    "LuminalWarning",
    "clear_kernel_cache",
    "compile",
    "compile_count",
    "explain",
    "load",
    "luminal_backend",
    "reset_compile_count",
]
