"""torch.histc against eager, bit-exact: elements exactly on bin edges (where the bin formula's
rounding decides), just beside them, outside the range, NaN and infinities; every dtype eager
takes; the MoE routing form (integer-valued expert ids, min=0, max=E-1)."""

from __future__ import annotations

import pytest
import torch

import luminal
from helpers import FLOAT_DTYPES, assert_raises_when_run, compile_luminal, non_contiguous


def require_eager(device: str, dtype: torch.dtype) -> None:
    """CUDA's histc has no float16/bfloat16 kernel; compare only what eager accepts."""
    try:
        torch.histc(torch.ones(3, dtype=dtype, device=device), bins=2, min=0, max=1)
    except RuntimeError as error:
        pytest.skip(f"eager histc does not take {dtype} on {device}: {error}")


def edge_heavy(bins: int, low: float, high: float, dtype: torch.dtype, device: str, count: int) -> torch.Tensor:
    """Random values around [low, high], every bin edge, its neighbours, NaN and +-inf, shuffled
    (float16/bfloat16: 256 of them at most, where their counts are exact)."""
    edges = torch.linspace(low, high, bins + 1, dtype=torch.float64)
    span = high - low
    values = torch.cat(
        [
            torch.rand(count, dtype=torch.float64) * (span * 1.2) + low - span * 0.1,
            edges,
            edges + span * 1e-7,
            edges - span * 1e-7,
            torch.tensor([float("nan"), float("inf"), -float("inf")], dtype=torch.float64),
        ]
    ).to(dtype)
    limit = 256 if dtype in (torch.float16, torch.bfloat16) else values.numel()
    return values[torch.randperm(values.numel())][:limit].to(device)


def assert_histc(fn, x: torch.Tensor) -> None:
    expected = fn(x)
    actual = compile_luminal(fn)(x)
    assert luminal.compile_count() >= 1
    assert actual.dtype == expected.dtype and actual.device == expected.device
    assert torch.equal(actual, expected), f"\n{actual}\n{expected}"


# (bins, min, max): one bin, integer-valued ranges, ranges whose width is not a power of two.
RANGES = [(1, -2.0, 2.0), (3, -1.5, 2.25), (7, 0.0, 6.0), (10, 0.1, 0.7), (13, 0.3, 5.9), (100, -1.0, 1.0)]


@pytest.mark.parametrize("bins,low,high", RANGES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_histc_matches_eager_on_edges(bins: int, low: float, high: float, dtype: torch.dtype, device: str) -> None:
    require_eager(device, dtype)
    x = edge_heavy(bins, low, high, dtype, device, count=150)
    assert_histc(lambda t: torch.histc(t, bins=bins, min=low, max=high), x)


@pytest.mark.parametrize("experts", [2, 8, 60])
@pytest.mark.parametrize("tokens", [1, 5, 37])
def test_histc_counts_expert_ids(experts: int, tokens: int, device: str) -> None:
    """transformers' MoE routing: tokens per expert from the (float) top-k expert ids."""
    ids = torch.randint(0, experts, (tokens, 2), device=device)
    assert_histc(lambda t: torch.histc(t.float(), bins=experts, min=0, max=experts - 1), ids)


def test_histc_non_contiguous_and_multi_dimensional(device: str) -> None:
    x = non_contiguous(edge_heavy(5, -3.0, 3.3, torch.float32, device, count=45).reshape(6, 11))
    assert_histc(lambda t: torch.histc(t, bins=5, min=-3, max=3.3), x)
    assert_histc(lambda t: torch.histc(t * 2, bins=4, min=-1, max=1), torch.rand((), device=device))


def test_histc_dynamic_sizes(device: str) -> None:
    """A symbolic element count: float32 counts are exact below 2^24 per bin (checked at run time)."""
    fn = lambda t: torch.histc(t, bins=6, min=-1, max=2)  # noqa: E731
    compiled = torch.compile(fn, backend="luminal", dynamic=True)
    for size in (3, 17, 64):
        x = edge_heavy(6, -1.0, 2.0, torch.float32, device, count=size)
        assert torch.equal(compiled(x), fn(x))


def test_histc_float32_count_beyond_2_24_raises(device: str) -> None:
    """Eager counts in float32 per thread: a bin of more than 2^24 elements has no exact count."""
    fn = lambda t: torch.histc(t, bins=2, min=-1, max=1)  # noqa: E731
    compiled = compile_luminal(fn)
    x = torch.full((2**24 + 1,), 0.5, device=device)
    x[: 2**23] = -0.5  # 2^23 and 2^23 + 1: exact
    assert torch.equal(compiled(x), fn(x))
    assert_raises_when_run(compiled, x.abs(), match="bin count above 16777216")


def expect_refused(fn, x: torch.Tensor, reason: str) -> None:
    """Refused with `reason` (strict mode raises it), run in eager otherwise: results equal eager's."""
    with pytest.raises(Exception, match=reason):
        torch.compile(fn, backend="luminal", options={"strict": True})(x)
    torch._dynamo.reset()
    with pytest.warns(luminal.LuminalFallbackWarning, match="histc"):
        actual = compile_luminal(fn)(x)
    assert torch.equal(actual, fn(x))


def test_histc_data_dependent_range_falls_back(device: str) -> None:
    """min == max (the default) takes the range from the data."""
    expect_refused(lambda t: torch.histc(t, bins=4), torch.randn(20, device=device), "min == max")


def test_histc_inexact_half_counts_fall_back(device: str) -> None:
    """bfloat16 counts above 256 depend on eager's thread split."""
    require_eager(device, torch.bfloat16)
    x = torch.rand(300, device=device).bfloat16()
    expect_refused(lambda t: torch.histc(t, bins=2, min=0, max=1), x, "exact only up to 256")
