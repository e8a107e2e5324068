"""scaled_dot_product_attention against eager: causal, boolean and additive masks, explicit scale,
grouped-query heads, every float dtype. On CUDA export picks the flash, memory-efficient or cuDNN
kernel by dtype and mask; luminal decomposes each (python/luminal/decompositions.py), so all of them
must compile and match."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import check, rand

CASES = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "scale": dict(scale=0.3),
    "bool_mask": dict(mask="bool"),
    "float_mask": dict(mask="float"),
}


def attention_inputs(dtype: torch.dtype, device: str, heads: int = 4, kv_heads: int = 4, length: int = 7):
    q = rand(2, heads, length, 16, dtype=dtype, device=device, low=-1, high=1)
    k = rand(2, kv_heads, length + 2, 16, dtype=dtype, device=device, low=-1, high=1)
    v = rand(2, kv_heads, length + 2, 16, dtype=dtype, device=device, low=-1, high=1)
    return q, k, v


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_sdpa(case: str, dtype: torch.dtype, device: str) -> None:
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("eager's CPU float16 attention is not a reference worth comparing with")
    options = dict(CASES[case])
    q, k, v = attention_inputs(dtype, device)
    mask_kind = options.pop("mask", None)
    if mask_kind is None:
        check(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, **options), q, k, v, tolerance_scale=8)
        return
    if mask_kind == "bool":
        mask = rand(q.shape[-2], k.shape[-2], dtype=torch.bool, device=device)
        mask[:, 0] = True  # every query sees at least one key (an all-masked row is NaN in eager)
    else:
        mask = rand(2, 1, q.shape[-2], k.shape[-2], dtype=dtype, device=device, low=-2, high=0)
    check(lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m), q, k, v, mask, tolerance_scale=8)


def test_sdpa_grouped_query_heads(device: str) -> None:
    if "enable_gqa" not in F.scaled_dot_product_attention.__doc__:
        pytest.skip("this torch has no enable_gqa")
    q, k, v = attention_inputs(torch.float32, device, heads=8, kv_heads=2)
    check(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True, enable_gqa=True),
        q,
        k,
        v,
        tolerance_scale=8,
    )
