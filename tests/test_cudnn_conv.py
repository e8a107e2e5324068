"""Convolutions on cuDNN (CUDA): each engine choice against eager, and the record of the choice.

LUMINAL_CONVOLUTION=cudnn forces cuDNN wherever it takes the problem, "generated" forces the
generated kernel, unset measures both on the device and keeps the faster. Every dtype cuDNN runs,
strides, padding, dilation, groups (depthwise too), 1-D/2-D/3-D, channels-last operands, a graph
input fed straight to the convolution (staged into stable memory) and a convolution that is a graph
output. Skipped without a GPU; the cuDNN-forced cases skip where torch has no cuDNN.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from helpers import assert_same, capturing_backend, rand, set_env

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

ENGINES = ["cudnn", "generated", "measured"]

CASES = {
    "3x3": (2, torch.nn.Conv2d(8, 16, 3, padding=1)),
    "strided-dilated": (2, torch.nn.Conv2d(6, 10, (3, 2), stride=(2, 1), padding=(2, 0), dilation=(2, 1))),
    "groups": (2, torch.nn.Conv2d(8, 12, 3, padding=1, groups=4)),
    "depthwise": (2, torch.nn.Conv2d(16, 16, 7, padding=3, groups=16)),
    "patchify": (2, torch.nn.Conv2d(3, 32, 16, stride=16)),
    "1x1-no-bias": (2, torch.nn.Conv2d(16, 24, 1, bias=False)),
    "conv1d": (1, torch.nn.Conv1d(5, 7, 3, stride=2, padding=1)),
    "conv3d": (3, torch.nn.Conv3d(4, 6, 3, padding=1)),
}


def _input(spatial: int, channels: int, dtype: torch.dtype) -> torch.Tensor:
    size = {1: (3, channels, 33), 2: (3, channels, 32, 29), 3: (2, channels, 9, 10, 7)}[spatial]
    return rand(*size, dtype=dtype, device="cuda")


def _compile_and_run(fn: Any, *inputs: torch.Tensor) -> tuple[Any, dict[str, Any]]:
    captured: list[Any] = []
    # The general path (a small graph could otherwise run as one row kernel, with no convolution step).
    compiled = torch.compile(fn, backend=capturing_backend(captured, options={"megakernel": False}))
    result = compiled(*inputs)
    compiled(*inputs)  # a replay of the recorded graph, not just the instance build
    torch.cuda.synchronize()
    assert captured, "luminal was not used"
    return result, captured[0].stats()["cuda"]


def _set_engine(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    if engine == "cudnn" and not torch.backends.cudnn.is_available():
        pytest.skip("torch has no cuDNN")
    if engine != "measured":
        set_env(monkeypatch, "LUMINAL_CONVOLUTION", engine)


def _check_choices(stats: dict[str, Any], engine: str, convolutions: int) -> None:
    choices = [c for c in stats["choices"] if "convolution" in c]
    assert len(choices) == convolutions, stats["choices"]
    for choice in choices:
        if engine == "cudnn":
            assert ": cuDNN (" in choice, choice
        elif engine == "generated":
            assert ": generated kernel" in choice, choice
        else:  # measured: both times are reported
            assert "ms" in choice and "generated kernel" in choice, choice


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", list(CASES), ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_convolution(case: str, dtype: torch.dtype, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _set_engine(monkeypatch, engine)
    spatial, conv = CASES[case]
    conv = conv.to(device="cuda", dtype=dtype)
    x = _input(spatial, conv.in_channels, dtype)
    with torch.no_grad():
        expected = conv(x)
        result, stats = _compile_and_run(conv, x)
    assert_same(result, expected, tolerance_scale=8)
    _check_choices(stats, engine, 1)


@pytest.mark.parametrize("engine", ENGINES)
def test_channels_last_and_a_following_network(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Channels-last weights and input, batch norm and a residual after the convolutions (the
    convolution's output is then no graph output), bf16 and f32."""
    _set_engine(monkeypatch, engine)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False)
            self.bn = torch.nn.BatchNorm2d(16)
            self.conv2 = torch.nn.Conv2d(16, 16, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.conv2(torch.relu(self.bn(self.conv1(x)))) + x)

    for dtype in (torch.float32, torch.bfloat16):
        block = Block().cuda().eval().to(dtype=dtype, memory_format=torch.channels_last)
        with torch.no_grad():
            block.bn.running_mean.uniform_(-0.5, 0.5)
            block.bn.running_var.uniform_(0.5, 1.5)
        x = rand(2, 16, 15, 17, dtype=dtype, device="cuda").to(memory_format=torch.channels_last)
        torch._dynamo.reset()
        with torch.no_grad():
            expected = block(x)
            result, stats = _compile_and_run(block, x)
        assert_same(result, expected, tolerance_scale=8)
        _check_choices(stats, engine, 2)


def test_new_input_pointers_reuse_the_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    """The input is staged into stable memory for cuDNN: fresh input tensors need no rebuild."""
    _set_engine(monkeypatch, "cudnn")
    conv = torch.nn.Conv2d(4, 8, 3).cuda()
    captured: list[Any] = []
    compiled = torch.compile(conv, backend=capturing_backend(captured, options={"megakernel": False}))
    with torch.no_grad():
        for _ in range(4):
            x = rand(2, 4, 12, 12, device="cuda")
            assert_same(compiled(x), conv(x), tolerance_scale=8)
    stats = captured[0].stats()["cuda"]
    assert stats["graph_builds"] == 1, stats
    assert stats["library_calls"] == 1, stats
