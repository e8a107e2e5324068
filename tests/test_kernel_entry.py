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

GLOBAL = re.compile(r"__global__ void[^{]*\{")
# A node kernel's device function (the body its entry point and grouped launches call). Before its
# wait it may request its small inputs into L2 (lm_prefetch_l2: a hint that reads nothing into the
# kernel, computed from parameters alone).
RUN = re.compile(
    r"__device__ __forceinline__ void (?P<name>\w+_run)\([^{]*\{\n"
    r"(?P<prefetches>(?:  lm_prefetch_l2\([^\n]*\n)*)(?P<first>[^\n]*)\n"
)
CALLED = re.compile(r"(\w+_run)\(")
# The decode attention's entry (attention_decode.cuh): where the schedule proved which cache rows
# the kernel ahead writes (LM_EARLY_ROWS), its vector path requests keys and values before it waits;
# whatever it reads before this line is parameters and those rows' numbers, which nothing up to the
# kernel writes. test_early_keys.py checks the results on a GPU.
DECODE_ENTRY = "if (lm_entry.waited) lm_kernel_entry();"
READ_BEFORE_DECODE_ENTRY = {"p.key_rows", "p.value_rows", "lm_entry.key_rows", "lm_entry.value_rows"}


def body_after(source: str, opening: int) -> str:
    """The text between the brace at `opening` and its matching closing brace."""
    depth = 0
    for at in range(opening, len(source)):
        depth += {"{": 1, "}": -1}.get(source[at], 0)
        if depth == 0:
            return source[opening + 1 : at]
    raise AssertionError(f"unbalanced braces after {source[opening : opening + 80]!r}")


def check_kernels_wait_first(sources: list[str]) -> int:
    """Asserts that every kernel, and every node kernel's device function, starts with
    lm_kernel_entry() (after its L2 prefetches, which read parameters only). An entry point that
    does not only passes its blocks on to such functions (a node kernel's own, one line; a grouped
    launch's, which picks the member from blockIdx.x and its parameters' block counts) and reads
    nothing else. Returns how many kernels it checked."""
    waiting = set()
    for source in sources:
        for run in RUN.finditer(source):
            assert run["first"].strip() == "lm_kernel_entry();", run.group(0)
            assert "[" not in run["prefetches"], run.group(0)
            waiting.add(run["name"])
    checked = 0
    for source in sources:
        for kernel in GLOBAL.finditer(source):
            checked += 1
            body = body_after(source, kernel.end() - 1)
            if body.lstrip().startswith("lm_kernel_entry();"):
                continue
            if DECODE_ENTRY in body:
                before = body.split(DECODE_ENTRY)[0]
                assert set(re.findall(r"([\w.]+)\[", before)) <= READ_BEFORE_DECODE_ENTRY, kernel.group(0) + before
                continue
            called = CALLED.findall(body)
            assert called and set(called) <= waiting, kernel.group(0) + body
            assert "[" not in body.replace("p.blocks[", ""), kernel.group(0) + body
    return checked


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
    assert check_kernels_wait_first(sources) >= 5, sources
    assert any(RUN.search(source) for source in sources), "no node kernel was generated"
    assert any("lm_attention" in s or "LM_DV" in s for s in sources), "no attention kernel was generated"
