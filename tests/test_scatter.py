"""Scatters against eager: index_put with integer indices in every None/tensor arrangement, index_copy
and index_add. They run as one scatter node (work linear in the elements written); a mutated input
(a KV cache) is updated in place, without copying it."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from helpers import FLOAT_DTYPES, assert_raises_when_run, assert_same, capturing_backend, check, non_contiguous, rand

DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int64,
    torch.int32,
    torch.uint8,
    torch.bool,
]


def put(indices: list[Any], accumulate: bool = False):
    """aten.index_put(t, indices, v) with the index tensors passed as arguments (None stays None)."""

    def fn(t: torch.Tensor, v: torch.Tensor, *tensors: torch.Tensor) -> torch.Tensor:
        it = iter(tensors)
        chosen = [None if i is None else next(it) for i in indices]
        return torch.ops.aten.index_put(t, chosen, v, accumulate)

    return fn


def tensors_of(indices: list[Any]) -> tuple[torch.Tensor, ...]:
    return tuple(i for i in indices if i is not None)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_put_kv_cache_position(dtype: torch.dtype, device: str) -> None:
    """cache[:, :, pos] = new, the StaticCache write (indices [None, None, pos])."""
    cache = rand(2, 3, 9, 5, dtype=dtype, device=device)
    for positions in ([4], [0, 8, 3]):
        pos = torch.tensor(positions, device=device)
        new = rand(2, 3, len(positions), 5, dtype=dtype, device=device)
        check(put([None, None, pos]), cache, new, pos)


@pytest.mark.parametrize(
    "arrangement",
    ["first", "middle", "last", "adjacent_pair", "separated_pair", "broadcast_2d", "negative", "int32"],
)
def test_index_put_arrangements(arrangement: str, device: str) -> None:
    x = rand(5, 6, 7, device=device)
    idx = {
        "first": [torch.tensor([4, 0, 2], device=device)],
        "middle": [None, torch.tensor([5, 1], device=device)],
        "last": [None, None, torch.tensor([6, 0, 3, 2], device=device)],
        "adjacent_pair": [None, torch.tensor([1, 5, 2], device=device), torch.tensor([0, 6, 3], device=device)],
        "separated_pair": [torch.tensor([1, 4], device=device), None, torch.tensor([6, 2], device=device)],
        "broadcast_2d": [torch.tensor([[0], [3], [4]], device=device), torch.tensor([[1, 5]], device=device)],
        "negative": [None, torch.tensor([-1, -6, 2], device=device)],
        "int32": [
            torch.tensor([3, 1], dtype=torch.int32, device=device),
            None,
            torch.tensor([2, 5], dtype=torch.int32, device=device),
        ],
    }[arrangement]
    target_shape = x[tuple(slice(None) if i is None else i for i in idx)].shape
    check(put(idx), x, rand(*target_shape, device=device), *tensors_of(idx))
    # Values broadcast from a smaller shape, and a non-contiguous base and values.
    check(put(idx), x, rand(*target_shape[-1:], device=device), *tensors_of(idx))
    check(put(idx), non_contiguous(x), non_contiguous(rand(*target_shape, device=device)), *tensors_of(idx))


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int8, torch.bool], ids=str
)
def test_index_put_accumulate_with_duplicates(dtype: torch.dtype, device: str) -> None:
    x = rand(6, 4, dtype=dtype, device=device)
    rows = torch.tensor([1, 1, 5, -1, 0, 1], device=device)  # 1 three times, 5 twice (-1 wraps)
    values = rand(6, 4, dtype=dtype, device=device)
    check(put([rows], accumulate=True), x, values, rows, tolerance_scale=4)
    columns = torch.tensor([3, 3, 0], device=device)
    check(put([None, columns], accumulate=True), x, rand(6, 3, dtype=dtype, device=device), columns, tolerance_scale=4)


def test_index_put_empty_and_size_one(device: str) -> None:
    x = rand(4, 1, 3, device=device)
    empty = torch.zeros(0, dtype=torch.int64, device=device)
    check(put([None, None, empty]), x, rand(4, 1, 0, device=device), empty)
    one = torch.tensor([0], device=device)
    check(put([None, one]), x, rand(4, 1, 3, device=device), one)


def test_index_put_out_of_range_raises(device: str) -> None:
    compiled = torch.compile(put([None, torch.tensor([0])]), backend="luminal")
    x, values = rand(3, 4, device=device), rand(3, 1, device=device)
    assert_raises_when_run(
        compiled,
        x,
        values,
        torch.tensor([4], device=device),
        match="out of bounds",
        valid=(x, values, torch.tensor([3], device=device)),
    )


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_index_copy(dim: int, dtype: torch.dtype, device: str) -> None:
    x = rand(5, 6, 7, dtype=dtype, device=device)
    size = x.shape[dim]
    index = torch.randperm(size, device=device)[:3]  # distinct: duplicates are undefined in torch
    source_shape = list(x.shape)
    source_shape[dim] = 3
    source = rand(*source_shape, dtype=dtype, device=device)
    check(lambda t, i, s: t.index_copy(dim, i, s), x, index, source)
    check(lambda t, i, s: t.index_copy(dim, i, s), non_contiguous(x), index, non_contiguous(source))


@pytest.mark.parametrize("alpha", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32], ids=str)
def test_index_add_with_duplicates(alpha: int, dtype: torch.dtype, device: str) -> None:
    x = rand(6, 5, dtype=dtype, device=device)
    index = torch.tensor([2, 0, 2, 5, 2], device=device)
    source = rand(5, 5, dtype=dtype, device=device)
    check(lambda t, i, s: t.index_add(0, i, s, alpha=alpha), x, index, source, tolerance_scale=4)
    check(
        lambda t, i, s: t.index_add(1, i, s, alpha=alpha),
        x,
        index[:3],
        rand(6, 3, dtype=dtype, device=device),
        tolerance_scale=4,
    )


def test_index_copy_out_of_range_and_negative_raise(device: str) -> None:
    x, source = rand(4, 2, device=device), rand(1, 2, device=device)
    valid = (x, torch.tensor([3], device=device), source)
    for bad in (4, -1):
        torch._dynamo.reset()
        compiled = torch.compile(lambda t, i, s: t.index_copy(0, i, s), backend="luminal")
        assert_raises_when_run(
            compiled, x, torch.tensor([bad], device=device), source, match="out of bounds", valid=valid
        )


def write_cache(cache: torch.Tensor, pos: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    cache.index_copy_(2, pos, new)
    return cache.sum(-1)


def cache_and_update(device: str, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    return (
        rand(2, 3, 64, 8, dtype=dtype, device=device),
        torch.tensor([7], device=device),
        rand(2, 3, 1, 8, dtype=dtype, device=device),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_mutated_cache_is_written_in_place(dtype: torch.dtype, device: str) -> None:
    """An input updated by a scatter (a KV-cache write) keeps its storage and is not copied: neither
    into the graph nor back after it."""
    captured: list[Any] = []
    compiled = torch.compile(write_cache, backend=capturing_backend(captured))
    for position in (7, 8, 63):
        cache, _, new = cache_and_update(device, dtype)
        pos = torch.tensor([position], device=device)
        expected_cache = cache.clone()
        expected = write_cache(expected_cache, pos, new)
        pointer = cache.data_ptr()
        actual = compiled(cache, pos, new)
        assert_same(actual, expected, tolerance_scale=4)
        assert cache.data_ptr() == pointer
        assert_same(cache, expected_cache)
        stats = captured[0].stats()
        assert stats["copy_back_bytes"] == 0, stats
        assert stats["scatter_copy_bytes"] == 0, stats
    assert "scatter" in captured[0].ir()
    if device == "cuda":  # recorded once, without the base copy that these calls skip
        assert captured[0].stats()["cuda"]["graph_builds"] == 1


def test_mutated_cache_that_cannot_be_written_in_place(device: str) -> None:
    """A non-contiguous cache is updated through a copy: still eager's result. On CUDA the graph
    is recorded without the scatter's base copy at first (calls that write the cache in place skip
    it), and again with it once a call needs it."""
    captured: list[Any] = []
    compiled = torch.compile(write_cache, backend=capturing_backend(captured))
    cache, pos, new = cache_and_update(device)
    strided = non_contiguous(cache)
    expected_cache = strided.clone()
    expected = write_cache(expected_cache, pos, new)
    assert_same(compiled(strided, pos, new), expected)
    assert_same(strided, expected_cache)
    stats = captured[-1].stats()
    assert stats["copy_back_bytes"] == cache.numel() * cache.element_size()
    if device == "cuda":  # first recorded without the scatter's base copy, then again with it
        assert stats["cuda"]["graph_builds"] == 2, stats["cuda"]
        assert stats["scatter_copy_bytes"] == cache.numel() * cache.element_size()


def test_scatters_into_an_intermediate(device: str) -> None:
    """Chained scatters into a fresh tensor (the base's memory is taken over, not copied)."""

    def fn(x: torch.Tensor, rows: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y = y.index_put((rows,), values)
        y = torch.ops.aten.index_put(y, [None, rows[:2]], values[:2].t(), True)
        return y + 1

    x = rand(6, 6, device=device)
    check(fn, x, torch.tensor([5, 0, 3, 2], device=device), rand(4, 6, device=device), tolerance_scale=4)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_scatter_poisoned_output_has_every_element(dtype: torch.dtype, device: str) -> None:
    """Outputs are poisoned before each run (conftest): the base copy must cover every element."""
    x = rand(3, 5, 4, dtype=dtype, device=device)
    pos = torch.tensor([1, 3], device=device)
    check(put([None, pos]), x, rand(3, 2, 4, dtype=dtype, device=device), pos)


def test_scatter_that_takes_over_its_base_read_by_a_matmul_through_a_view(device: str) -> None:
    """The scatter writes into its dead base's memory (an arena slot after another live
    intermediate); the matmul reads the scatter's transpose by strides, so that view must point at
    the taken-over slot, not at the start of the arena."""

    def fn(a: torch.Tensor, idx: torch.Tensor, v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m = a.amax(0, keepdim=True)  # computed first, read at the end
        q = torch.relu(a - m) * 3.0  # read only by the scatter
        s = torch.ops.aten.index_put(q, [idx], v)
        return s.t() @ w + m.t()

    idx = torch.tensor([1, 40], device=device)
    check(fn, rand(64, 48, device=device), idx, rand(2, 48, device=device), rand(64, 40, device=device))


def write_rotated_keys(cache: torch.Tensor, position: torch.Tensor, keys: torch.Tensor, cos: torch.Tensor) -> Any:
    """A decode step's cache write: keys [B, 1, H * D] split into heads, rotated (RoPE-like: a
    half swap with a sign) and scaled, written at position + 0 (the index is computed too)."""
    heads = cache.shape[1]
    k = keys.view(keys.shape[0], 1, heads, -1).transpose(1, 2)
    half = k.shape[-1] // 2
    rotated = torch.cat((-k[..., half:], k[..., :half]), dim=-1)
    k = k * cos + rotated * (1 - cos)
    cache.index_copy_(2, position + torch.arange(1, device=position.device), k)
    return cache.sum(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_values_and_indices_computed_inside_the_scatter(dtype: torch.dtype, device: str) -> None:
    """The transposed, rotated keys and the index arithmetic are pointwise producers of the scatter:
    they are computed inside it (no kernel of their own) and the cache is still written in place,
    at every position written in turn (each later write reading the earlier ones through the sum)."""
    captured: list[Any] = []
    compiled = torch.compile(write_rotated_keys, backend=capturing_backend(captured))
    cache = rand(2, 3, 16, 8, dtype=dtype, device=device)
    expected_cache = cache.clone()
    cos = rand(1, 1, 1, 8, dtype=dtype, device=device)
    for position in (0, 5, 15):
        keys = rand(2, 1, 24, dtype=dtype, device=device)
        pos = torch.tensor([position], device=device)
        expected = write_rotated_keys(expected_cache, pos, keys, cos)
        assert_same(compiled(cache, pos, keys, cos), expected, tolerance_scale=4)
        assert_same(cache, expected_cache, tolerance_scale=4)
    ir = captured[0].ir()
    scatter = next(line for line in ir.splitlines() if "= scatter(" in line)
    assert "index_copy" in scatter and "neg(" in scatter, ir
    assert "pointwise" not in "".join(line for line in ir.splitlines() if "transpose" in line), ir
    assert captured[0].stats()["scatter_copy_bytes"] == 0
