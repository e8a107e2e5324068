"""Reductions (sum, mean, amax, amin) against eager: dimension lists, keepdim, dtypes."""

from __future__ import annotations

import pytest
import torch

from helpers import check, non_contiguous, rand

DIMS = [None, 0, 1, -1, (0, 2), (1, 2)]


@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_reduce_dims(op: str, dim, keepdim: bool, device: str) -> None:
    x = rand(3, 5, 7, device=device)
    fn = getattr(torch, op)
    if dim is None:
        check(lambda t: fn(t) * 1, x, tolerance_scale=4)
    else:
        check(lambda t: fn(t, dim, keepdim=keepdim) * 1, x, tolerance_scale=4)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.uint8], ids=str)
def test_sum_of_integers_is_exact(dtype: torch.dtype, device: str) -> None:
    x = rand(6, 9, dtype=dtype, device=device, low=-1000, high=1000)
    check(lambda t: t.sum(1), x)
    check(lambda t: t.sum(), x)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_reduce_float_dtypes(dtype: torch.dtype, device: str) -> None:
    x = rand(4, 33, dtype=dtype, device=device)
    check(lambda t: (t.sum(-1), t.mean(0), t.amax(1)), x, tolerance_scale=4)


def test_reduce_large_and_non_contiguous(device: str) -> None:
    check(lambda t: t.sum(0), non_contiguous(rand(300, 7, device=device)), tolerance_scale=10)
    check(lambda t: t.amax(), rand(100_000, device=device))


def test_reduce_propagates_nan(device: str) -> None:
    x = rand(3, 4, device=device)
    x[1, 2] = float("nan")
    check(lambda t: (t.amax(1), t.amin(0), t.sum(1)), x)


@pytest.mark.parametrize("dim", [None, 0, -1, 1], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["prod", "any", "all", "argmax", "argmin", "var", "std"])
def test_more_reductions(op: str, dim, keepdim: bool, device: str) -> None:
    x = rand(3, 5, 7, device=device, low=0.5, high=1.5)
    if op in ("any", "all"):
        x = (x > 1.3).to(torch.int32)
    fn = getattr(torch, op)
    if dim is None and op == "prod":
        check(lambda t: fn(t) * 1, x, tolerance_scale=8)
    elif dim is None:
        check(lambda t: fn(t, keepdim=keepdim) if op.startswith("arg") else fn(t), x, tolerance_scale=8)
    else:
        check(lambda t: fn(t, dim, keepdim=keepdim), x, tolerance_scale=8)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float16, torch.bfloat16], ids=str)
def test_prod_any_all_dtypes(dtype: torch.dtype, device: str) -> None:
    x = rand(4, 6, dtype=dtype, device=device, low=-2, high=2)
    check(lambda t: (torch.prod(t, 1), torch.any(t, 0), torch.all(t, -1), torch.any(t)), x, tolerance_scale=8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int8], ids=str)
def test_argmax_argmin_first_occurrence_and_nan(dtype: torch.dtype, device: str) -> None:
    x = rand(5, 9, dtype=dtype, device=device, low=-3, high=3).round()  # ties are likely
    check(lambda t: (t.argmax(1), t.argmin(0), t.argmax(), t.argmin(-1, keepdim=True)), x)
    if dtype.is_floating_point:
        x[2, 4] = float("nan")
        x[2, 7] = float("nan")
        check(lambda t: (t.argmax(1), t.argmin(1)), x)


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_std_correction(correction: int, device: str) -> None:
    x = rand(4, 11, device=device)
    check(
        lambda t: (torch.var(t, 1, correction=correction), torch.std(t, (0, 1), correction=correction, keepdim=True)),
        x,
        tolerance_scale=8,
    )
    check(lambda t: torch.var_mean(t, 0), non_contiguous(x), tolerance_scale=8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim(dtype: torch.dtype, keepdim: bool, device: str) -> None:
    x = rand(4, 7, 3, dtype=dtype, device=device, low=-4, high=4).round()  # ties
    check(lambda t: (torch.max(t, 1, keepdim=keepdim), torch.min(t, -1, keepdim=keepdim)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dtype: torch.dtype, dim: int, device: str) -> None:
    x = rand(5, 9, 3, dtype=dtype, device=device, low=-9, high=9)
    check(lambda t: torch.cumsum(t, dim), x, tolerance_scale=4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_mean_whose_sum_leaves_the_range(dtype: torch.dtype, device: str) -> None:
    """ATen sums a half-precision mean in float32 and rounds once: a global pool over values near
    30,000 has a float16 sum of inf but a finite mean (timm's Res2Net in float16 gave NaN)."""
    x = rand(2, 3, 4, 5, dtype=dtype, device=device, low=25_000, high=35_000)
    check(
        lambda t: (t.mean((2, 3)), t.mean(-1, keepdim=True), t.mean(), torch.nn.functional.adaptive_avg_pool2d(t, 1)),
        x,
    )
    check(lambda t: t.mean(1), non_contiguous(rand(7, 33, dtype=dtype, device=device)))  # one rounding, as eager


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_sum_over_several_dims_rounds_once(dtype: torch.dtype, device: str) -> None:
    """A half sum over two dimensions inlined into its consumer (a scalar's division) accumulates
    over both in float32 and rounds once, as eager: nested folds rounded each row's sum to the
    half type, so rows of +-256 lost their small terms before cancelling (KL divergence, batchmean)."""
    x = rand(4, 8, dtype=dtype, device=device, low=0.5, high=1)
    x[0::2, 0], x[1::2, 0] = 256, -256  # each row's sum is inexact in the half type
    check(lambda t: (t.sum() / 3, t.sum((0, 1), keepdim=True) * 5, t.mean() + 1), x)
