"""luminal's fused attention node (ir::NodeKind::Attention) against eager: every float dtype, causal
or not, bool and float masks (broadcast ones too), grouped-query heads, odd sizes, a fully masked
row, transposed (non-contiguous) q/k/v, an explicit scale, and each of torch's fused kernels called
directly. Every test also checks that the graph held an attention node (so a decomposition that
came back would fail it) and ran whole in luminal (strict)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import luminal
from helpers import assert_same, capturing_backend, clone_args, rand

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def compile_and_count(fn: Callable[..., Any], *args: Any) -> tuple[Any, int]:
    """fn through luminal (strict: nothing may run in eager) and the attention nodes it compiled."""
    captured: list[Any] = []
    compiled = torch.compile(fn, backend=capturing_backend(captured, strict=True))
    with torch.no_grad():
        out = compiled(*clone_args(args))
    assert captured, "luminal was not used"
    return out, sum(c.stats()["attentions"] for c in captured)


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """Eager attention in float64 (the math every dtype approximates), rounded once to q's dtype.
    Grouped-query heads are repeated; a query that attends to nothing gives zeros."""
    group = q.shape[1] // k.shape[1]
    q64, k64, v64 = (t.double() for t in (q, k, v))
    k64, v64 = k64.repeat_interleave(group, 1), v64.repeat_interleave(group, 1)
    factor = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    scores = (q64 @ k64.transpose(-2, -1)) * factor
    if is_causal:
        allowed = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        scores = scores + mask.double()
    nothing = (scores == float("-inf")).all(-1, keepdim=True)
    return (scores.softmax(-1).masked_fill(nothing, 0) @ v64).to(q.dtype)


def qkv(
    dtype: torch.dtype,
    device: str,
    batch: int = 2,
    heads: int = 4,
    kv_heads: int = 4,
    queries: int = 7,
    keys: int = 33,
    head_size: int = 40,
    value_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q = rand(batch, heads, queries, head_size, dtype=dtype, device=device, low=-1, high=1)
    k = rand(batch, kv_heads, keys, head_size, dtype=dtype, device=device, low=-1, high=1)
    v = rand(batch, kv_heads, keys, value_size or head_size, dtype=dtype, device=device, low=-1, high=1)
    return q, k, v


def check_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    tolerance_scale: float = 4,
    fused: bool = True,
    **options: Any,
) -> torch.Tensor:
    """`fused`: torch dispatches sdpa to a fused kernel, which luminal translates to one node; where
    torch picks its math path instead (CUDA float64, CUDA float32 with enable_gqa) the graph luminal
    receives is already decomposed and has none."""

    def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, m: torch.Tensor | None) -> torch.Tensor:
        return F.scaled_dot_product_attention(a, b, c, attn_mask=m, **options)

    out, attentions = compile_and_count(fn, q, k, v, mask)
    assert attentions == (1 if fused else 0), f"{attentions} fused attention nodes (fused kernel expected: {fused})"
    expected = reference(q, k, v, mask, options.get("is_causal", False), options.get("scale"))
    assert_same(out, expected, tolerance_scale)
    assert not out.isnan().any()
    return out


MASKS = ["none", "causal", "bool_keys", "float_queries_keys", "float_full", "bool_full"]


def make_mask(kind: str, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
    batch, heads, queries, keys = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    device = q.device
    if kind in ("none", "causal"):
        return None
    if kind == "bool_keys":  # padding: [B, 1, 1, Lk]
        mask = rand(batch, 1, 1, keys, dtype=torch.bool, device=device)
        mask[..., 0] = True
        return mask
    if kind == "float_queries_keys":  # [1, 1, Lq, Lk]
        return rand(1, 1, queries, keys, dtype=q.dtype, device=device, low=-2, high=1)
    if kind == "float_full":
        return rand(batch, heads, queries, keys, dtype=q.dtype, device=device, low=-2, high=1)
    mask = rand(batch, heads, queries, keys, dtype=torch.bool, device=device)
    mask[..., 0] = True
    return mask


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_attention_masks_and_dtypes(dtype: torch.dtype, mask: str, device: str) -> None:
    """(sdpa takes a mask or is_causal, not both; the fused kernels with both: below.)"""
    q, k, v = qkv(dtype, device)
    fused = not (device == "cuda" and dtype == torch.float64)
    check_attention(q, k, v, make_mask(mask, q, k), is_causal=mask == "causal", fused=fused)


SHAPES = {
    "one_query": dict(queries=1, keys=9),
    "more_queries_than_keys": dict(queries=19, keys=5),
    "head_64": dict(queries=40, keys=40, head_size=64),
    "head_128": dict(queries=17, keys=70, head_size=128),
    "head_8_one_head": dict(batch=1, heads=1, kv_heads=1, queries=3, keys=2, head_size=8),
}


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_attention_shapes(dtype: torch.dtype, shape: str, is_causal: bool, device: str) -> None:
    q, k, v = qkv(dtype, device, **SHAPES[shape])
    check_attention(q, k, v, is_causal=is_causal)


DECODE_SHAPES = {
    "one_key": dict(queries=1, keys=1),
    "one_query_two_chunks": dict(queries=1, keys=300),
    "three_queries_two_chunks": dict(queries=3, keys=300, head_size=24),
    "two_queries_head_256": dict(batch=1, heads=2, kv_heads=2, queries=2, keys=70, head_size=256),
    # The vector path (whole 16-byte vectors per row): heads of 64 over two chunks (bf16: 256 keys
    # per chunk), several chunks of a head of 128 with four queries.
    "head_64": dict(batch=1, heads=8, kv_heads=8, queries=1, keys=300, head_size=64),
    "four_queries_head_128": dict(batch=2, heads=2, kv_heads=2, queries=4, keys=700, head_size=128),
    # Split keys (sm_90: a cluster of blocks per row, each a slice of the keys, combined through
    # distributed shared memory): a Llama decode step's 32 heads over a 256-key cache (eight slices
    # of 32), and 70 keys (two slices of 35, the second shorter than the first's chunk).
    "llama_decode": dict(batch=1, heads=32, kv_heads=32, queries=1, keys=256, head_size=64),
    "two_slices": dict(batch=3, heads=4, kv_heads=4, queries=2, keys=70, head_size=64),
}


@pytest.mark.parametrize("mask", ["none", "causal", "bool_keys", "float_full"])
@pytest.mark.parametrize("shape", sorted(DECODE_SHAPES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_decode_attention(dtype: torch.dtype, shape: str, mask: str, device: str) -> None:
    """A few queries (decode steps: codegen's attention_decode.cuh on CUDA, its scalar path in chunks
    of 256 keys, its vector path in chunks of 2048 / (16-byte vectors per key row)): several chunks,
    an odd head size, a head of 256, heads of whole vectors, every mask kind."""
    q, k, v = qkv(dtype, device, **DECODE_SHAPES[shape])
    fused = not (device == "cuda" and dtype == torch.float64)
    check_attention(q, k, v, make_mask(mask, q, k), is_causal=mask == "causal", fused=fused)


@pytest.mark.parametrize("layout", ["head_strided", "rows_misaligned"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_decode_attention_reads_keys_no_vector_load_fits(dtype: torch.dtype, layout: str, device: str) -> None:
    """Heads of 64 compile the vector path, but these keys and values cannot be read 16 bytes at a
    time: the kernel's run-time check takes the scalar path (a vector load here would read the
    wrong elements or fault on a misaligned address). The fused kernel is called directly: sdpa
    would copy such operands, or decompose, before luminal sees them."""
    q = rand(2, 2, 1, 64, dtype=dtype, device=device, low=-1, high=1)
    if layout == "head_strided":  # the head dimension is the outer one in memory
        k, v = (rand(2, 2, 64, 90, dtype=dtype, device=device, low=-1, high=1).transpose(-1, -2) for _ in range(2))
    else:  # rows of 65 elements, each view starting one element in
        k, v = (rand(2, 2, 90, 65, dtype=dtype, device=device, low=-1, high=1)[..., 1:] for _ in range(2))
    assert not k.is_contiguous()
    mask = rand(2, 2, 1, 90, dtype=dtype, device=device, low=-2, high=1)
    scale = 0.125

    def fused(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        if device == "cpu":
            call = aten._scaled_dot_product_flash_attention_for_cpu.default
            return call(a, b, c, 0.0, False, attn_mask=m, scale=scale)[0]
        return aten._scaled_dot_product_efficient_attention.default(a, b, c, m, False, 0.0, False, scale=scale)[0]

    out, attentions = compile_and_count(fused, q, k, v, mask)
    assert attentions == 1
    assert_same(out, reference(q, k, v, mask, scale=scale), tolerance_scale=4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_decode_attention_whose_first_chunk_is_masked(dtype: torch.dtype, device: str) -> None:
    """Keys seen only from the second chunk on (the running max starts at -inf there), a row that
    sees nothing (zeros), and keys/values read as transposed views of a [B, L, H, D] cache."""
    batch, heads, keys, dim = 2, 3, 300, 32
    q = rand(batch, heads, 2, dim, dtype=dtype, device=device, low=-1, high=1)
    k, v = (rand(batch, keys, heads, dim, dtype=dtype, device=device, low=-1, high=1).transpose(1, 2) for _ in range(2))
    allowed = torch.zeros(batch, 1, 2, keys, dtype=torch.bool, device=device)
    allowed[:, :, 0, 260:] = rand(batch, 1, keys - 260, dtype=torch.bool, device=device)
    allowed[:, :, 0, 299] = True
    # An additive mask of 0 / -inf: a bool mask reaches torch's cuDNN kernel (half types on CUDA)
    # as 0 / -65504, where a row that sees nothing is the plain average of the values, in eager too.
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, -math.inf)
    out = check_attention(q, k, v, mask)
    assert torch.equal(out[:, :, 1], torch.zeros_like(out[:, :, 1]))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_attention_scale_argument(dtype: torch.dtype, device: str) -> None:
    q, k, v = qkv(dtype, device, queries=5, keys=6, head_size=16)
    check_attention(q, k, v, scale=0.37, fused=not (device == "cuda" and dtype == torch.float64))


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32], ids=str)
def test_fully_masked_row_is_zero(mask_dtype: torch.dtype, device: str) -> None:
    q, k, v = qkv(torch.float32, device, queries=6, keys=11)
    allowed = rand(q.shape[2], k.shape[2], dtype=torch.bool, device=device)
    allowed[:, 0] = True
    allowed[3] = False
    mask = (
        allowed
        if mask_dtype == torch.bool
        else torch.zeros(allowed.shape, device=device).masked_fill(~allowed, -math.inf)
    )
    out = check_attention(q, k, v, mask)
    assert torch.equal(out[:, :, 3], torch.zeros_like(out[:, :, 3]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_transposed_qkv_read_in_place(dtype: torch.dtype, device: str) -> None:
    """Hugging Face's layout: q/k/v are [B, H, L, D] views of [B, L, H, D] projections."""
    batch, length, heads, dim = 2, 13, 3, 32
    q, k, v = (
        rand(batch, length, heads, dim, dtype=dtype, device=device, low=-1, high=1).transpose(1, 2) for _ in range(3)
    )
    assert not q.is_contiguous()
    check_attention(q, k, v, is_causal=True)


def test_grouped_query_heads(device: str) -> None:
    q, k, v = qkv(torch.float32, device, heads=8, kv_heads=2, queries=9, keys=9, head_size=16)
    if "enable_gqa" in (F.scaled_dot_product_attention.__doc__ or ""):
        check_attention(q, k, v, is_causal=True, enable_gqa=True, fused=device == "cpu")

    def hf_style(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        # transformers' repeat_kv: every key/value head expanded over its group of query heads.
        b = b[:, :, None].expand(2, 2, 4, 9, 16).reshape(2, 8, 9, 16)
        c = c[:, :, None].expand(2, 2, 4, 9, 16).reshape(2, 8, 9, 16)
        return F.scaled_dot_product_attention(a, b, c, is_causal=True)

    out, attentions = compile_and_count(hf_style, q, k, v)
    assert attentions == 1
    assert_same(out, reference(q, k, v, is_causal=True), tolerance_scale=4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_grouped_query_decode_step(dtype: torch.dtype, device: str) -> None:
    """A Llama-shaped decode step (heads of 64, four query heads per key/value head, transformers'
    repeat_kv, a float mask that hides the cache's unwritten tail): the decode kernel's vector path."""
    q = rand(1, 8, 1, 64, dtype=dtype, device=device, low=-1, high=1)
    k, v = (rand(1, 2, 300, 64, dtype=dtype, device=device, low=-1, high=1) for _ in range(2))
    mask = torch.zeros(1, 1, 1, 300, dtype=dtype, device=device)
    mask[..., 173:] = -math.inf

    def hf_style(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        b = b[:, :, None].expand(1, 2, 4, 300, 64).reshape(1, 8, 300, 64)
        c = c[:, :, None].expand(1, 2, 4, 300, 64).reshape(1, 8, 300, 64)
        return F.scaled_dot_product_attention(a, b, c, attn_mask=m)

    out, attentions = compile_and_count(hf_style, q, k, v, mask)
    assert attentions == 1
    assert_same(out, reference(q, k, v, mask), tolerance_scale=4)


def kernel_calls() -> list[Any]:
    """Each fused kernel this torch has: (name, call(q, k, v, mask, is_causal, scale) -> output)."""
    calls: list[Any] = []

    def efficient(q: Any, k: Any, v: Any, m: Any, causal: bool, scale: float) -> Any:
        return aten._scaled_dot_product_efficient_attention.default(q, k, v, m, False, 0.0, causal, scale=scale)[0]

    def flash(q: Any, k: Any, v: Any, m: Any, causal: bool, scale: float) -> Any:
        assert m is None
        return aten._scaled_dot_product_flash_attention.default(q, k, v, 0.0, causal, False, scale=scale)[0]

    def flash_for_cpu(q: Any, k: Any, v: Any, m: Any, causal: bool, scale: float) -> Any:
        return aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, 0.0, causal, attn_mask=m, scale=scale)[
            0
        ]

    def cudnn(q: Any, k: Any, v: Any, m: Any, causal: bool, scale: float) -> Any:
        return aten._scaled_dot_product_cudnn_attention.default(q, k, v, m, False, 0.0, causal, False, scale=scale)[0]

    for name, call in [
        ("_scaled_dot_product_efficient_attention", efficient),
        ("_scaled_dot_product_flash_attention", flash),
        ("_scaled_dot_product_flash_attention_for_cpu", flash_for_cpu),
        ("_scaled_dot_product_cudnn_attention", cudnn),
    ]:
        if hasattr(aten, name):
            calls.append(pytest.param(call, id=name))
    return calls


@pytest.mark.parametrize("masked", [False, True], ids=["causal", "causal_and_mask"])
@pytest.mark.parametrize("call", kernel_calls())
def test_each_fused_kernel_translates(call: Callable[..., Any], masked: bool, device: str) -> None:
    """The kernels called directly (compiled only: eager may lack the kernel on this device), with
    causal, a scale, (where the kernel takes one) a float mask together, and Dv != D where the
    kernel allows it (the flash kernels need Dv == D)."""
    if masked and call.__name__ == "flash":
        masked = False  # the flash kernel takes no mask
    if device == "cuda" and call.__name__ == "flash":
        pytest.skip("torch.export cannot serialize a direct CUDA _scaled_dot_product_flash_attention call with a scale")
    value_size = 24 if call.__name__.startswith("flash") else 40
    q, k, v = qkv(torch.float32, device, queries=6, keys=10, head_size=24, value_size=value_size)
    mask = rand(2, 1, 6, 10, device=device, low=-1, high=0) if masked else None
    out, attentions = compile_and_count(lambda a, b, c, m: call(a, b, c, m, True, 0.3), q, k, v, mask)
    assert attentions == 1
    assert_same(out, reference(q, k, v, mask, is_causal=True, scale=0.3), tolerance_scale=4)


def test_reading_the_log_sum_exp_falls_back_with_a_reason() -> None:
    """The log-sum-exp output serves training; luminal computes only the attention output, so a graph
    reading it runs that node in eager, with the reason in the warning."""
    q, k, v = qkv(torch.float32, "cpu", queries=4, keys=5, head_size=8)

    def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu.default(a, b, c)[:2]
        return out.sum(-1) + lse

    with pytest.warns(luminal.LuminalFallbackWarning, match="log-sum-exp"), torch.no_grad():
        out = torch.compile(fn, backend="luminal")(q, k, v)
    assert_same(out, fn(q, k, v), tolerance_scale=4)
