"""Every generated CUDA kernel starts with lm_kernel_entry(): it waits for the kernels ahead of it
before touching memory. The CUDA graph links consecutive kernels with programmatic edges (sm_90+),
so a kernel whose first global access came before that wait could read what its predecessor has
not written yet: a race, silent wrong output. Checked on the module source every kind of kernel is
rendered into (LUMINAL_CHECK_CUDA_CODEGEN generates it on CPU too); the races themselves, and the
edges, are tested on a GPU (test_cuda_engine.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from helpers import assert_same, capturing_backend, rand

ENTRY = re.compile(r"__global__ void[^{]*\{\n(?P<first>[^\n]*)\n")


def _mixed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor, cache: torch.Tensor) -> Any:
    """Attention (tile and decode kernels), row reductions, a scatter into an input, elementwise."""
    prefill = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    decode = torch.nn.functional.scaled_dot_product_attention(q[:, :, :1], k, v)
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    cache.index_copy_(0, torch.tensor([2], device=x.device), normed[:1])
    return prefill.sum(-1), decode * 2, torch.softmax(normed, -1), torch.cumsum(x, 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_every_kernel_waits_for_its_predecessors_first(dtype: torch.dtype, device: str) -> None:
    q, k, v = (rand(1, 2, 9, 16, dtype=dtype, device=device) for _ in range(3))
    x = rand(5, 24, dtype=dtype, device=device)
    cache = rand(4, 24, dtype=dtype, device=device)
    captured: list[Any] = []
    compiled = torch.compile(_mixed, backend=capturing_backend(captured))
    expected_cache = cache.clone()
    expected = _mixed(q, k, v, x, expected_cache)
    assert_same(compiled(q, k, v, x, cache), expected, tolerance_scale=8)
    assert_same(cache, expected_cache)
    sources = [graph.cuda_source() for graph in captured]
    kernels = [m for source in sources for m in ENTRY.finditer(source)]
    assert len(kernels) >= 5, sources
    for kernel in kernels:
        assert kernel["first"].strip() == "lm_kernel_entry();", kernel.group(0)
    assert any("lm_attention" in s or "LM_DV" in s for s in sources), "no attention kernel was generated"
