"""scaled_dot_product_attention against eager: causal, boolean and additive masks, explicit scale,
grouped-query heads, every float dtype. On CUDA export picks the memory-efficient or cuDNN kernel
by dtype and mask (luminal exports without the flash kernel, whose node torch.export cannot always
serialize; on the CPU the CPU flash kernel); luminal translates each into one fused
attention node, so all of them must compile and match. tests/test_fused_attention.py covers the
node itself (shapes, masks, layouts, dtypes)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import luminal
from helpers import assert_same, check, rand

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
        mask[:, 0] = True  # every query sees at least one key (all-masked rows: the test below)
    else:
        mask = rand(2, 1, q.shape[-2], k.shape[-2], dtype=dtype, device=device, low=-2, high=0)
    check(lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m), q, k, v, mask, tolerance_scale=8)


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_sdpa_fully_masked_rows_are_zero(mask_dtype: torch.dtype, dtype: torch.dtype, device: str) -> None:
    """A query that may attend to no key (a padding token) gets what eager gives, never NaN (NaN
    there would spread to every token in the next layer). Eager gives zeros, except CUDA's bf16
    kernel with a bool mask, which averages the values: luminal matches either."""
    q, k, v = attention_inputs(dtype, device)
    allowed = rand(q.shape[-2], k.shape[-2], dtype=torch.bool, device=device)
    allowed[:, 0] = True
    allowed[[1, 4]] = False
    mask = allowed if mask_dtype == torch.bool else torch.zeros(allowed.shape, device=device, dtype=dtype)
    if mask_dtype != torch.bool:
        mask.masked_fill_(~allowed, float("-inf"))
    attend = F.scaled_dot_product_attention
    out = check(lambda a, b, c, m: attend(a, b, c, attn_mask=m), q, k, v, mask, tolerance_scale=8)
    assert not out.isnan().any()


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


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "masked"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_attention_output_keeps_the_kernels_layout(masked: bool, dtype: torch.dtype, device: str) -> None:
    """Hugging Face's attention pattern (GPT-2): heads split out of one projection by view and
    transpose, attention, then transpose back, reshape, `.contiguous()` and `.view`. On the fused
    kernel's output layout `.contiguous()` is a no-op that the export does not record: the `.view`
    after it must still read the attention output's values right."""
    if device == "cuda" and dtype == torch.float64:
        pytest.skip("CUDA attention kernels take no float64")
    batch, length, heads, dim = 2, 7, 4, 16

    def fn(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = hidden.split(heads * dim, dim=2)
        q, k, v = (t.view(batch, length, heads, dim).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if masked else None)
        out = out.transpose(1, 2).reshape(batch, length, heads * dim).contiguous()
        return out.view(-1, heads * dim) * 2

    hidden = rand(batch, length, 3 * heads * dim, dtype=dtype, device=device, low=-1, high=1)
    mask = rand(batch, 1, length, length, dtype=dtype, device=device, low=-2, high=0)
    check(fn, hidden, mask, tolerance_scale=8)


def _chunked(x: torch.Tensor) -> torch.Tensor:
    """x[b, t] padded to chunks of 8 and reshaped with the chunk length inferred: a dynamic export
    spells that length floordiv(p, floordiv(p, 8)) for the padded p (8 at every call)."""
    b, t = x.shape
    chunks = F.pad(x, (0, (8 - t % 8) % 8)).reshape(b, -1, 8)
    return chunks.reshape(b, chunks.shape[1], -1)  # [b, p / 8, 8], the 8 symbolic


def _query_of_symbolic_heads(x: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    q = _chunked(x).unsqueeze(-1).transpose(1, 2)  # [b, 8 (symbolic) heads, p / 8, 1]
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def _query_of_symbolic_head_size(x: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    q = _chunked(x).unsqueeze(1)  # [b, 1, p / 8, 8 (symbolic)]
    return F.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize(
    "fn,key_shape",
    [(_query_of_symbolic_heads, (2, 5, 1)), (_query_of_symbolic_head_size, (1, 5, 8))],
    ids=["heads", "head_size"],
)
def test_sdpa_query_dims_left_symbolic_by_a_dynamic_export(fn: Any, key_shape: tuple[int, ...], device: str) -> None:
    """Recurrent Gemma and Jamba under dynamic shapes: the export spells the query's heads or head
    size as expressions of the sequence length that are constant at every call, and the keys' as
    numbers. The attention takes the numbers (checked at every call) instead of running in eager."""
    compiled = torch.compile(fn, backend="luminal")
    k, v = rand(2, *key_shape, device=device), rand(2, *key_shape, device=device)
    for length in (13, 30, 21):  # the second length makes it dynamic (the keys stay static)
        x = rand(2, length, device=device)
        assert_same(compiled(x, k, v), fn(x, k, v))
    assert luminal.compile_count() == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_sdpa_at_a_second_length_stays_compiled(dtype: torch.dtype, device: str) -> None:
    """A transformer at its second sequence length: Dynamo recompiles with the length dynamic. On
    CUDA, half-precision sdpa dispatches to cuDNN, whose node has SymInt outputs under dynamic
    shapes that torch.export cannot serialize; before, the whole graph ran in eager from then on
    (50 of the 111 Hugging Face models a bfloat16 sweep on an H200 reached)."""

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)

    compiled = torch.compile(fn, backend="luminal")
    for length in (16, 24, 40):
        q, k, v = (rand(2, 4, length, 64, dtype=dtype, device=device) for _ in range(3))
        assert_same(compiled(q, k, v), fn(q, k, v), tolerance_scale=4)
    assert luminal.compile_count() == 2
