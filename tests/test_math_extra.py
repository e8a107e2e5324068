"""Activations and pointwise math that luminal translates whole (silu, mish, softplus, erfinv,
lgamma, xlogy, logaddexp, lerp, shifts, masked_fill, ...) against eager: every float dtype, integer
inputs where torch promotes them, non-contiguous inputs, and the edge values (0, -0.0, +-inf, NaN)
where the formulas branch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import FLOAT_DTYPES, INT_DTYPES, check, non_contiguous, rand


def with_specials(x: torch.Tensor) -> torch.Tensor:
    """x with 0, -0.0, +-inf and NaN written into its first elements (floating dtypes)."""
    flat = x.reshape(-1)
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan")], dtype=x.dtype)
    count = min(flat.numel(), specials.numel())
    flat[:count] = specials[:count].to(x.device)
    return x


def skip_cpu_half(device: str, dtype: torch.dtype) -> None:
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("eager lacks some CPU float16 kernels to compare with")


ACTIVATIONS = {
    "silu": F.silu,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "mish": F.mish,
    "softplus": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
    "softplus_default": F.softplus,
    "hardshrink": lambda x: F.hardshrink(x, 0.7),
    "softshrink": lambda x: F.softshrink(x, 0.3),
    "threshold": lambda x: F.threshold(x, 0.25, -2.0),
    "celu": lambda x: F.celu(x, alpha=1.5),
    "logsigmoid": F.logsigmoid,
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_activations(name: str, dtype: torch.dtype, device: str) -> None:
    skip_cpu_half(device, dtype)
    fn = ACTIVATIONS[name]
    x = rand(3, 17, dtype=dtype, device=device, low=-6, high=6)
    check(lambda t: fn(t), x, tolerance_scale=4)


@pytest.mark.parametrize("name", ["silu", "mish", "softplus", "logsigmoid", "hardswish"])
def test_activations_non_contiguous_and_specials(name: str, device: str) -> None:
    fn = ACTIVATIONS[name]
    x = with_specials(rand(5, 1, 7, device=device, low=-30, high=30))
    check(lambda t: fn(t) * 2, non_contiguous(x), tolerance_scale=4)


@pytest.mark.parametrize("weights", [1, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_prelu(weights: int, dtype: torch.dtype, device: str) -> None:
    prelu = torch.nn.PReLU(weights).to(device=device, dtype=dtype)
    with torch.no_grad():
        prelu.weight.copy_(rand(weights, dtype=dtype, device=device, low=-1, high=1))
        check(prelu, rand(2, 4, 3, 5, dtype=dtype, device=device))


UNARY = {
    "erfc": (torch.erfc, -4, 4),
    "erfinv": (torch.erfinv, -0.99, 0.99),
    "lgamma": (torch.lgamma, -4.5, 9),
    "i0": (torch.i0, -6, 6),
    "sinc": (torch.sinc, -3, 3),
    "logit": (torch.logit, 0.01, 0.99),
    "logit_eps": (lambda x: torch.logit(x, eps=0.2), 0.0, 1.0),
    "entr": (torch.special.entr, -1, 3),
    "frac": (torch.frac, -5, 5),
    "deg2rad": (torch.deg2rad, -360, 360),
    "rad2deg": (torch.rad2deg, -7, 7),
    "sgn": (torch.sgn, -2, 2),
    "sign": (torch.sign, -2, 2),  # NaN -> 0 in torch
    "nan_to_num": (torch.nan_to_num, -2, 2),
    "nan_to_num_values": (lambda x: torch.nan_to_num(x, nan=1.5, posinf=7.0, neginf=-8.0), -2, 2),
    "round2": (lambda x: torch.round(x, decimals=2), -50, 50),
    "round_neg": (lambda x: torch.round(x, decimals=-1), -500, 500),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_unary_math(name: str, dtype: torch.dtype, device: str) -> None:
    skip_cpu_half(device, dtype)
    fn, low, high = UNARY[name]
    x = rand(4, 13, dtype=dtype, device=device, low=low, high=high)
    # lgamma and i0 grow fast: relative tolerance matters there.
    check(lambda t: fn(t), x, tolerance_scale=16 if name in ("lgamma", "i0", "erfinv") else 4)


@pytest.mark.parametrize(
    "name", ["erfc", "erfinv", "lgamma", "i0", "sinc", "entr", "frac", "nan_to_num", "sgn", "sign"]
)
def test_unary_math_specials(name: str, device: str) -> None:
    fn = UNARY[name][0]
    x = with_specials(rand(2, 6, device=device))
    if name == "erfinv":
        x[1, :3] = torch.tensor([1.0, -1.0, 1.5])
    check(lambda t: fn(t), x)


@pytest.mark.parametrize("name", ["erfc", "lgamma", "sinc", "deg2rad"])
def test_unary_math_integer_inputs_promote(name: str, device: str) -> None:
    fn = UNARY[name][0]
    check(lambda t: fn(t), rand(3, 5, dtype=torch.int32, device=device, low=1, high=9))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int8, torch.uint8])
def test_signbit(dtype: torch.dtype, device: str) -> None:
    x = rand(3, 7, dtype=dtype, device=device)
    if dtype.is_floating_point:
        x = with_specials(x)
    check(lambda t: torch.signbit(t), x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_binary_math(dtype: torch.dtype, device: str) -> None:
    skip_cpu_half(device, dtype)
    a = rand(3, 8, dtype=dtype, device=device)
    b = rand(8, dtype=dtype, device=device)
    check(lambda x, y: torch.copysign(x, y), a, b)
    check(lambda x: torch.copysign(x, -1.0), a)
    check(lambda x, y: torch.fmax(x, y) + torch.fmin(x, y), a, b)
    check(lambda x, y: torch.logaddexp(x, y), a, b, tolerance_scale=4)
    check(lambda x, y: torch.logaddexp2(x, y), a, b, tolerance_scale=4)
    check(lambda x, y: torch.lerp(x, y, 0.3) + torch.lerp(x, y, 0.8), a, b, tolerance_scale=4)
    check(lambda x, y: torch.heaviside(x.round(), y), a, b)


def test_binary_math_specials(device: str) -> None:
    a = with_specials(rand(2, 6, device=device))
    b = rand(2, 6, device=device)
    b[0, :5] = torch.tensor([float("nan"), 2.0, float("inf"), float("-inf"), 0.0])
    check(lambda x, y: torch.fmax(x, y), a, b)
    check(lambda x, y: torch.fmin(x, y), a, b)
    check(lambda x, y: torch.logaddexp(x, y), a, b)
    check(lambda x, y: torch.logaddexp(x, x), a, b)
    check(lambda x, y: torch.copysign(y, x), a, b)


def test_xlogy_family(device: str) -> None:
    x = rand(4, 6, device=device)
    y = rand(4, 6, device=device, low=0.0, high=4.0)
    x[0, :3] = 0.0
    y[0, 0] = 0.0
    y[1, 1] = float("nan")
    check(lambda a, b: torch.xlogy(a, b), x, y)
    check(lambda b: torch.xlogy(2.0, b), y)
    check(lambda a: torch.xlogy(a, 3.0), x)
    check(lambda a, b: torch.special.xlog1py(a, b), x, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32])
def test_addcmul_addcdiv(dtype: torch.dtype, device: str) -> None:
    s, t1, t2 = (rand(3, 5, dtype=dtype, device=device) for _ in range(3))
    value = 2 if not dtype.is_floating_point else 0.5
    check(lambda a, b, c: torch.addcmul(a, b, c, value=value), s, t1, t2)
    if dtype.is_floating_point:
        t2 = t2 + 10.0
        check(lambda a, b, c: torch.addcdiv(a, b, c, value=-1.5), s, t1, t2, tolerance_scale=4)


def test_lerp_tensor_weight_and_non_contiguous(device: str) -> None:
    a, b = rand(6, 5, device=device), rand(6, 5, device=device)
    w = rand(5, device=device, low=-0.5, high=1.5)
    check(lambda x, y, z: torch.lerp(x, y, z), non_contiguous(a), b, w, tolerance_scale=4)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_shifts(dtype: torch.dtype, device: str) -> None:
    bits = torch.iinfo(dtype).bits
    x = rand(4, 9, dtype=dtype, device=device, low=-100, high=100)
    amount = rand(4, 9, dtype=dtype, device=device, low=0, high=bits + 3)  # includes too-large shifts
    check(lambda a, b: a << b, x, amount)
    check(lambda a, b: a >> b, x, amount)
    check(lambda a: (a << 2) + (a >> 1), x)
    check(lambda a, b: torch.bitwise_left_shift(a, b) ^ torch.bitwise_right_shift(a, 3), x, amount)


def test_shift_by_negative_amount(device: str) -> None:
    x = rand(3, 4, dtype=torch.int64, device=device, low=-50, high=50)
    amount = rand(3, 4, dtype=torch.int64, device=device, low=-70, high=70)
    check(lambda a, b: (a << b) + (a >> b), x, amount)


def test_remainder_of_scalar_by_tensor(device: str) -> None:
    y = rand(3, 6, device=device, low=1, high=5)
    check(lambda b: torch.remainder(7.5, b), y)
    yi = rand(3, 6, dtype=torch.int64, device=device, low=1, high=9)
    check(lambda b: torch.remainder(-13, b), yi)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int8, torch.bool])
def test_masked_fill(dtype: torch.dtype, device: str) -> None:
    x = rand(4, 7, dtype=dtype, device=device)
    mask = rand(7, dtype=torch.bool, device=device)
    value = True if dtype == torch.bool else 3
    check(lambda a, m: a.masked_fill(m, value), x, mask)
    check(lambda a, m: a.masked_fill(m, torch.tensor(value, dtype=dtype, device=a.device)), non_contiguous(x), mask)


def test_masked_fill_with_infinity(device: str) -> None:
    scores = rand(2, 5, 5, device=device)
    causal = torch.ones(5, 5, dtype=torch.bool, device=device).triu(1)
    check(lambda s, m: torch.softmax(s.masked_fill(m, float("-inf")), -1), scores, causal)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bfloat16])
def test_fill_tensor_and_zero(dtype: torch.dtype, device: str) -> None:
    x = rand(3, 4, dtype=dtype, device=device)
    value = rand(1, dtype=dtype, device=device).reshape(())
    check(lambda a, v: a.clone().fill_(v) + a, x, value)
    check(lambda a: a.clone().zero_() + a, x)


def test_clamp_with_tensor_bounds(device: str) -> None:
    x = rand(4, 6, device=device)
    lo, hi = rand(6, device=device, low=-2, high=0), rand(4, 1, device=device, low=0, high=2)
    check(lambda a, b: torch.clamp_min(a, b), x, lo)
    check(lambda a, b: torch.clamp_max(a, b), x, hi)


def test_unsafe_index(device: str) -> None:
    x = rand(5, 6, device=device)
    rows = torch.tensor([4, 0, 2, 2], device=device)
    check(lambda a, r: torch.ops.aten._unsafe_index.Tensor(a, [r]), x, rows)
