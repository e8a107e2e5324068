"""Python numbers in a graph: integers beyond 2^53 stay exact, a number stored into an integer tensor
that cannot hold it raises as eager does (eager's checked conversion), and an integer clamp whose
bound lies outside the dtype's range runs in eager (whose handling changed between torch versions).
Before, every integer number went through a double (x + (2**53 + 1) was off by one, where(m, x,
2**63 - 1) stored -2**63) and bounds were wrapped into the dtype (uint8 clamp(-2, 2) returned 2
for 0)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch

from luminal.fallback import LuminalFallbackWarning

BIG = 2**53 + 1


def _run(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> tuple[object, list[str]]:
    """luminal's result (or the exception it raised) and the fallback warnings of the call."""
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: object = torch.compile(fn, backend="luminal")(x.clone())
        except Exception as error:  # noqa: BLE001 - compared with eager's exception below
            result = error
    return result, [str(w.message) for w in caught if issubclass(w.category, LuminalFallbackWarning)]


def _eager(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> object:
    try:
        return fn(x.clone())
    except RuntimeError as error:
        return error


Case = tuple[torch.dtype, list[int], Callable[[torch.Tensor], torch.Tensor]]


def _both(case: Case, device: str) -> tuple[object, object, list[str]]:
    """Eager's result, luminal's result and luminal's fallback warnings for one case."""
    dtype, values, fn = case
    x = torch.tensor(values, dtype=dtype, device=device)
    expected = _eager(fn, x)
    actual, fallbacks = _run(fn, x)
    return expected, actual, fallbacks


EXACT = {
    "add": lambda x: x + BIG,
    "mul": lambda x: x * (2**62 + 3),
    "sub": lambda x: x - (2**63 - 1),
    "eq": lambda x: (x + 2**60) == (2**60 + 1),
    "where": lambda x: torch.where(x > 0, x, 2**63 - 1),
    "where_min": lambda x: torch.where(x > 0, x, -(2**63)),
    "clamp": lambda x: (x + 2**60).clamp(max=2**60 + 3),
    "full_like": lambda x: torch.full_like(x, 2**62 + 1),
    "fill_": lambda x: x.fill_(BIG),
    "masked_fill": lambda x: x.masked_fill(x > 1, BIG),
    "floor_divide": lambda x: (x + 2**62) // 3,
    "add_alpha": lambda x: torch.add(x, x, alpha=BIG),
    "sub_alpha": lambda x: torch.sub(x, x + 1, alpha=BIG),
    "index_add_alpha": lambda x: x.index_add(0, torch.tensor([0, 2], device=x.device), x[:2], alpha=BIG),
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_int64_numbers_beyond_2_to_53_are_exact(name: str, device: str) -> None:
    fn = EXACT[name]
    x = torch.tensor([0, 1, 5, -7], dtype=torch.int64, device=device)
    expected = _eager(fn, x)
    actual, fallbacks = _run(fn, x)
    assert fallbacks == []
    assert isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)
    assert actual.dtype == expected.dtype and torch.equal(actual, expected), (actual, expected)


U8 = [0, 1, 2, 3, 100, 255]
I8 = [-128, -3, 0, 5, 127]
OVERFLOWING_STORES: dict[str, Case] = {
    "where_u8_300": (torch.uint8, U8, lambda x: torch.where(x > 2, x, 300)),
    "masked_fill_u8_300": (torch.uint8, U8, lambda x: x.masked_fill(x > 2, 300)),
    "full_like_u8_300": (torch.uint8, U8, lambda x: torch.full_like(x, 300)),
    "full_like_u8_minus_256": (torch.uint8, U8, lambda x: torch.full_like(x, -256)),
    "full_like_i8_200": (torch.int8, I8, lambda x: torch.full_like(x, 200)),
    "fill_i8_minus_129": (torch.int8, I8, lambda x: x.fill_(-129)),
    "threshold_u8_300": (torch.uint8, U8, lambda x: torch.threshold(x, 2, 300)),
    "index_fill_u8_300": (torch.uint8, U8, lambda x: x.index_fill(0, torch.tensor([1], device=x.device), 300)),
    "scatter_u8_300": (torch.uint8, U8, lambda x: x.scatter(0, torch.tensor([1], device=x.device), 300)),
    "add_alpha_i8_300": (torch.int8, I8, lambda x: torch.add(x, x, alpha=300)),
}


@pytest.mark.parametrize("name", sorted(OVERFLOWING_STORES))
def test_a_number_an_integer_tensor_cannot_hold_raises_as_in_eager(name: str, device: str) -> None:
    expected, actual, _ = _both(OVERFLOWING_STORES[name], device)
    assert isinstance(expected, RuntimeError) and "without overflow" in str(expected)
    assert isinstance(actual, Exception) and "without overflow" in str(actual), actual


WRAPPING: dict[str, Case] = {
    "full_like_u8_minus_1": (torch.uint8, U8, lambda x: torch.full_like(x, -1)),  # eager wraps to 255
    "masked_fill_u8_minus_255": (torch.uint8, U8, lambda x: x.masked_fill(x > 2, -255)),
    "add_u8_300": (torch.uint8, U8, lambda x: x + 300),  # arithmetic wraps in eager
    "sub_u8_minus_2": (torch.uint8, U8, lambda x: x - (-2)),
    "mul_i8_1000": (torch.int8, I8, lambda x: x * 1000),
    "compare_u8_300": (torch.uint8, U8, lambda x: x < 300),
    "compare_i8_minus_200": (torch.int8, I8, lambda x: x >= -200),
}


@pytest.mark.parametrize("name", sorted(WRAPPING))
def test_numbers_eager_converts_or_compares_stay_compiled(name: str, device: str) -> None:
    expected, actual, fallbacks = _both(WRAPPING[name], device)
    assert fallbacks == []
    assert isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)
    assert actual.dtype == expected.dtype and torch.equal(actual, expected), (actual, expected)


CLAMPS: dict[str, Case] = {
    "u8_minus_2_2": (torch.uint8, U8, lambda x: x.clamp(-2, 2)),
    "u8_min_minus_2": (torch.uint8, U8, lambda x: x.clamp_min(-2)),
    "u8_max_300": (torch.uint8, U8, lambda x: x.clamp(max=300)),
    "i8_1000": (torch.int8, I8, lambda x: x.clamp(-1000, 1000)),
    "i8_max_1000": (torch.int8, I8, lambda x: torch.clamp_max(x, 1000)),
    "i32_min_2_to_40": (torch.int32, [-5, 0, 7, 2**31 - 1], lambda x: x.clamp(min=-(2**40))),
}


@pytest.mark.parametrize("name", sorted(CLAMPS))
def test_integer_clamp_with_a_bound_outside_the_dtype_runs_in_eager(name: str, device: str) -> None:
    expected, actual, fallbacks = _both(CLAMPS[name], device)
    # torch <= 2.14 refuses such bounds (except uint8's below 0) already in torch.export.
    assert len(fallbacks) == 1 and any(text in fallbacks[0] for text in ("outside the range of", "without overflow"))
    if isinstance(expected, Exception):
        assert isinstance(actual, Exception)
    else:
        assert isinstance(actual, torch.Tensor) and torch.equal(actual, expected), (actual, expected)


def test_integer_arange_beyond_2_to_53_runs_in_eager(device: str) -> None:
    x = torch.tensor([0, 1, 5], dtype=torch.int64, device=device)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return t + torch.arange(0, 3 * BIG, BIG, device=t.device)

    actual, fallbacks = _run(fn, x)
    assert len(fallbacks) == 1 and "beyond 2^53" in fallbacks[0], fallbacks
    assert isinstance(actual, torch.Tensor) and torch.equal(actual, fn(x))


def test_integer_clamp_inside_the_range_stays_compiled(device: str) -> None:
    x = torch.tensor(U8, dtype=torch.uint8, device=device)
    actual, fallbacks = _run(lambda t: t.clamp(0, 2) + t.clamp(min=3, max=255), x)
    assert fallbacks == []
    assert isinstance(actual, torch.Tensor)
    assert torch.equal(actual, x.clamp(0, 2) + x.clamp(min=3, max=255))
