"""Elementwise math beyond the basics, against eager: trigonometric and hyperbolic functions,
logarithms and exponentials, rounding, classification (isnan/isinf), logical and bitwise ops, pow,
remainders, activations. Every float dtype each op claims; integers bit-exact."""

from __future__ import annotations

import pytest
import torch

from helpers import FLOAT_DTYPES, check, non_contiguous, rand

# op -> (function, low, high): inputs drawn inside the op's domain.
UNARY_MATH = {
    "tan": (torch.tan, -1.2, 1.2),
    "asin": (torch.asin, -0.95, 0.95),
    "acos": (torch.acos, -0.95, 0.95),
    "atan": (torch.atan, -4.0, 4.0),
    "sinh": (torch.sinh, -3.0, 3.0),
    "cosh": (torch.cosh, -3.0, 3.0),
    "asinh": (torch.asinh, -4.0, 4.0),
    "acosh": (torch.acosh, 1.05, 6.0),
    "atanh": (torch.atanh, -0.9, 0.9),
    "expm1": (torch.expm1, -3.0, 3.0),
    "log1p": (torch.log1p, -0.9, 6.0),
    "log2": (torch.log2, 0.05, 9.0),
    "log10": (torch.log10, 0.05, 9.0),
    "exp2": (torch.exp2, -6.0, 6.0),
    "sign": (torch.sign, -3.0, 3.0),
    "round": (torch.round, -6.0, 6.0),
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY_MATH))
def test_unary_math(name: str, dtype: torch.dtype, device: str) -> None:
    fn, low, high = UNARY_MATH[name]
    check(fn, rand(3, 1, 37, dtype=dtype, device=device, low=low, high=high))


@pytest.mark.parametrize("name", ["expm1", "log1p", "atan", "exp2"])
def test_unary_math_of_integers_promotes(name: str, device: str) -> None:
    fn = UNARY_MATH[name][0]
    check(fn, rand(4, 5, dtype=torch.int64, device=device, low=0, high=6))


def test_unary_math_non_contiguous(device: str) -> None:
    check(lambda t: torch.log1p(t.abs()) + torch.atan(t), non_contiguous(rand(7, 6, device=device)))


def test_round_half_to_even_and_sign_of_integers(device: str) -> None:
    halves = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997], device=device)
    check(torch.round, halves)
    check(torch.sign, rand(20, dtype=torch.int32, device=device, low=-3, high=3))


SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.5, -7.25, 3e38]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_isnan_isinf(dtype: torch.dtype, device: str) -> None:
    x = torch.tensor(SPECIALS, dtype=torch.float64, device=device).to(dtype)  # 3e38 overflows f16
    check(lambda t: (torch.isnan(t), torch.isinf(t), torch.isfinite(t)), x)


def test_isnan_isinf_of_integers(device: str) -> None:
    check(lambda t: (torch.isnan(t), torch.isinf(t)), rand(9, dtype=torch.int64, device=device))


LOGICAL = [torch.logical_and, torch.logical_or, torch.logical_xor]


@pytest.mark.parametrize("op", LOGICAL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtypes", [(torch.bool, torch.bool), (torch.int32, torch.float32)], ids=str)
def test_logical(op, dtypes, device: str) -> None:
    a = rand(4, 6, dtype=dtypes[0], device=device, low=-1, high=1)
    b = rand(6, dtype=dtypes[1], device=device, low=-1, high=1)
    if b.dtype.is_floating_point:
        b = b.round()  # zeros are likely
    check(op, a, b)


BITWISE = [torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor]


@pytest.mark.parametrize("op", BITWISE, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool], ids=str)
def test_bitwise(op, dtype: torch.dtype, device: str) -> None:
    a = rand(5, 7, dtype=dtype, device=device, low=-100, high=100)
    b = rand(7, dtype=dtype, device=device, low=-100, high=100)
    check(op, a, b)
    if dtype != torch.bool:
        check(lambda x: op(x, 12), a)
    check(torch.bitwise_not, a)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_pow_float(dtype: torch.dtype, device: str) -> None:
    base = rand(4, 9, dtype=dtype, device=device, low=0.1, high=3.0)
    exponent = rand(9, dtype=dtype, device=device, low=-2.0, high=2.0)
    check(torch.pow, base, exponent)
    check(lambda x: x**2, rand(4, 9, dtype=dtype, device=device))
    check(lambda x: x**0.5, base)
    check(lambda x: 2.0**x, exponent)


# Where pow, sqrt and products part: infinities, signed zeros, NaN, negative bases.
POW_SPECIALS = [float("-inf"), float("inf"), float("nan"), -0.0, 0.0, -2.5, -1.0, 1.0, 0.3, 4.0]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("exponent", [0.5, -0.5, -1.0, 2, 3, -2.0, 1.7, -3.0, 0.0, 1.0])
def test_pow_scalar_exponent_as_aten_computes_it(dtype: torch.dtype, exponent: float, device: str) -> None:
    """ATen's pow with a number exponent takes 0.5, -0.5 and -1 as sqrt, rsqrt and reciprocal, 2,
    3 and -2 as products: luminal took pow for all but 2, so (-inf) ** 0.5 was inf, not NaN, and
    (-0.0) ** 0.5 was 0, not -0. The signs of zeros and infinities and the NaNs must agree."""
    specials = POW_SPECIALS
    if device == "cpu" and dtype == torch.float16:
        # Eager's CPU kernel for float16 takes pow for every exponent, unlike its float32, float64
        # and bfloat16 kernels and every CUDA kernel, which luminal follows: they part at -inf, -0.
        specials = [v for v in POW_SPECIALS if v != float("-inf") and str(v) != "-0.0"]
    x = torch.cat([torch.tensor(specials), rand(24, low=-3.0, high=3.0)]).to(dtype=dtype, device=device)
    actual = check(lambda t: t**exponent, x)
    expected = x**exponent
    assert torch.equal(actual.isnan(), expected.isnan()), (actual, expected)
    numbers = ~expected.isnan()  # a NaN's sign bit is not part of its value
    assert torch.equal(actual[numbers].signbit(), expected[numbers].signbit()), (actual, expected)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8], ids=str)
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 7])
def test_pow_integer_constant_exponent(dtype: torch.dtype, exponent: int, device: str) -> None:
    check(lambda x: x**exponent, rand(25, dtype=dtype, device=device, low=-9, high=9))


def test_pow_integer_tensor_exponent_raises_in_strict_mode() -> None:
    compiled = torch.compile(lambda x, y: x**y, backend="luminal", options={"strict": True})
    with pytest.raises(Exception, match="pow of integer tensors"):
        compiled(rand(4, dtype=torch.int64, low=1, high=4), rand(4, dtype=torch.int64, low=0, high=3))


def _signed(n: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    magnitude = rand(n, dtype=dtype, device=device, low=1, high=9)
    return magnitude * (2 * (torch.rand(n, device=device) > 0.5) - 1).to(dtype)


@pytest.mark.parametrize("op", [torch.remainder, torch.fmod], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32], ids=str)
def test_remainders(op, dtype: torch.dtype, device: str) -> None:
    a = rand(40, dtype=dtype, device=device, low=-50, high=50)
    b = _signed(40, dtype, device)
    check(op, a, b)
    check(lambda x: op(x, 3), a)
    check(lambda x: op(x, -3), a)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_atan2_hypot(dtype: torch.dtype, device: str) -> None:
    a, b = rand(6, 5, dtype=dtype, device=device), rand(5, dtype=dtype, device=device)
    check(torch.atan2, a, b)
    check(torch.hypot, a, b)


def test_atan2_of_integers_promotes(device: str) -> None:
    check(torch.atan2, rand(8, dtype=torch.int64, device=device), rand(8, dtype=torch.int64, device=device))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32], ids=str)
def test_clamp_min_max(dtype: torch.dtype, device: str) -> None:
    x = rand(30, dtype=dtype, device=device, low=-10, high=10)
    check(lambda t: (torch.clamp_min(t, -2), torch.clamp_max(t, 3)), x)


def test_integer_floor_divide(device: str) -> None:
    a = rand(30, dtype=torch.int64, device=device, low=-40, high=40)
    check(torch.floor_divide, a, _signed(30, torch.int64, device))


# Lambdas, not the functions themselves: torch 2.6 cannot torch.compile a torch builtin directly.
ACTIVATIONS = {
    "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.2),
    "hardtanh": lambda x: torch.nn.functional.hardtanh(x, -0.5, 1.5),
    "relu6": lambda x: torch.nn.functional.relu6(x),
    "elu": lambda x: torch.nn.functional.elu(x),
    "selu": lambda x: torch.nn.functional.selu(x),
    "celu": lambda x: torch.nn.functional.celu(x, 0.7),
    "silu": lambda x: torch.nn.functional.silu(x),
    "mish": lambda x: torch.nn.functional.mish(x),
    "hardswish": lambda x: torch.nn.functional.hardswish(x),
    "hardsigmoid": lambda x: torch.nn.functional.hardsigmoid(x),
    "softplus": lambda x: torch.nn.functional.softplus(x, beta=2.0, threshold=3.0),
    "softsign": lambda x: torch.nn.functional.softsign(x),
    "tanhshrink": lambda x: torch.nn.functional.tanhshrink(x),
    "logsigmoid": lambda x: torch.nn.functional.logsigmoid(x),
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations(name: str, dtype: torch.dtype, device: str) -> None:
    check(ACTIVATIONS[name], rand(3, 41, dtype=dtype, device=device, low=-6, high=6))
