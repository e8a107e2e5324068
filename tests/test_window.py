"""Convolution, pooling and nearest upsampling against eager: strides, padding, dilation, groups,
odd sizes, every float dtype conv claims."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_same, capturing_backend, check, non_contiguous, rand

CONV2D = [
    dict(stride=1, padding=0, dilation=1, groups=1),
    dict(stride=2, padding=1, dilation=1, groups=1),
    dict(stride=1, padding=2, dilation=2, groups=1),
    dict(stride=(2, 1), padding=(1, 0), dilation=1, groups=2),
    dict(stride=1, padding=1, dilation=1, groups=4),
]


@pytest.mark.parametrize("params", CONV2D, ids=str)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(params, bias: bool, device: str) -> None:
    conv = torch.nn.Conv2d(4, 8, (3, 2), bias=bias, **params).to(device)
    with torch.no_grad():
        check(conv, rand(2, 4, 9, 7, device=device), tolerance_scale=8)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_conv_dtypes(dtype: torch.dtype, device: str) -> None:
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("eager has no CPU float16 convolution to compare with")
    conv = torch.nn.Conv1d(3, 5, 3, padding=1).to(device=device, dtype=dtype)
    with torch.no_grad():
        check(conv, rand(2, 3, 11, dtype=dtype, device=device), tolerance_scale=8)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_convolutions_store_their_dtype(dtype: torch.dtype, device: str) -> None:
    """A half-precision convolution is one node of its input's dtype (summed in float32, rounded
    once, as eager), read by the batch norm, ReLU and residual after it; with and without bias."""
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("eager has no CPU float16 convolution to compare with")
    block = torch.nn.Sequential(
        torch.nn.Conv2d(6, 6, 3, padding=1),
        torch.nn.BatchNorm2d(6),
        torch.nn.ReLU(),
        torch.nn.Conv2d(6, 6, 1, bias=False),
    )
    block = block.to(device=device, dtype=dtype).eval()
    with torch.no_grad():
        block[1].running_mean.uniform_(-0.5, 0.5)
        block[1].running_var.uniform_(0.5, 1.5)

    def residual(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(block(x) + x)

    captured: list = []
    compiled = torch.compile(residual, backend=capturing_backend(captured, options={"megakernel": False}))
    x = rand(2, 6, 9, 7, dtype=dtype, device=device)
    with torch.no_grad():
        assert_same(compiled(x), residual(x), tolerance_scale=8)
    assert captured, "luminal was not used"
    convolutions = [line for line in captured[0].ir().splitlines() if "[convolution " in line]
    assert len(convolutions) == 2, captured[0].ir()
    short = {torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]
    for line in convolutions:
        assert line.split(" = ")[0].endswith(f"{short}[2, 6, 9, 7]"), line  # stored in the input's dtype
        assert "mul(f32(" in line, line  # the product summed in float32


def test_conv1d_strided_dilated_and_non_contiguous(device: str) -> None:
    conv = torch.nn.Conv1d(6, 4, 5, stride=2, padding=3, dilation=2, groups=2).to(device)
    with torch.no_grad():
        check(conv, non_contiguous(rand(3, 6, 17, device=device)), tolerance_scale=8)


# Transposed convolutions (decomposed by luminal): stride equal to the kernel (DPT's upsampling),
# overlapping taps, padding, output_padding, dilation, groups, and an output_padding that is not
# below the stride (allowed when below the dilation: the zero-stuffing path).
CONV_TRANSPOSE = [
    dict(kernel_size=2, stride=2),
    dict(kernel_size=4, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, output_padding=1),
    dict(kernel_size=3, stride=1, padding=2, dilation=2),
    dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2),
    dict(kernel_size=3, stride=2, padding=1, output_padding=2, dilation=3),
    dict(kernel_size=1, stride=3),
]


@pytest.mark.parametrize("params", CONV_TRANSPOSE, ids=str)
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_conv_transpose(params: dict, rank: int, device: str) -> None:
    kernel = params["kernel_size"]
    if rank != 2 and isinstance(kernel, tuple):
        params = {k: (v[0] if isinstance(v, tuple) else v) for k, v in params.items()}
    make = {1: torch.nn.ConvTranspose1d, 2: torch.nn.ConvTranspose2d, 3: torch.nn.ConvTranspose3d}[rank]
    conv = make(4, 6, **params).to(device)
    sizes = {1: (2, 4, 7), 2: (2, 4, 5, 6), 3: (1, 4, 3, 4, 5)}[rank]
    with torch.no_grad():
        check(conv, rand(*sizes, device=device), tolerance_scale=8)
        check(conv, non_contiguous(rand(*sizes, device=device)), tolerance_scale=8)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_conv_transpose_dtypes_and_no_bias(dtype: torch.dtype, device: str) -> None:
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("eager has no CPU float16 convolution to compare with")
    for make, sizes in [(torch.nn.ConvTranspose2d, (2, 3, 4, 5)), (torch.nn.ConvTranspose3d, (1, 3, 2, 3, 2))]:
        conv = make(3, 5, 3, stride=2, padding=1, output_padding=1, bias=False).to(device=device, dtype=dtype)
        with torch.no_grad():
            check(conv, rand(*sizes, dtype=dtype, device=device), tolerance_scale=8)


def test_conv_transpose_size_one_and_channels_last(device: str) -> None:
    conv = torch.nn.ConvTranspose2d(3, 2, 2, stride=2).to(device)
    with torch.no_grad():
        check(conv, rand(1, 3, 1, 1, device=device))
        x = rand(2, 3, 4, 5, device=device).to(memory_format=torch.channels_last)
        # The result keeps eager's layout: a view that needs it traces the same as in eager.
        check(lambda t: conv(t).permute(0, 2, 3, 1).reshape(2, -1), x, tolerance_scale=8)


def test_conv_transpose_in_a_decoder(device: str) -> None:
    """An upsampling decoder: conv, transposed conv (stride 2 and 4), batch norm, ReLU."""
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.ConvTranspose2d(8, 2, 4, stride=4),
    ).to(device)
    model[2].running_mean.copy_(rand(8, device=device, low=-0.5, high=0.5))
    model[2].running_var.copy_(rand(8, device=device, low=0.5, high=1.5))
    with torch.no_grad():
        check(model.eval(), rand(2, 3, 5, 4, device=device), tolerance_scale=8)


@pytest.mark.parametrize(
    "kwargs",
    [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=(3, 2), stride=(1, 2))],
    ids=str,
)
def test_pooling(kwargs, device: str) -> None:
    x = rand(2, 3, 9, 8, device=device)
    check(lambda t: torch.nn.functional.max_pool2d(t, **kwargs), x)
    check(lambda t: torch.nn.functional.avg_pool2d(t, **kwargs), x, tolerance_scale=4)
    if kwargs.get("padding"):
        check(lambda t: torch.nn.functional.avg_pool2d(t, **kwargs, count_include_pad=False), x, tolerance_scale=4)


# (kernel, stride, padding): stride below, equal to and above the kernel; ceil_mode's last window
# overhangs the padded input (count_include_pad divides by the part inside it) or is dropped
# because it would start in the right padding.
AVG_POOL_CEIL = [(2, 2, 0), (3, 2, 1), (2, 1, 1), (3, 4, 1), (2, 3, 0), (1, 2, 0), (4, 3, 2)]


@pytest.mark.parametrize("kernel,stride,padding", AVG_POOL_CEIL, ids=str)
@pytest.mark.parametrize("include_pad", [True, False], ids=["include_pad", "exclude_pad"])
def test_avg_pool2d_ceil_mode(kernel: int, stride: int, padding: int, include_pad: bool, device: str) -> None:
    x = rand(2, 3, 9, 8, device=device)
    pool = torch.nn.AvgPool2d(kernel, stride, padding, ceil_mode=True, count_include_pad=include_pad)
    check(pool, x, tolerance_scale=4)
    check(pool, non_contiguous(rand(1, 2, 7, 5, device=device)), tolerance_scale=4)


@pytest.mark.parametrize("include_pad", [True, False], ids=["include_pad", "exclude_pad"])
def test_avg_pool_ceil_mode_1d_3d(include_pad: bool, device: str) -> None:
    x = rand(2, 3, 10, device=device)
    check(lambda t: F.avg_pool1d(t, 3, 2, 1, ceil_mode=True, count_include_pad=include_pad), x)
    check(lambda t: F.avg_pool1d(t, 2, 3, ceil_mode=True, count_include_pad=include_pad), rand(3, 11, device=device))
    check(
        lambda t: F.avg_pool3d(t, (2, 3, 2), (2, 2, 3), (1, 1, 0), ceil_mode=True, count_include_pad=include_pad),
        rand(2, 2, 5, 7, 6, device=device),
        tolerance_scale=4,
    )


@pytest.mark.parametrize("ceil_mode", [False, True], ids=["floor", "ceil"])
def test_avg_pool_divisor_override(ceil_mode: bool, device: str) -> None:
    x = rand(2, 3, 7, 9, device=device)
    check(lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=ceil_mode, divisor_override=5), x, tolerance_scale=4)
    check(lambda t: F.avg_pool3d(t[:, None], 2, 2, ceil_mode=ceil_mode, divisor_override=3), x, tolerance_scale=4)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_avg_pool_ceil_mode_dtypes(dtype: torch.dtype, device: str) -> None:
    """timm's resnet-d downsample: AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)."""
    x = rand(2, 4, 7, 5, dtype=dtype, device=device)
    pool = torch.nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)
    try:
        pool(x)
    except RuntimeError as error:  # older CPU kernels lack float16
        pytest.skip(f"eager avg_pool2d does not take {dtype} on {device}: {error}")
    check(pool, x)


def test_max_pool_indices_dilation_ceil_mode(device: str) -> None:
    x = rand(1, 2, 10, 11, device=device, low=-2, high=2).round()  # ties: the first maximum wins
    check(lambda t: torch.nn.functional.max_pool2d(t, 3, 2, 1, dilation=2, return_indices=True), x)
    check(lambda t: torch.nn.functional.max_pool2d(t, 3, 2, ceil_mode=True, return_indices=True), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_max_pool_indices_of_nan_windows(dtype: torch.dtype, device: str) -> None:
    """Eager takes a position when `val > max || isnan(val)`: a window holding several NaNs gives the
    last one's index (positions scanned row-major), one without NaN the first maximum's."""
    x = rand(2, 3, 8, 9, device=device, low=-2, high=2).round().to(dtype)  # ties
    x[torch.rand(x.shape, device=device) < 0.2] = float("nan")  # windows with none, one and several NaNs
    x[0, 0, :2, :2] = float("nan")
    check(lambda t: torch.nn.functional.max_pool2d(t, 2, return_indices=True), x)
    check(lambda t: torch.nn.functional.max_pool2d(t, 3, 2, 1, ceil_mode=True, return_indices=True), x)
    check(lambda t: torch.nn.functional.max_pool3d(t.unsqueeze(0), 2, return_indices=True), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    ("size", "shape"),
    [((1, 1), (2, 3, 5, 5)), ((3, 2), (2, 3, 7, 9)), ((4, 4), (3, 4, 4)), ((7, 9), (1, 1, 3, 4))],
    ids=str,
)
def test_adaptive_max_pool(size, shape, dtype: torch.dtype, device: str) -> None:
    """Uneven windows (and more outputs than inputs), ties (the first maximum's index) and NaNs (the
    last NaN's index), as eager's kernels keep them."""
    x = (rand(*shape, device=device) * 2).round().to(dtype)
    x[torch.rand(shape, device=device) < 0.2] = float("nan")
    check(lambda t: torch.nn.functional.adaptive_max_pool2d(t, size, return_indices=True), x)
    check(lambda t: torch.nn.functional.adaptive_max_pool1d(t.flatten(-2), size[0], return_indices=True), x)


@pytest.mark.parametrize("size", [(1, 1), (3, 2), (4, 5)], ids=str)
def test_adaptive_avg_pool(size, device: str) -> None:
    x = rand(2, 3, 7, 9, device=device)
    check(lambda t: torch.nn.functional.adaptive_avg_pool2d(t, size), x, tolerance_scale=4)


def test_upsample_nearest(device: str) -> None:
    x = rand(1, 2, 5, 3, device=device)
    check(lambda t: torch.nn.functional.interpolate(t, scale_factor=2, mode="nearest"), x)
    check(lambda t: torch.nn.functional.interpolate(t, size=(7, 8), mode="nearest"), x)
    check(lambda t: torch.nn.functional.interpolate(t, scale_factor=(1.5, 2.5), mode="nearest"), x)


class SmallConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2),
            torch.nn.GroupNorm(4, 16),
            torch.nn.SiLU(),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.head(self.features(x).flatten(1)), -1)


def test_small_conv_net(device: str) -> None:
    model = SmallConvNet().to(device).eval()
    with torch.no_grad():
        model.features[1].running_mean.copy_(rand(8, device=device))
        model.features[1].running_var.copy_(rand(8, device=device, low=0.5, high=2))
        check(model, rand(2, 3, 16, 12, device=device), tolerance_scale=16)
