"""Elementwise ops against eager: every dtype each op claims, broadcasting, odd and size-1 shapes,
non-contiguous inputs, Python scalars."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from helpers import FLOAT_DTYPES, assert_raises_when_run, assert_same, capturing_backend, check, non_contiguous, rand

SHAPES = [(7,), (3, 1, 5), (1,), (4, 33)]

UNARY_FLOAT_OPS = {
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "sin": torch.sin,
    "cos": torch.cos,
    "erf": torch.erf,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "floor": torch.floor,
    "ceil": torch.ceil,
    "trunc": torch.trunc,
}
# Ops whose domain is positive numbers.
UNARY_POSITIVE_OPS = {
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal,
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY_FLOAT_OPS))
@pytest.mark.parametrize("shape", SHAPES[:2], ids=str)
def test_unary_float(name: str, dtype: torch.dtype, shape: tuple[int, ...], device: str) -> None:
    check(UNARY_FLOAT_OPS[name], rand(*shape, dtype=dtype, device=device))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY_POSITIVE_OPS))
def test_unary_positive(name: str, dtype: torch.dtype, device: str) -> None:
    check(UNARY_POSITIVE_OPS[name], rand(5, 3, dtype=dtype, device=device, low=0.1, high=4.0))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8], ids=str)
@pytest.mark.parametrize("op", [torch.relu, torch.neg, torch.abs], ids=lambda f: f.__name__)
def test_unary_integer(op, dtype: torch.dtype, device: str) -> None:
    check(op, rand(6, 5, dtype=dtype, device=device, low=-50, high=50))


def test_unary_propagates_nan_and_inf(device: str) -> None:
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 2.5, -2.5], device=device)
    check(lambda t: torch.relu(t) + torch.sigmoid(t) * 2 - torch.tanh(t), x)
    check(lambda t: torch.maximum(t, torch.zeros_like(t)), x)


def test_exp_of_integer_promotes(device: str) -> None:
    check(torch.exp, rand(4, 4, dtype=torch.int64, device=device, low=-5, high=5))


def test_unary_non_contiguous(device: str) -> None:
    x = non_contiguous(rand(6, 9, device=device))
    assert not x.is_contiguous()
    check(lambda t: torch.sigmoid(t) * 3, x)


BINARY_OPS = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}
BROADCAST_PAIRS = [((5,), (5,)), ((3, 1, 5), (4, 1)), ((1,), (2, 3)), ((4, 33), (33,)), ((2, 1), (1, 7))]


@pytest.mark.parametrize("name", sorted(BINARY_OPS))
@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
def test_binary_broadcast(name: str, shapes, device: str) -> None:
    a, b = (rand(*s, device=device) for s in shapes)
    check(BINARY_OPS[name], a, b)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_binary_float_dtypes(name: str, dtype: torch.dtype, device: str) -> None:
    check(BINARY_OPS[name], rand(4, 6, dtype=dtype, device=device), rand(6, dtype=dtype, device=device))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8], ids=str)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "maximum", "minimum"])
def test_binary_integer_exact(name: str, dtype: torch.dtype, device: str) -> None:
    a = rand(5, 7, dtype=dtype, device=device, low=-100, high=100)
    b = rand(7, dtype=dtype, device=device, low=-100, high=100)
    check(BINARY_OPS[name], a, b)


def test_integer_overflow_wraps_like_eager(device: str) -> None:
    a = torch.tensor([2**31 - 1, -(2**31), 100000], dtype=torch.int32, device=device)
    b = torch.tensor([1, -1, 100000], dtype=torch.int32, device=device)
    check(lambda x, y: (x + y, x - y, x * y), a, b)


@pytest.mark.parametrize("source", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("target", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8], ids=str)
def test_float_to_integer_casts_out_of_range_follow_eager_on_the_cpu(
    source: torch.dtype, target: torch.dtype, device: str
) -> None:
    """NaN, infinities and values outside the target's range are undefined in torch; eager on the
    CPU gives INT64_MIN for int64 (and uint8, converted through int64) and INT32_MIN, narrowed, for
    int32, int16 and int8. luminal gives those on both devices (eager on CUDA saturates instead)."""
    values = [float("nan"), float("inf"), -float("inf"), 3e10, -3e10, 65536.5, 300.0, -129.0, 2.7, -2.7, 0.5]
    x = torch.tensor(values, dtype=source)
    expected = x.to(target)  # eager on the CPU
    actual = torch.compile(lambda t: (t * 1).to(target), backend="luminal")(x.to(device))
    assert torch.equal(actual.cpu(), expected), f"{actual.tolist()} != {expected.tolist()}"


def test_integer_true_division_gives_float(device: str) -> None:
    a = rand(6, dtype=torch.int64, device=device, low=-20, high=20)
    b = rand(6, dtype=torch.int64, device=device, low=1, high=7)
    check(torch.div, a, b)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_integer_rounding_division(mode: str, device: str) -> None:
    a = rand(40, dtype=torch.int64, device=device, low=-50, high=50)
    b = rand(40, dtype=torch.int64, device=device, low=1, high=9) * (2 * (torch.rand(40, device=device) > 0.5) - 1)
    check(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)


def _floating_dividends_and_divisors(dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Random values plus the cases torch's floating floor division corrects: exact multiples of an
    inexact divisor (1.0 // 0.1 is 9), zero dividends (signed zeros), division by zero."""
    a = rand(6, 7, dtype=dtype, device=device, low=-50, high=50)
    b = rand(6, 7, dtype=dtype, device=device, low=-4, high=4)
    special_a = torch.tensor([1.0, -1.0, 0.3, 7.0, 0.0, -0.0, 5.0, -5.0, 0.0], dtype=dtype, device=device)
    special_b = torch.tensor([0.1, 0.1, 0.1, -0.7, 3.0, 3.0, 0.0, 0.0, 0.0], dtype=dtype, device=device)
    a[0, :] = special_a[:7]
    b[0, :] = special_b[:7]
    a[1, :2], b[1, :2] = special_a[7:], special_b[7:]
    return a, b


@pytest.mark.parametrize("mode", ["floor", "trunc"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_floating_rounding_division(mode: str, dtype: torch.dtype, device: str) -> None:
    a, b = _floating_dividends_and_divisors(dtype, device)
    check(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)
    check(lambda x, y: torch.div(x, y, rounding_mode=mode), non_contiguous(a), b[0])  # broadcast row
    check(lambda x: torch.div(x, 0.3, rounding_mode=mode), a)  # a Python scalar divisor
    check(lambda x: torch.div(x, -2, rounding_mode=mode), a[:1, :1])  # size 1


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_floating_floor_divide(dtype: torch.dtype, device: str) -> None:
    a, b = _floating_dividends_and_divisors(dtype, device)
    check(lambda x, y: (torch.floor_divide(x, y), x // y, x // 4), a, b)


def test_integer_by_float_rounding_division_promotes(device: str) -> None:
    """XCiT's positional encoding: torch.div(arange, 2, rounding_mode="floor") on float32, and
    integer tensors divided by a float scalar (a floating result)."""

    def positional(x: torch.Tensor) -> torch.Tensor:
        dims = torch.arange(x.shape[-1], device=x.device, dtype=torch.float32)
        return x / 10000 ** (2 * torch.div(dims, 2, rounding_mode="floor") / x.shape[-1])

    check(positional, rand(3, 32, device=device))
    check(lambda x: torch.div(x, 2.5, rounding_mode="floor"), rand(9, dtype=torch.int64, device=device, low=-9, high=9))


def test_integer_division_by_zero_raises(device: str) -> None:
    a = torch.tensor([4, 5], device=device)
    b = torch.tensor([2, 0], device=device)
    compiled = torch.compile(lambda x, y: torch.div(x, y, rounding_mode="floor"), backend="luminal")
    assert_raises_when_run(compiled, a, b, match="division by zero", valid=(a, torch.tensor([2, 3], device=device)))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + 2,
        lambda x: x * 0.5,
        lambda x: x - 1.25,
        lambda x: 3 - x,
        lambda x: x / 4,
        lambda x: 2.0 / (x.abs() + 1),
        lambda x: torch.add(x, x, alpha=3),
        lambda x: torch.sub(x, 1.5, alpha=2),
    ],
    ids=["add_int", "mul_float", "sub_float", "rsub", "div", "rdiv", "alpha", "sub_alpha"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64], ids=str)
def test_scalar_operands(fn, dtype: torch.dtype, device: str) -> None:
    # Integer tensors with float scalars promote to float32, as in eager.
    check(fn, rand(3, 5, dtype=dtype, device=device, low=-9, high=9))


COMPARISONS = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]


@pytest.mark.parametrize("op", COMPARISONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.bfloat16], ids=str)
def test_comparisons(op, dtype: torch.dtype, device: str) -> None:
    a = rand(4, 6, dtype=dtype, device=device, low=-3, high=3)
    b = rand(6, dtype=dtype, device=device, low=-3, high=3)
    check(op, a, b)
    check(lambda x: op(x, 1), a)


def test_comparison_mixed_dtypes(device: str) -> None:
    a = rand(8, dtype=torch.int64, device=device, low=-4, high=4)
    b = rand(8, device=device)
    check(torch.lt, a, b)
    check(lambda x: x > 0.5, a)


def test_where(device: str) -> None:
    c = rand(3, 1, 4, dtype=torch.bool, device=device)
    a = rand(3, 5, 4, device=device)
    b = rand(4, device=device)
    check(torch.where, c, a, b)
    check(lambda cond, x: torch.where(cond, x, 0.0), c, a)


@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (None, 0.5), (-0.25, None)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_clamp(bounds, dtype: torch.dtype, device: str) -> None:
    low, high = bounds
    x = rand(5, 7, dtype=dtype, device=device)
    x[0, 0] = float("nan")
    check(lambda t: torch.clamp(t, low, high), x)


def test_clamp_integer(device: str) -> None:
    check(lambda t: torch.clamp(t, -3, 4), rand(20, dtype=torch.int64, device=device, low=-10, high=10))


def test_logical_not(device: str) -> None:
    check(torch.logical_not, rand(9, dtype=torch.bool, device=device))
    check(torch.logical_not, rand(9, dtype=torch.int32, device=device, low=-2, high=2))


def test_chained_elementwise_fuses_and_matches(device: str) -> None:
    a, b, c = (rand(16, 17, device=device) for _ in range(3))
    check(lambda x, y, z: torch.sigmoid(x * y + z) - torch.tanh(z) / (1 + x.abs()), a, b, c)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_large_elementwise_aligned_and_misaligned(dtype: torch.dtype, device: str) -> None:
    """A large elementwise kernel (GELU of a matmul output plus a bias, SiLU times a gate) reads and
    writes groups of consecutive elements with vectors where the pointers are aligned (the first
    call) and element by element where an input starts one element into its storage (the second)."""
    bias = rand(384, dtype=dtype, device=device)

    def pointwise(x: torch.Tensor, gate: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.nn.functional.gelu(x + b), torch.nn.functional.silu(x) * gate

    captured: list[Any] = []
    compiled = torch.compile(pointwise, backend=capturing_backend(captured))
    gate = rand(200, 384, dtype=dtype, device=device)
    storage = rand(200 * 384 + 1, dtype=dtype, device=device)
    for x in (rand(200, 384, dtype=dtype, device=device), storage[1:].view(200, 384)):
        assert_same(compiled(x, gate, bias), pointwise(x, gate, bias), tolerance_scale=4)
    group = 4 if dtype == torch.float32 else 8
    assert any(f"lm_group * {group};" in graph.cuda_source() for graph in captured), "no vector path"
