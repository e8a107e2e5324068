"""Composite ATen ops luminal translates natively (kept whole by the export instead of decomposed):
log-sum-exp, std/var with mean, norms, scans, triangular masks, stacking/splitting, products."""

from __future__ import annotations

import math

import pytest
import torch

import luminal
from helpers import FLOAT_DTYPES, FunctionModule, check, non_contiguous, rand
from luminal.decompositions import decomposition_table

# Each op's graph must keep the target whole: the test then goes through its translator.
KEPT_WHOLE = [
    ("logsumexp.default", lambda x: torch.logsumexp(x, 1), (3, 4)),
    ("std.correction", lambda x: torch.std(x, 1, correction=0), (3, 4)),
    ("std.dim", lambda x: torch.std(x, 1), (3, 4)),
    ("std_mean.correction", lambda x: torch.std_mean(x, 1, correction=2), (3, 4)),
    ("var_mean.correction", lambda x: torch.var_mean(x, 1, correction=0), (3, 4)),
    ("var_mean.dim", lambda x: torch.var_mean(x, 1), (3, 4)),
    ("aminmax.default", lambda x: torch.aminmax(x), (3, 4)),
    ("nansum.default", lambda x: torch.nansum(x, 1), (3, 4)),
    ("count_nonzero.default", lambda x: torch.count_nonzero(x, 1), (3, 4)),
    ("count_nonzero.dim_IntList", lambda x: torch.count_nonzero(x, (0, 1)), (3, 4)),
    ("linalg_vector_norm.default", lambda x: torch.linalg.vector_norm(x), (3, 4)),
    ("norm.ScalarOpt_dim", lambda x: torch.ops.aten.norm.ScalarOpt_dim(x, 3, [1]), (3, 4)),
    ("trace.default", lambda x: torch.trace(x), (3, 4)),
    ("max.default", lambda x: torch.max(x), (3, 4)),
    ("min.default", lambda x: torch.min(x), (3, 4)),
    ("cumprod.default", lambda x: torch.cumprod(x, 1), (3, 4)),
    ("logcumsumexp.default", lambda x: torch.logcumsumexp(x, 1), (3, 4)),
    ("cummax.default", lambda x: torch.cummax(x, 1), (3, 4)),
    ("cummin.default", lambda x: torch.cummin(x, 1), (3, 4)),
    ("dist.default", lambda x: torch.dist(x, x.flip(0)), (3, 4)),
    ("tril.default", lambda x: torch.tril(x, 1), (3, 4)),
    ("triu.default", lambda x: torch.triu(x), (3, 4)),
    ("roll.default", lambda x: torch.roll(x, 1), (3, 4)),
    ("rot90.default", lambda x: torch.rot90(x), (3, 4)),
    ("unbind.int", lambda x: torch.unbind(x, 1), (3, 4)),
    ("split.Tensor", lambda x: torch.split(x, 2, 1), (3, 4)),
    ("stack.default", lambda x: torch.stack([x, x], 1), (3, 4)),
    ("diag_embed.default", lambda x: torch.diag_embed(x), (3, 4)),
    ("pixel_shuffle.default", lambda x: torch.pixel_shuffle(x, 2), (1, 4, 3, 3)),
    ("pixel_unshuffle.default", lambda x: torch.pixel_unshuffle(x, 2), (1, 1, 4, 4)),
    ("eye.default", lambda x: torch.eye(4) + x, (4, 4)),
    ("eye.m", lambda x: torch.eye(4, 3) + x, (4, 3)),
    ("linspace.default", lambda x: torch.linspace(0, 1, 4) + x, (4,)),
    ("logspace.default", lambda x: torch.logspace(0, 1, 4) + x, (4,)),
    ("alias_copy.default", lambda x: torch.alias_copy(x), (3, 4)),
    ("squeeze_copy.dims", lambda x: torch.squeeze_copy(x, (0, 2)), (1, 4, 1)),
    ("squeeze_copy.dim", lambda x: torch.squeeze_copy(x, 0), (1, 4, 1)),
    ("baddbmm.default", lambda x: torch.baddbmm(x, x, x), (2, 3, 3)),
    ("addr.default", lambda x: torch.addr(x, x[0], x[1]), (3, 3)),
    ("dot.default", lambda x: torch.dot(x, x), (5,)),
    ("vdot.default", lambda x: torch.vdot(x, x), (5,)),
    ("mv.default", lambda x: torch.mv(x, x[0]), (3, 3)),
    ("addmv.default", lambda x: torch.addmv(x[0], x, x[1]), (3, 3)),
]


def test_targets_are_kept_whole() -> None:
    table = decomposition_table()
    for target, fn, shape in KEPT_WHOLE:
        graph = torch.export.export(FunctionModule(fn), (torch.randn(*shape),)).run_decompositions(table).graph
        targets = {str(n.target) for n in graph.nodes if n.op == "call_function"}
        assert f"aten.{target}" in targets, (target, targets)
        assert f"torch.ops.aten.{target}" in luminal.decompositions.natively_translated()


# ---- reductions ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("dim,keepdim", [(-1, True), ((0, 2), False)], ids=str)
def test_logsumexp(dtype: torch.dtype, dim, keepdim: bool, device: str) -> None:
    x = rand(3, 5, 1, dtype=dtype, device=device, low=-20, high=20)
    check(lambda t: torch.logsumexp(t, dim, keepdim=keepdim), x, tolerance_scale=4)


def test_logsumexp_stability_and_infinities(device: str) -> None:
    x = rand(4, 7, device=device) * 100 + 500  # exp would overflow without the max shift
    x[1] = float("-inf")  # an all -inf row gives -inf
    x[2, 3] = float("inf")
    x[3, :3] = float("-inf")
    check(lambda t: torch.logsumexp(t, 1), non_contiguous(x), tolerance_scale=4)
    check(lambda t: torch.logsumexp(t, 0, keepdim=True), x, tolerance_scale=4)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool], ids=str)
def test_logsumexp_of_integers_is_float(dtype: torch.dtype, device: str) -> None:
    check(lambda t: torch.logsumexp(t, (0, 1)), rand(3, 4, dtype=dtype, device=device, low=0, high=20))


@pytest.mark.parametrize("op", ["std", "var_mean", "std_mean"])
@pytest.mark.parametrize("dim,keepdim,correction", [(1, False, None), ((0, 2), True, 0), (None, False, 2)], ids=str)
def test_std_and_moments(op: str, dim, keepdim: bool, correction, device: str) -> None:
    fn = getattr(torch, op)
    x = non_contiguous(rand(4, 5, 3, device=device))
    kwargs = {} if correction is None else {"correction": correction}
    check(lambda t: fn(t, dim, keepdim=keepdim, **kwargs), x, tolerance_scale=8)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_std_and_moments_dtypes(dtype: torch.dtype, device: str) -> None:
    x = rand(6, 1, 9, dtype=dtype, device=device)
    check(lambda t: (torch.std(t), torch.var_mean(t, -1, unbiased=False), torch.std_mean(t, 0)), x, tolerance_scale=4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.uint8, torch.bool], ids=str)
@pytest.mark.parametrize("dim,keepdim", [(None, True), (-1, False)], ids=str)
def test_aminmax(dtype: torch.dtype, dim, keepdim: bool, device: str) -> None:
    if device == "cuda" and dim is None and keepdim:
        pytest.skip("eager CUDA returns 0-d results here, its CPU kernel and meta function keep the dims")
    x = rand(3, 1, 5, dtype=dtype, device=device, low=-50, high=50)
    check(lambda t: (torch.aminmax(t), torch.aminmax(t, dim=dim, keepdim=keepdim)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int8, torch.bool], ids=str)
def test_max_min_full(dtype: torch.dtype, device: str) -> None:
    x = rand(5, 3, 7, dtype=dtype, device=device, low=-90, high=90)
    check(lambda t: (torch.max(t), torch.min(t)), non_contiguous(x))
    check(lambda t: (t.max(), t.min()), rand(1, dtype=dtype, device=device))


def test_max_min_full_propagate_nan(device: str) -> None:
    x = rand(4, 6, device=device)
    x[2, 1] = float("nan")
    check(lambda t: (torch.max(t), torch.min(t), torch.aminmax(t)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool], ids=str)
def test_nansum(dtype: torch.dtype, device: str) -> None:
    x = rand(4, 1, 6, dtype=dtype, device=device, low=-20, high=20)
    if dtype.is_floating_point:
        x[0, 0, 1] = x[3, 0, 5] = float("nan")
    check(lambda t: (torch.nansum(t), torch.nansum(t, (0, 2), keepdim=True)), x, tolerance_scale=4)
    if dtype.is_floating_point:
        check(lambda t: torch.nansum(t, -1, dtype=torch.float64), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.bool], ids=str)
def test_count_nonzero(dtype: torch.dtype, device: str) -> None:
    x = rand(5, 1, 7, dtype=dtype, device=device, low=-1, high=1)
    check(lambda t: (torch.count_nonzero(t), torch.count_nonzero(t, 0), torch.count_nonzero(t, (0, 2))), x)


ORDS = [2, 1, math.inf, -math.inf, 0, 3, 0.5, -1.5]


@pytest.mark.parametrize("ord", ORDS, ids=str)
def test_vector_norm(ord, device: str) -> None:
    x = rand(4, 1, 5, device=device)
    x[1, 0, 2] = 0
    check(lambda t: torch.linalg.vector_norm(t, ord), x, tolerance_scale=8)
    check(lambda t: torch.linalg.vector_norm(t, ord, dim=(0, 2), keepdim=True), non_contiguous(x), tolerance_scale=8)
    check(lambda t: torch.linalg.vector_norm(t, ord, dim=-1), x, tolerance_scale=8)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_vector_norm_dtypes(dtype: torch.dtype, device: str) -> None:
    x = rand(3, 33, dtype=dtype, device=device)
    check(lambda t: (t.norm(), torch.linalg.vector_norm(t, 1, dim=0), torch.norm(t, 3, dim=1)), x, tolerance_scale=4)
    check(lambda t: torch.linalg.vector_norm(t, dim=1, dtype=torch.float64), x.float())


def test_norm_scalar_opt_dim(device: str) -> None:
    x = rand(3, 4, 5, device=device)
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, 3, [1, 2], True), x, tolerance_scale=4)
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, None, [0]), x, tolerance_scale=4)


@pytest.mark.parametrize("p", [2, 1, math.inf, 0, 3.5], ids=str)
def test_dist(p, device: str) -> None:
    a, b = rand(3, 1, 5, device=device), rand(4, 5, device=device)
    check(lambda x, y: torch.dist(x, y, p), a, b, tolerance_scale=8)
    check(lambda x, y: torch.dist(x, y), rand(7, dtype=torch.float64, device=device), rand(7, device=device))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.uint8], ids=str)
@pytest.mark.parametrize("shape", [(3, 6), (7, 2)], ids=str)
def test_trace(dtype: torch.dtype, shape, device: str) -> None:
    check(lambda t: torch.trace(t), rand(*shape, dtype=dtype, device=device, low=0, high=20), tolerance_scale=4)


# ---- scans -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.bool], ids=str)
@pytest.mark.parametrize("dim", [0, -1], ids=str)
def test_cumprod(dtype: torch.dtype, dim: int, device: str) -> None:
    x = rand(3, 1, 6, dtype=dtype, device=device, low=-2, high=2)
    if dtype.is_floating_point:
        x = rand(3, 1, 6, dtype=dtype, device=device, low=0.5, high=1.5)
    check(lambda t: torch.cumprod(t, dim), non_contiguous(x), tolerance_scale=4)


def test_cumprod_dtype_arg(device: str) -> None:
    check(lambda t: torch.cumprod(t, 0, dtype=torch.float64), rand(9, device=device, low=0.5, high=1.5))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_logcumsumexp(dtype: torch.dtype, device: str) -> None:
    x = rand(3, 9, dtype=dtype, device=device, low=-30, high=30)
    check(lambda t: (torch.logcumsumexp(t, 1), torch.logcumsumexp(t, 0)), x, tolerance_scale=4)


def test_logcumsumexp_infinities(device: str) -> None:
    x = rand(3, 6, device=device) * 200
    x[0, :2] = float("-inf")
    x[1] = float("-inf")
    x[2, 3] = float("inf")
    check(lambda t: torch.logcumsumexp(t, 1), x, tolerance_scale=4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.uint8, torch.bool], ids=str)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(op: str, dtype: torch.dtype, device: str) -> None:
    fn = getattr(torch, op)
    # Few distinct values: many ties, where torch reports the last index.
    x = rand(4, 1, 11, dtype=dtype, device=device, low=-3, high=3)
    if dtype.is_floating_point:
        x = x.round()
    check(lambda t: (fn(t, -1), fn(t, 0)), non_contiguous(x))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_nan(op: str, device: str) -> None:
    x = torch.tensor([[1.0, 3, 3, 2, float("nan"), 5, float("nan"), 1], [2, 2, 1, 1, 0, 0, 4, 4]], device=device)
    check(lambda t: getattr(torch, op)(t, 1), x)


# ---- shape ops -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("op", ["tril", "triu"])
def test_tril_triu(op: str, dtype: torch.dtype, device: str) -> None:
    fn = getattr(torch, op)
    for shape in [(4, 4), (3, 6), (2, 7, 3), (1, 5)]:
        x = non_contiguous(rand(*shape, dtype=dtype, device=device))
        check(lambda t: (fn(t), fn(t, 1), fn(t, -2), fn(t, 9)), x)


@pytest.mark.parametrize(
    "shifts,dims",
    [(1, None), (-7, None), (2, 0), ((1, -3), (0, 2)), ((2, 5), (1, 1)), (4, -1)],
    ids=str,
)
def test_roll(shifts, dims, device: str) -> None:
    x = non_contiguous(rand(3, 1, 5, device=device))
    check(lambda t: torch.roll(t, shifts, dims), x)


def test_roll_integers(device: str) -> None:
    check(lambda t: torch.roll(t, (3, -1), (0, 1)), rand(5, 4, dtype=torch.int32, device=device, low=-99, high=99))


@pytest.mark.parametrize("k", [1, 2, 3, -1], ids=str)
@pytest.mark.parametrize("dims", [(2, 0), (-1, -2)], ids=str)
def test_rot90(k: int, dims, device: str) -> None:
    x = non_contiguous(rand(2, 3, 5, device=device))
    check(lambda t: torch.rot90(t, k, dims) * 1, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1], ids=str)
def test_unbind(dim: int, dtype: torch.dtype, device: str) -> None:
    x = non_contiguous(rand(3, 1, 4, dtype=dtype, device=device))
    check(lambda t: [u * 2 for u in torch.unbind(t, dim)], x)


@pytest.mark.parametrize("size,dim", [(2, 0), (3, -1), (1, 1), (10, 2), (4, 2)], ids=str)
def test_split_tensor(size: int, dim: int, device: str) -> None:
    x = non_contiguous(rand(5, 3, 7, device=device))
    check(lambda t: [s + 1 for s in torch.split(t, size, dim)], x)
    check(lambda t: [c * 2 for c in t.chunk(3, dim)], x)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3], ids=str)
def test_stack(dim: int, device: str) -> None:
    a, b, c = rand(4, 1, device=device), non_contiguous(rand(4, 1, device=device)), rand(4, 1, device=device)
    check(lambda x, y, z: torch.stack([x, y, z], dim), a, b, c)
    check(lambda x: torch.stack([x], dim), a)


def test_stack_mixed_dtypes(device: str) -> None:
    a, b = rand(3, 2, dtype=torch.int32, device=device), rand(3, 2, dtype=torch.float16, device=device)
    check(lambda x, y: torch.stack([x, y]), a, b)
    check(lambda x, y: torch.stack((x, y), -1), rand(5, dtype=torch.bool, device=device), rand(5, device=device))


@pytest.mark.parametrize("offset,dim1,dim2", [(0, -2, -1), (1, 0, 2), (-2, 2, 0), (3, 1, -1)], ids=str)
def test_diag_embed(offset: int, dim1: int, dim2: int, device: str) -> None:
    x = non_contiguous(rand(2, 4, device=device))
    check(lambda t: torch.diag_embed(t, offset, dim1, dim2), x)
    check(lambda t: torch.diag_embed(t, offset), rand(3, dtype=torch.int64, device=device))


@pytest.mark.parametrize("factor,shape", [(2, (1, 8, 3, 5)), (3, (2, 2, 9, 2, 1)), (1, (3, 4, 2))], ids=str)
def test_pixel_shuffle(factor: int, shape, device: str) -> None:
    x = rand(*shape, device=device)
    check(lambda t: torch.pixel_shuffle(t, factor) * 1, x)
    check(lambda t: torch.pixel_unshuffle(t, 1) * 1, x)
    un = rand(*shape[:-2], shape[-2] * factor, shape[-1] * factor, device=device)
    check(lambda t: torch.pixel_unshuffle(t, factor) * 1, non_contiguous(un))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool], ids=str)
def test_eye(dtype: torch.dtype, device: str) -> None:
    check(
        lambda t: (torch.eye(5, dtype=dtype, device=t.device), torch.eye(3, 6, dtype=dtype, device=t.device)), rand(1)
    )
    check(lambda t: torch.eye(1, 4, device=t.device) + t, rand(1, 4, device=device))


LINSPACE = [(0, 1, 5), (-3.3, 7.7, 16), (2.5, 2.5, 4), (1, 4, 1), (0, 3, 0), (1e-3, 123.4, 100)]


@pytest.mark.parametrize("start,end,steps", LINSPACE, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64], ids=str)
def test_linspace(start, end, steps: int, dtype: torch.dtype, device: str) -> None:
    if not dtype.is_floating_point:
        start, end = int(start), int(end)
    # Eager fuses start + step * i into one multiply-add; luminal does too for float types, while
    # f64 and integer results may differ by an ulp where the step is not a dyadic fraction.
    exact = dtype not in (torch.float64, torch.int64) or steps <= 1 or ((end - start) / (steps - 1)) * 64 % 1 == 0
    fn = lambda t: torch.linspace(start, end, steps, dtype=dtype, device=t.device) + t  # noqa: E731
    zero = torch.zeros(1, dtype=dtype, device=device)
    if not dtype.is_floating_point and steps > 1 and (end - start) % (steps - 1) != 0:
        # A fractional step truncated to integers: refused (eager's rounding is not reproducible),
        # so it runs in eager and still matches.
        with pytest.warns(luminal.LuminalFallbackWarning, match="linspace"):
            actual = torch.compile(fn, backend="luminal")(zero)
        assert torch.equal(actual, fn(zero))
        return
    if exact:
        actual = check(fn, zero)
        if device == "cpu":
            assert torch.equal(actual, fn(zero))
    elif dtype.is_floating_point:
        check(fn, zero, tolerance_scale=2)
    else:
        pytest.skip("integer linspace with a non-dyadic step may differ from eager by one (unfused multiply-add)")


@pytest.mark.parametrize("start,end,steps", LINSPACE, ids=str)
@pytest.mark.parametrize("dtype,base", [(torch.float32, 10.0), (torch.float64, 1.5), (torch.int64, 2.0)], ids=str)
def test_logspace(start, end, steps: int, base: float, dtype: torch.dtype, device: str) -> None:
    if not dtype.is_floating_point:
        start, end = int(start) % 5, int(end) % 5
    fn = lambda t: torch.logspace(start, end, steps, base, dtype=dtype, device=t.device)  # noqa: E731
    # Bit-exact with eager's CPU kernel; CUDA's pow differs from the host's in the last bits.
    actual = check(fn, rand(1, device=device), tolerance_scale=1 if device == "cpu" else 8)
    if device == "cpu":
        assert torch.equal(actual, fn(torch.zeros(1)))


def test_copy_variants(device: str) -> None:
    x = rand(1, 4, 1, device=device)
    check(
        lambda t: (
            torch.alias_copy(t) * 2,
            torch.squeeze_copy(t),
            torch.squeeze_copy(t, 2),
            torch.squeeze_copy(t, (0, 1)),
        ),
        x,
    )


# ---- linear algebra ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 1.5)], ids=str)
def test_baddbmm(beta, alpha, dtype: torch.dtype, device: str) -> None:
    b1, b2 = rand(3, 5, 4, dtype=dtype, device=device), non_contiguous(rand(3, 4, 7, dtype=dtype, device=device))
    bias = rand(3, 5, 7, dtype=dtype, device=device)
    if beta == 0:
        bias[0, 1, 2] = float("nan")  # ignored when beta is 0
    check(lambda s, x, y: torch.baddbmm(s, x, y, beta=beta, alpha=alpha), bias, b1, b2, tolerance_scale=8)
    check(lambda s, x, y: torch.baddbmm(s, x, y, beta=beta, alpha=alpha), bias[0, :1], b1, b2, tolerance_scale=8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int16, torch.bool], ids=str)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (2, 3), (0, -1)], ids=str)
def test_addr(beta, alpha, dtype: torch.dtype, device: str) -> None:
    if dtype == torch.bool:
        beta, alpha = bool(beta), bool(alpha)
    v1, v2 = rand(5, dtype=dtype, device=device), rand(3, dtype=dtype, device=device)
    check(lambda s, x, y: torch.addr(s, x, y, beta=beta, alpha=alpha), rand(5, 3, dtype=dtype, device=device), v1, v2)
    check(lambda s, x, y: torch.addr(s, x, y, beta=beta, alpha=alpha), rand(1, 3, dtype=dtype, device=device), v1, v2)


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("n", [1, 300], ids=str)
def test_dot_vdot(n: int, dtype: torch.dtype, device: str) -> None:
    if device == "cuda" and not dtype.is_floating_point:
        pytest.skip("eager has no integer dot on CUDA to compare with")
    x, y = rand(n, dtype=dtype, device=device), non_contiguous(rand(n, dtype=dtype, device=device))
    check(lambda a, b: (torch.dot(a, b), torch.vdot(a, b)), x, y, tolerance_scale=8)


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, torch.int32], ids=str)
@pytest.mark.parametrize("shape", [(5, 7), (1, 3)], ids=str)
def test_mv_addmv(shape, dtype: torch.dtype, device: str) -> None:
    if device == "cuda" and not dtype.is_floating_point:
        pytest.skip("eager has no integer addmv on CUDA to compare with")
    m, v = non_contiguous(rand(*shape, dtype=dtype, device=device)), rand(shape[1], dtype=dtype, device=device)
    s = rand(shape[0], dtype=dtype, device=device)
    check(lambda a, b: torch.mv(a, b), m, v, tolerance_scale=8)
    check(lambda c, a, b: torch.addmv(c, a, b), s, m, v, tolerance_scale=8)
    check(lambda c, a, b: torch.addmv(c, a, b, beta=2, alpha=3), s[:1], m, v, tolerance_scale=8)
    if dtype.is_floating_point:
        s[0] = float("nan")  # beta == 0 ignores self
        check(lambda c, a, b: torch.addmv(c, a, b, beta=0, alpha=0.5), s, m, v, tolerance_scale=8)
