"""torch._grouped_mm (MoE grouped GEMM with run-time group offsets) and an MoE layer, against eager."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import luminal
from helpers import assert_raises_when_run, assert_same, capturing_backend, check, compile_luminal, rand

# The f32 and f16 inner products accumulate in a different order than eager; bf16 rounds once.
GROUPED_DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@functools.cache
def eager_supports(device: str, dtype: torch.dtype) -> bool:
    """torch < 2.8 has no _grouped_mm; CPU kernels and non-bf16 CUDA kernels came later still."""
    if not hasattr(torch, "_grouped_mm"):
        return False
    a = torch.ones(4, 16, dtype=dtype, device=device)
    b = torch.ones(2, 16, 8, dtype=dtype, device=device)
    offs = torch.tensor([2, 4], dtype=torch.int32, device=device)
    try:
        torch._grouped_mm(a, b, offs=offs)
        # Compiling runs the meta kernel, which may accept fewer dtypes (torch 2.11: CUDA bf16 only).
        torch._grouped_mm(a.to("meta"), b.to("meta"), offs=offs.to("meta"))
    except (RuntimeError, NotImplementedError):
        return False
    return True


def require(device: str, dtype: torch.dtype) -> None:
    if not eager_supports(device, dtype):
        pytest.skip(f"eager torch {torch.__version__} has no _grouped_mm for {dtype} on {device}")


def group_ends(sizes: list[int], device: str) -> torch.Tensor:
    return torch.tensor(sizes, dtype=torch.int32, device=device).cumsum(0, dtype=torch.int32)


def grouped(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return torch._grouped_mm(a, b, offs=offs)


# (group sizes along M, K, N): empty groups, a single group, odd group sizes.
ROW_GROUPS = [([5], 16, 8), ([3, 0, 7, 1], 40, 24), ([1, 1], 8, 8), ([0, 13, 0], 32, 16), ([17, 30, 2, 15], 64, 48)]


@pytest.mark.parametrize("dtype", GROUPED_DTYPES, ids=str)
@pytest.mark.parametrize("sizes,k,n", ROW_GROUPS, ids=str)
def test_grouped_rows_2d_3d(sizes: list[int], k: int, n: int, dtype: torch.dtype, device: str) -> None:
    require(device, dtype)
    a = rand(sum(sizes), k, dtype=dtype, device=device)
    b = rand(len(sizes), k, n, dtype=dtype, device=device)
    check(grouped, a, b, group_ends(sizes, device), tolerance_scale=8)


@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "unaligned"])
@pytest.mark.parametrize("dtype", GROUPED_DTYPES, ids=str)
def test_grouped_rows_many_tiles(dtype: torch.dtype, aligned: bool, device: str) -> None:
    """Groups that start and end inside 64-row tiles, K not a multiple of 32, N not of 64; operands
    whose rows allow 16-byte loads (CUDA's vector path) or not (element loads)."""
    require(device, dtype)
    if device == "cuda" and not aligned:
        pytest.skip("eager's CUDA _grouped_mm requires 16-byte aligned operands")
    sizes, k, n = [70, 0, 129, 1, 56, 3], 72, 136
    rows = sum(sizes)
    skip = 0 if aligned else 3  # elements: an unaligned start
    a = rand(rows * k + skip, dtype=dtype, device=device, low=-1, high=1)[skip:].view(rows, k)
    w = rand(len(sizes), n, k + 8, dtype=dtype, device=device, low=-1, high=1)[..., skip : skip + k]
    b, offs = w.transpose(-2, -1), group_ends(sizes, device)
    # Not through check(): its input copies would be contiguous and aligned again.
    assert_same(compile_luminal(grouped)(a, b, offs), grouped(a, b, offs), tolerance_scale=8)
    assert (a.data_ptr() % 16 == 0) == aligned and (w.data_ptr() % 16 == 0) == aligned


@pytest.mark.parametrize("ends", [[6, 3, 10], [4, 12], [-1, 10]], ids=str)
def test_grouped_rows_invalid_offsets_raise(ends: list[int], device: str) -> None:
    """torch requires non-decreasing offs within the rows (and does not check); luminal raises."""
    require(device, torch.float32)
    a, b = rand(10, 16, device=device), rand(len(ends), 16, 8, device=device)
    offs = torch.tensor(ends, dtype=torch.int32, device=device)
    if device == "cuda":  # eager's meta kernel accepts bf16 only on CUDA (torch 2.11)
        a, b = a.bfloat16(), b.bfloat16()
    valid = torch.tensor([3, 6, 10][: len(ends)], dtype=torch.int32, device=device)
    assert_raises_when_run(compile_luminal(grouped), a, b, offs, match="out of bounds", valid=(a, b, valid))


def test_grouped_rows_offsets_change_at_run_time(device: str) -> None:
    """offs is data: new group boundaries reuse the compiled graph and give new results."""
    require(device, torch.float32)
    compiled = compile_luminal(grouped)
    a, b = rand(12, 16, device=device), rand(3, 16, 8, device=device)
    for sizes in ([4, 4, 4], [0, 12, 0], [11, 0, 1], [2, 7, 3]):
        offs = group_ends(sizes, device)
        assert_same(compiled(a, b, offs), grouped(a, b, offs), tolerance_scale=8)
    assert luminal.compile_count() == 1


def test_grouped_rows_transposed_weights(device: str) -> None:
    """MoE weights are usually stored [G, N, K] and passed transposed."""
    require(device, torch.bfloat16)
    w = rand(3, 24, 32, dtype=torch.bfloat16, device=device)
    a = rand(10, 32, dtype=torch.bfloat16, device=device)
    offs = group_ends([2, 5, 3], device)
    check(lambda a, w, offs: grouped(a, w.transpose(-2, -1), offs), a, w, offs, tolerance_scale=8)


def test_grouped_rows_past_last_offset_are_zero(device: str) -> None:
    """torch leaves rows after offs[-1] unwritten (garbage); luminal writes zeros there."""
    require(device, torch.float32)
    a, b, offs = rand(9, 16, device=device), rand(2, 16, 8, device=device), group_ends([2, 4], device)
    out = compile_luminal(grouped)(a, b, offs)
    assert_same(out[:6], grouped(a, b, offs)[:6], tolerance_scale=8)
    assert torch.equal(out[6:], torch.zeros_like(out[6:]))


@pytest.mark.parametrize("dtype", GROUPED_DTYPES, ids=str)
@pytest.mark.parametrize("sizes", [[8, 0, 16], [24], [8, 8, 8, 8]], ids=str)
def test_grouped_columns_3d_2d(sizes: list[int], dtype: torch.dtype, device: str) -> None:
    require(device, dtype)
    a = rand(len(sizes), 7, 16, dtype=dtype, device=device)
    b = rand(16, sum(sizes), dtype=dtype, device=device)
    check(grouped, a, b, group_ends(sizes, device), tolerance_scale=8)


@pytest.mark.parametrize("dtype", GROUPED_DTYPES, ids=str)
@pytest.mark.parametrize("sizes", [[16, 0, 24], [40], [8, 8, 16, 8]], ids=str)
def test_grouped_inner_2d_2d(sizes: list[int], dtype: torch.dtype, device: str) -> None:
    require(device, dtype)
    a = rand(5, sum(sizes), dtype=dtype, device=device)
    b = rand(sum(sizes), 8, dtype=dtype, device=device)
    check(grouped, a, b, group_ends(sizes, device), tolerance_scale=8)


@pytest.mark.parametrize("dtype", GROUPED_DTYPES, ids=str)
def test_grouped_batched_3d_3d(dtype: torch.dtype, device: str) -> None:
    require(device, dtype)
    a, b = rand(3, 9, 16, dtype=dtype, device=device), rand(3, 16, 8, dtype=dtype, device=device)
    check(lambda a, b: torch._grouped_mm(a, b), a, b, tolerance_scale=8)


class MoE(torch.nn.Module):
    """A top-k routed SwiGLU mixture of experts: tokens sorted by expert, two grouped GEMMs with
    run-time offsets, outputs scattered back weighted by the router's probabilities."""

    def __init__(self, dim: int, hidden: int, experts: int, top_k: int) -> None:
        super().__init__()
        self.experts, self.top_k = experts, top_k
        self.router = torch.nn.Linear(dim, experts, bias=False)
        self.w_gate_up = torch.nn.Parameter(torch.randn(experts, 2 * hidden, dim) / dim**0.5)  # [E, N, K]
        self.w_down = torch.nn.Parameter(torch.randn(experts, dim, hidden) / hidden**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.shape[0]
        probs, expert = torch.topk(self.router(x).softmax(dim=-1), self.top_k, dim=-1)
        probs = probs / probs.sum(dim=-1, keepdim=True)
        flat_expert = expert.reshape(-1)
        order = torch.argsort(flat_expert, stable=True)
        token_of = order // self.top_k
        counts = F.one_hot(flat_expert, self.experts).sum(dim=0)
        offs = counts.cumsum(dim=0).to(torch.int32)
        routed = x[token_of]
        gate, up = torch._grouped_mm(routed, self.w_gate_up.transpose(-2, -1), offs=offs).chunk(2, dim=-1)
        y = torch._grouped_mm(F.silu(gate) * up, self.w_down.transpose(-2, -1), offs=offs)
        y = y * probs.reshape(-1)[order].unsqueeze(-1).to(y.dtype)
        return torch.zeros(tokens, x.shape[1], dtype=y.dtype, device=y.device).index_add(0, token_of, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("tokens", [1, 37, 128])
def test_moe_layer(tokens: int, dtype: torch.dtype, device: str) -> None:
    require(device, dtype)
    model = MoE(dim=32, hidden=48, experts=4, top_k=2).to(device=device, dtype=dtype).eval()
    x = rand(tokens, 32, dtype=dtype, device=device, low=-1, high=1)
    with torch.no_grad():
        expected = model(x)
        actual = compile_luminal(model)(x)
    assert luminal.compile_count() >= 1
    assert_same(actual, expected, tolerance_scale=8)


# ---- transformers.grouped_mm_fallback: the custom op transformers' MoE layers run on CPU --------


def grouped_mm_fallback() -> Any:
    """torch.ops.transformers.grouped_mm_fallback, which importing transformers' MoE integration
    registers (transformers >= 5)."""
    pytest.importorskip("transformers")
    try:
        import transformers.integrations.moe  # noqa: F401, PLC0415 (registers the op)
    except ImportError as error:
        pytest.skip(f"this transformers has no MoE integration: {error}")
    if not hasattr(torch.ops.transformers, "grouped_mm_fallback"):
        pytest.skip("this transformers does not register transformers::grouped_mm_fallback")
    return torch.ops.transformers.grouped_mm_fallback


def eager_mm_supports(device: str, dtype: torch.dtype) -> bool:
    try:
        torch.ones(2, 2, dtype=dtype, device=device) @ torch.ones(2, 2, dtype=dtype, device=device)
    except RuntimeError:
        return False
    return True


# Group sizes with empty experts, then rows past the last offset (transformers' expert-parallel
# sentinels): zero in both.
FALLBACK_ROUTINGS = [([3, 0, 7, 1], 0), ([0, 13, 0], 2), ([5], 0), ([2, 2, 0, 0, 9], 3)]


@pytest.mark.parametrize("transposed", [True, False], ids=["transposed", "plain"])
@pytest.mark.parametrize("offs_dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("dtype", GROUPED_DTYPES, ids=str)
@pytest.mark.parametrize("sizes,tail", FALLBACK_ROUTINGS, ids=str)
def test_grouped_mm_fallback(
    sizes: list[int], tail: int, dtype: torch.dtype, offs_dtype: torch.dtype, transposed: bool, device: str
) -> None:
    op = grouped_mm_fallback()
    if not eager_mm_supports(device, dtype):
        pytest.skip(f"eager has no {dtype} matmul on {device}")
    k, n = 24, 16
    x = rand(sum(sizes) + tail, k, dtype=dtype, device=device, low=-1, high=1)
    offs = torch.tensor(sizes, device=device).cumsum(0).to(offs_dtype)
    if transposed:  # weights stored [E, N, K], as transformers' experts keep them
        w = rand(len(sizes), n, k, dtype=dtype, device=device, low=-1, high=1)
        check(lambda x, w, offs: op(x, w.transpose(-2, -1), offs), x, w, offs, tolerance_scale=8)
    else:
        w = rand(len(sizes), k, n, dtype=dtype, device=device, low=-1, high=1)
        check(op, x, w, offs, tolerance_scale=8)


def test_grouped_mm_fallback_offsets_change_at_run_time(device: str) -> None:
    op = grouped_mm_fallback()
    compiled = compile_luminal(op)
    x, w = rand(12, 16, device=device), rand(3, 16, 8, device=device)
    for sizes in ([4, 4, 4], [0, 12, 0], [11, 0, 1], [2, 7, 2]):
        offs = torch.tensor(sizes, device=device).cumsum(0)
        assert_same(compiled(x, w, offs), op(x, w, offs), tolerance_scale=8)
    assert luminal.compile_count() == 1


@pytest.mark.parametrize("ends", [[6, 3, 10], [4, 13], [-1, 10], [4, 2**40]], ids=str)
def test_grouped_mm_fallback_invalid_offsets_raise(ends: list[int], device: str) -> None:
    """Decreasing ends, ends past the rows or beyond int32: transformers' loop would slice
    silently; luminal raises."""
    op = grouped_mm_fallback()
    x, w = rand(12, 16, device=device), rand(len(ends), 16, 8, device=device)
    offs = torch.tensor(ends, dtype=torch.int64, device=device)
    valid = torch.tensor([min(max(e, 0), 12) for e in sorted(ends)], dtype=torch.int64, device=device)
    assert_raises_when_run(compile_luminal(op), x, w, offs, match="out of bounds", valid=(x, w, valid))


def test_grouped_mm_fallback_is_a_supported_target() -> None:
    grouped_mm_fallback()
    from luminal import coverage  # noqa: PLC0415

    assert "torch.ops.transformers.grouped_mm_fallback.default" in coverage.measure().supported


@pytest.mark.parametrize("name", ["qwen3_moe", "mixtral"])
def test_moe_zoo_models_run_whole_on_cpu(name: str) -> None:
    """Random tiny Qwen3-MoE and Mixtral in float32 on the CPU: their routing (histc) and experts
    (grouped_mm_fallback) are translated, nothing falls back (a fallback warning fails the test)."""
    pytest.importorskip("transformers")
    from models.zoo import HF_MODELS  # noqa: PLC0415

    entry = next(m for m in HF_MODELS if m.name == name)
    _, forward, inputs = entry.build("cpu", torch.float32)
    captured: list[Any] = []
    with torch.no_grad():
        expected = forward(*inputs)
        actual = torch.compile(forward, backend=capturing_backend(captured))(*inputs)
    assert_same(actual, expected, tolerance_scale=entry.tolerance_scale)
    ir = "\n".join(c.ir() for c in captured)
    assert "grouped_mm_fallback" in ir and "histc" in ir, ir
