"""Advanced indexing, index_select and embedding against eager; out-of-range indices raise."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_raises_when_run, check, non_contiguous, rand

INDEX_DTYPES = [torch.int64, torch.int32]


def indices(n: int, *shape: int, dtype: torch.dtype = torch.int64, device: str = "cpu", negative: bool = False):
    low = -n if negative else 0
    return torch.randint(low, n, shape, dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", INDEX_DTYPES, ids=str)
def test_index_first_dim(dtype: torch.dtype, device: str) -> None:
    x = rand(10, 3, device=device)
    check(lambda t, i: t[i], x, indices(10, 7, dtype=dtype, device=device))
    check(lambda t, i: t[i], x, indices(10, 2, 3, dtype=dtype, device=device))  # 2-D index


def test_index_leading_none(device: str) -> None:
    # z[:, li, lj]: the DLRM interaction gather (an earlier design mis-strided this).
    z = rand(5, 6, 7, device=device)
    li = indices(6, 9, device=device)
    lj = indices(7, 9, device=device)
    check(lambda t, a, b: t[:, a, b], z, li, lj)


def test_index_leading_none_tril_pairs(device: str) -> None:
    z = rand(4, 5, 5, device=device)

    def pairs(t: torch.Tensor) -> torch.Tensor:
        n = t.shape[1]
        li = torch.tensor([i for i in range(n) for j in range(i)], device=t.device)
        lj = torch.tensor([j for i in range(n) for j in range(i)], device=t.device)
        return t[:, li, lj]

    check(pairs, z)


def test_index_trailing_and_middle_none(device: str) -> None:
    x = rand(4, 5, 6, device=device)
    i = indices(6, 3, device=device)
    check(lambda t, a: t[:, :, a], x, i)  # leading Nones
    check(lambda t, a: t[a], rand(6, 4, 5, device=device), i)  # trailing full dims
    j = indices(4, 3, device=device)
    check(lambda t, a, b: t[a, :, b], x, j, i)  # non-adjacent: the index dims go first


def test_index_broadcasting_indices(device: str) -> None:
    x = rand(6, 7, device=device)
    rows = indices(6, 4, 1, device=device)
    cols = indices(7, 1, 3, device=device)
    check(lambda t, a, b: t[a, b], x, rows, cols)


def test_index_negative_indices_wrap(device: str) -> None:
    x = rand(8, 3, device=device)
    check(lambda t, i: t[i], x, indices(8, 12, device=device, negative=True))


def test_index_of_non_contiguous(device: str) -> None:
    x = non_contiguous(rand(7, 9, device=device))
    check(lambda t, i: t[:, i], x, indices(9, 4, device=device))


def test_index_integer_data_exact(device: str) -> None:
    x = rand(6, 4, dtype=torch.int64, device=device, low=-1000, high=1000)
    check(lambda t, i: t[i], x, indices(6, 5, device=device))


def test_index_out_of_range_raises(device: str) -> None:
    x = rand(5, 3, device=device)
    bad = torch.tensor([0, 5], device=device)
    compiled = torch.compile(lambda t, i: t[i], backend="luminal")
    assert_raises_when_run(compiled, x, bad, match="out of bounds")


def test_int64_index_is_not_truncated(device: str) -> None:
    # 2**32 + 1 truncated to 32 bits would be 1, a valid row: it must raise instead.
    x = rand(10, 2, device=device)
    huge = torch.tensor([2**32 + 1], dtype=torch.int64, device=device)
    compiled = torch.compile(lambda t, i: t[i], backend="luminal")
    compiled(x, torch.tensor([3], device=device))  # compiles and works for valid indices
    assert_raises_when_run(compiled, x, huge, match="out of bounds")


@pytest.mark.parametrize("dim", [0, 1])
def test_index_select(dim: int, device: str) -> None:
    x = rand(6, 5, device=device)
    check(lambda t, i: torch.index_select(t, dim, i), x, indices(x.shape[dim], 8, device=device))


@pytest.mark.parametrize("dtype", INDEX_DTYPES, ids=str)
def test_embedding(dtype: torch.dtype, device: str) -> None:
    weight = rand(20, 8, device=device)
    check(lambda i: torch.nn.functional.embedding(i, weight), indices(20, 3, 5, dtype=dtype, device=device))


def test_embedding_out_of_range_raises(device: str) -> None:
    weight = rand(4, 2, device=device)
    compiled = torch.compile(lambda i: torch.nn.functional.embedding(i, weight), backend="luminal")
    assert_raises_when_run(compiled, torch.tensor([1, -1], device=device), match="out of bounds")
