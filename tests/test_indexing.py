"""Advanced indexing, index_select and embedding against eager; out-of-range indices raise."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_raises_when_run, check, non_contiguous, rand

INDEX_DTYPES = [torch.int64, torch.int32]


TORCH_VERSION = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])


def require_eager_index_dtype(dtype: torch.dtype) -> None:
    if dtype != torch.int64 and TORCH_VERSION < (2, 7):
        pytest.skip("eager gather/scatter take only int64 indices before torch 2.7")


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
    assert_raises_when_run(compiled, x, bad, match="out of bounds", valid=(x, torch.tensor([0, 4], device=device)))


def test_int64_index_is_not_truncated(device: str) -> None:
    # 2**32 + 1 truncated to 32 bits would be 1, a valid row: it must raise instead.
    x = rand(10, 2, device=device)
    huge = torch.tensor([2**32 + 1], dtype=torch.int64, device=device)
    compiled = torch.compile(lambda t, i: t[i], backend="luminal")
    assert_raises_when_run(compiled, x, huge, match="out of bounds", valid=(x, torch.tensor([3], device=device)))


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
    valid = (torch.tensor([1, 3], device=device),)
    assert_raises_when_run(compiled, torch.tensor([1, -1], device=device), match="out of bounds", valid=valid)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
def test_gather(dim: int, index_dtype: torch.dtype, device: str) -> None:
    require_eager_index_dtype(index_dtype)
    x = rand(5, 6, 4, device=device)
    shape = [3, 5, 2]
    index = torch.randint(0, x.shape[dim], shape, dtype=index_dtype, device=device)
    check(lambda t, i: torch.gather(t, dim, i), x, index)


def test_gather_out_of_range_raises(device: str) -> None:
    x = rand(4, 3, device=device)
    index = torch.tensor([[0, 4, 1]], device=device)
    compiled = torch.compile(lambda t, i: torch.gather(t, 0, i), backend="luminal")
    valid = (x, torch.tensor([[0, 3, 1]], device=device))
    assert_raises_when_run(compiled, x, index, match="out of bounds", valid=valid)


def test_slice_and_select_scatter(device: str) -> None:
    x = rand(6, 7, device=device)
    check(lambda t, s: torch.slice_scatter(t, s, 1, 1, 7, 2), x, rand(6, 3, device=device))
    check(lambda t, s: torch.slice_scatter(t, s, 0, -4, None), x, rand(4, 7, device=device))
    check(lambda t, s: torch.select_scatter(t, s, 0, -2), x, rand(7, device=device))
    check(lambda t, s: torch.select_scatter(t, s, 1, 3), x, rand(6, device=device))


def _unique_scatter_index(shape, size: int, dim: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """Indices along `dim` without duplicates (scatter with duplicates is unspecified in torch)."""
    index = torch.empty(shape, dtype=torch.int64)
    moved = index.movedim(dim, -1)
    for position in torch.cartesian_prod(*[torch.arange(s) for s in moved.shape[:-1]]).reshape(-1, moved.dim() - 1):
        moved[tuple(position.tolist())] = torch.randperm(size)[: moved.shape[-1]]
    return index.to(dtype=dtype, device=device)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
def test_scatter_src_and_value(dim: int, index_dtype: torch.dtype, device: str) -> None:
    require_eager_index_dtype(index_dtype)
    x = rand(5, 6, 4, device=device)
    shape = [3, 4, 2]
    shape[dim] = min(shape[dim], x.shape[dim])
    index = _unique_scatter_index(shape, x.shape[dim], dim, index_dtype, device)
    src = rand(*shape, device=device)
    check(lambda t, i, s: (torch.scatter(t, dim, i, s), torch.scatter(t, dim, i, -2.5)), x, index, src)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_scatter_reduce(reduce: str, include_self: bool, dtype: torch.dtype, device: str) -> None:
    x = rand(6, 5, dtype=dtype, device=device, low=-4, high=4)
    index = torch.randint(0, 6, (9, 4), device=device)  # duplicates: every reduction is defined for them
    src = rand(9, 4, dtype=dtype, device=device, low=-4, high=4)
    check(lambda t, i, s: torch.scatter_reduce(t, 0, i, s, reduce, include_self=include_self), x, index, src)


def test_scatter_add_and_out_of_range(device: str) -> None:
    x = rand(4, 7, device=device)
    index = torch.randint(0, 7, (4, 12), device=device)
    check(lambda t, i, s: t.scatter_add(1, i, s), x, index, rand(4, 12, device=device), tolerance_scale=4)
    bad = torch.tensor([[0, 7]], device=device)
    compiled = torch.compile(lambda t, i, s: t.scatter_add(1, i, s), backend="luminal")
    src = rand(1, 2, device=device)
    valid = (x, torch.tensor([[0, 6]], device=device), src)
    assert_raises_when_run(compiled, x, bad, src, match="out of bounds", valid=valid)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
def test_index_put_integer_rows(accumulate: bool, dtype: torch.dtype, device: str) -> None:
    x = rand(7, 3, dtype=dtype, device=device)
    rows = torch.randperm(7, device=device)[:4] if not accumulate else torch.randint(-7, 7, (9,), device=device)
    values = rand(rows.shape[0], 3, dtype=dtype, device=device)

    def fn(t: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return t.index_put((i,), v, accumulate=accumulate)

    check(fn, x, rows, values, tolerance_scale=4)
    check(lambda t, i: t.index_put((i,), torch.tensor(2.0, dtype=dtype, device=device), accumulate=accumulate), x, rows)


def test_index_put_bool_mask_is_not_an_integer_index(device: str) -> None:
    x = rand(5, 4, device=device)
    mask = rand(5, dtype=torch.bool, device=device)
    mask[0], mask[1] = True, False  # a mask read as integer indices would hit rows 1 and 0 instead

    def assign(t: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        t = t.clone()
        t[m] = -1.5
        return t

    check(assign, x, mask)
    check(lambda t, m, v: t.index_put((m,), v), x, mask, rand(4, device=device))
    check(lambda t, m: t.index_put((m,), torch.tensor(1.0, device=device), accumulate=True), x, mask)
    full_mask = rand(5, 4, dtype=torch.bool, device=device)
    check(lambda t, m: t.masked_fill(m, 3.0), x, full_mask)


def test_index_put_unsupported_form_falls_back(device: str) -> None:
    from luminal.fallback import LuminalFallbackWarning

    x = rand(5, 4, device=device)
    mask = rand(5, dtype=torch.bool, device=device)
    values = rand(int(mask.sum()), 4, device=device)  # one row of values per selected row
    with pytest.warns(LuminalFallbackWarning, match="index_put"):
        check(lambda t, m, v: t.index_put((m,), v), x, mask, values)


# A failed index check names the user-level op, the input the index came from and the exported
# node, whichever kernel ends up running the check (here the embedding is fused into the view and
# arithmetic after it, which used to be reported as "in view (aten.view.default)").
INDEX_MESSAGES = {
    "embedding": (
        lambda t, i: torch.nn.functional.embedding(i, t).view(-1) * 2,
        [1, 3],
        [1, -1],
        r"embedding: index -1 is out of bounds: valid range \[0, 5\) "
        r"\(indices, aten\.embedding\.default, node embedding\)",
    ),
    "index": (
        lambda t, i: (t[i] + 1).flatten(),
        [0, -5],
        [0, -6],
        r"index: index -6 is out of bounds: valid range \[-5, 5\) \(indices\[0\], aten\.index\.Tensor, node index\)",
    ),
    "index_past_end": (
        lambda t, i: t[:, i].sum(0),
        [0, 2],
        [0, 3],
        r"index: index 3 is out of bounds: valid range \[-3, 3\) \(indices\[1\], aten\.index\.Tensor",
    ),
    "index_select": (
        lambda t, i: torch.index_select(t, 0, i).t() * 3,
        [4, 0],
        [7, 0],
        r"index_select: index 7 is out of bounds: valid range \[0, 5\) \(index, aten\.index_select\.default",
    ),
    "gather": (
        lambda t, i: torch.gather(t, 0, i.view(1, 2).expand(2, 2)).exp(),
        [4, 1],
        [4, 5],
        r"gather: index 5 is out of bounds: valid range \[0, 5\) \(index, aten\.gather\.default",
    ),
}


@pytest.mark.parametrize("case", sorted(INDEX_MESSAGES))
def test_index_check_names_op_and_input(case: str, device: str) -> None:
    fn, valid, bad, match = INDEX_MESSAGES[case]
    x = rand(5, 3, device=device)
    compiled = torch.compile(fn, backend="luminal")
    good = torch.tensor(valid, device=device)
    assert_raises_when_run(compiled, x, torch.tensor(bad, device=device), match=match, valid=(x, good))
