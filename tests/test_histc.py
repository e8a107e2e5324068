"""torch.histc against eager, bit-exact: elements exactly on bin edges (where the bin formula's
rounding decides), just beside them, outside the range, NaN and infinities; every dtype eager
takes (CPU: floating types; CUDA: float32, float64 and integers); the MoE routing form
(integer-valued expert ids, min=0, max=E-1)."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
import torch
from torch._export.serde.schema import ScalarType

import luminal
from helpers import FLOAT_DTYPES, assert_raises_when_run, compile_luminal, needs_new_pt2_save, non_contiguous
from luminal import _C


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
    assert torch.equal(compiled(x), fn(x))  # the successful first call assert_raises_when_run needs
    # The check's label names the reason on the CPU and through the CUDA error record alike.
    expected = r"histc: a bin count above 16777216 \(16777217\), where float32 counts are inexact"
    assert_raises_when_run(compiled, x.abs(), match=expected, valid=(x,))


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


INTEGER_DTYPES = [torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8]
# (bins, min, max): fractional bounds truncate; a width that does not divide by the bin count.
INTEGER_RANGES = [(5, -3, 7.9), (4, 0, 3), (1, -2.5, 2), (7, 2, 100), (3, -128, 127)]


def cuda_integer_histc(x: torch.Tensor, bins: int, low: float, high: float) -> torch.Tensor:
    """SummaryOps.cu for integer inputs: int64 bounds (truncated), integer division."""
    lo, hi = int(low), int(high)
    v = x.long()
    inside = (v >= lo) & (v <= hi)
    index = ((v - lo) * bins) // (hi - lo)
    index[index == bins] = bins - 1
    return torch.bincount(index[inside], minlength=bins).to(x.dtype)


def archive_on_cuda(bins: int, low: float, high: float, dtype: torch.dtype) -> bytes:
    """An exported histc whose tensors claim to be `dtype` on CUDA (exported as float32 on the CPU,
    where eager has no integer kernel): the CUDA integer translation, run by the CPU engine."""

    class Histc(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.histc(x, bins=bins, min=low, max=high)

    saved = io.BytesIO()
    torch.export.save(torch.export.export(Histc(), (torch.zeros(20),)), saved)
    code = {
        torch.int32: ScalarType.INT,
        torch.int64: ScalarType.LONG,
        torch.int16: ScalarType.SHORT,
        torch.int8: ScalarType.CHAR,
        torch.uint8: ScalarType.BYTE,
    }[dtype].value
    edited = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(saved.getvalue())) as source, zipfile.ZipFile(edited, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename.endswith("models/model.json"):
                model = json.loads(data)
                for meta in model["graph_module"]["graph"]["tensor_values"].values():
                    meta["dtype"] = code
                    meta["device"] = {"type": "cuda", "index": 0}
                data = json.dumps(model).encode()
            target.writestr(info, data)
    return edited.getvalue()


def fits(dtype: torch.dtype, low: float, high: float) -> bool:
    return torch.iinfo(dtype).min <= int(low) and int(high) <= torch.iinfo(dtype).max


@needs_new_pt2_save
@pytest.mark.parametrize(
    "dtype,bins,low,high", [(d, *r) for d in INTEGER_DTYPES for r in INTEGER_RANGES if fits(d, *r[1:])], ids=str
)
def test_histc_cuda_integer_formula(dtype: torch.dtype, bins: int, low: float, high: float) -> None:
    lo, hi = torch.iinfo(dtype).min, torch.iinfo(dtype).max
    compiled = _C.compile(archive_on_cuda(bins, low, high, dtype), ["user"], False)
    x = torch.randint(max(lo, int(low) - 3), min(hi, int(high) + 3) + 1, (20,), dtype=dtype)
    x[:2] = torch.tensor([int(low), int(high)], dtype=dtype)  # both bounds: the first and last bin
    assert torch.equal(compiled.run([x])[0], cuda_integer_histc(x, bins, low, high))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_histc_integers(dtype: torch.dtype, device: str) -> None:
    """transformers counts tokens per expert from int32 ids on CUDA; eager's CPU kernel has none."""
    x = torch.randint(0, 9, (37,), dtype=dtype, device=device)
    fn = lambda t: torch.histc(t, bins=8, min=0, max=7)  # noqa: E731
    if device == "cuda":
        assert_histc(fn, x)
        return
    # Eager raises, and so does tracing (the fake kernel is eager's): luminal never sees the op.
    with pytest.raises(Exception, match="not implemented"):
        fn(x)
    with pytest.raises(Exception, match="not implemented"):
        compile_luminal(fn)(x)
