"""Arithmetic of half-precision tensors with Python numbers, bit-exact against eager on each device.

Eager computes float16/bfloat16 add, sub, mul and div in float32 and rounds once. The number of a
mul or div enters as float32, unrounded; on CUDA that of add and sub too, where CPU's add and sub
round it to the half type first. CUDA divides by a number as a product with its float32 reciprocal.
luminal computed these in the half type, every number rounded to it first: x * 1e5 in float16
overflowed to inf where eager's products fit, a mask (1 - m) * -1e9 became 0 * -inf = NaN where
eager has -0, and x * 0.1 differed in the last place for a third of the elements. A cast of a float
constant also kept its unrounded number (cast(cast(0.1, f16), f32) stayed 0.1)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_same, rand

HALF_DTYPES = [torch.float16, torch.bfloat16]
NUMBERS = [0.1, 1 / 3, 3.7e-3, 1e5, 100000, -1e9]

OPS: dict[str, Callable[[torch.Tensor, float], torch.Tensor]] = {
    "mul": lambda x, s: x * s,
    "rmul": lambda x, s: s * x,
    "add": lambda x, s: x + s,
    "sub": lambda x, s: x - s,
    "rsub": lambda x, s: s - x,
    "div": lambda x, s: x / s,
    "rdiv": lambda x, s: s / x,
}

_BITS = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}


def _operand(dtype: torch.dtype, device: str) -> torch.Tensor:
    """Random values and the special ones: zeros of both signs, infinities, NaN, a subnormal."""
    specials = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -2.5, 6e-8]
    x = torch.cat([rand(257, dtype=torch.float64), torch.tensor(specials, dtype=torch.float64)])
    return x.to(dtype).to(device)


def _assert_bits_equal(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Every element's bits equal (zeros' signs too); NaNs may differ in their payload."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    both_nan = actual.isnan() & expected.isnan()
    bits = _BITS[expected.dtype]
    differ = (actual.view(bits) != expected.view(bits)) & ~both_nan
    if differ.any():
        k = int(differ.nonzero()[0, 0])
        raise AssertionError(
            f"{int(differ.sum())} of {expected.numel()} elements differ, e.g. #{k}: luminal {actual[k].item()!r}, "
            f"eager {expected[k].item()!r}"
        )


def _compiled(fn: Callable[[torch.Tensor], torch.Tensor], dynamic: bool | None = None) -> Callable[..., torch.Tensor]:
    torch._dynamo.reset()
    return torch.compile(fn, backend="luminal", dynamic=dynamic, options={"strict": True})


@pytest.mark.parametrize("number", NUMBERS, ids=repr)
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_half_arithmetic_with_a_number_matches_eager_bit_for_bit(
    op: str, number: float, dtype: torch.dtype, device: str
) -> None:
    x = _operand(dtype, device)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return OPS[op](t, number)

    _assert_bits_equal(_compiled(fn)(x.clone()), fn(x.clone()))


@pytest.mark.parametrize("number", [0.1, 1 / 3, 7.0, 1e30], ids=repr)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_division_by_a_number_matches_eager_bit_for_bit(number: float, dtype: torch.dtype, device: str) -> None:
    """CUDA's eager multiplies by the reciprocal (0.1 differs from a quotient in a third of the
    float32 elements), CPU's divides."""
    x = _operand(dtype, device)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return t / number

    _assert_bits_equal(_compiled(fn)(x.clone()), fn(x.clone()))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_half_leaky_relu_slope_is_not_rounded_to_the_half_type(dtype: torch.dtype, device: str) -> None:
    x = _operand(dtype, device)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(t, 0.01)

    _assert_bits_equal(_compiled(fn)(x.clone()), fn(x.clone()))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_half_times_a_symbolic_size_matches_eager(dtype: torch.dtype, device: str) -> None:
    """A SymInt operand (dynamic shapes) enters like a Python number: 400 * 257 = 102800 overflows
    float16, but eager's products of small elements fit; 7 * 257 = 1799 is no bfloat16."""

    def fn(t: torch.Tensor) -> torch.Tensor:
        return t * (t.shape[0] * 400) - t.shape[0] * 7

    compiled = _compiled(fn, dynamic=True)
    for length in (257, 300):
        x = rand(length, dtype=dtype, device=device, low=-1.0, high=1.0)
        _assert_bits_equal(compiled(x.clone()), fn(x.clone()))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_a_half_mask_scaled_by_a_large_negative_number_gives_eager_scores(dtype: torch.dtype, device: str) -> None:
    """Older attention code masks with (1 - mask) * -1e9 in the model's dtype: eager's kept
    positions get -0, which luminal made NaN (0 * half(-1e9) = 0 * -inf), and softmax spread it."""
    scores = rand(4, 9, dtype=dtype, device=device)
    mask = rand(4, 9, dtype=torch.bool, device=device)
    mask[:, 0] = True  # every row keeps a position

    def fn(s: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return (s + (1.0 - m.to(s.dtype)) * -1e9).softmax(-1)

    actual = _compiled(fn)(scores, mask)
    assert not actual.isnan().any()
    assert_same(actual, fn(scores, mask))


def test_a_constant_rounded_through_float16_keeps_the_rounding(device: str) -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        return t + torch.full((3,), 0.1, device=t.device).half().float() * 1024

    x = rand(3, device=device)
    _assert_bits_equal(_compiled(fn)(x.clone()), fn(x.clone()))
