"""Layout assignment (passes::assign_layouts): intermediates stored in the order their readers read
them in. A ConvNeXt-like network (torchvision's LayerNorm2d and CNBlock: permute -> LayerNorm over
channels -> Linear -> GELU -> Linear -> permute back -> layer scale + residual) runs channels-last
after its stem: convolutions read and store [N, H, W, C], the LayerNorms read contiguous rows and no
permute is materialized. Results against eager (f32, bf16; contiguous, non-contiguous and
channels-last inputs), the IR after the pass, and the cases where nothing may move (outputs, buffers
updated in place, tensors read whole)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from torch import nn

from helpers import assert_same, capturing_backend, non_contiguous, rand

# torchvision is optional (`make test` skips its tests where it does not install): without it this
# file was a collection error instead of skipping.
convnext = pytest.importorskip("torchvision.models.convnext")
CNBlock, LayerNorm2d = convnext.CNBlock, convnext.LayerNorm2d

CHANNELS_LAST = "stored [0, 2, 3, 1]"


class ConvNeXtLike(nn.Module):
    """A stem (patchify convolution + LayerNorm2d), two blocks, a downsampling layer, one more block."""

    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 4, stride=4), LayerNorm2d(channels))
        self.stage1 = nn.Sequential(CNBlock(channels, 0.5, 0.0), CNBlock(channels, 0.5, 0.0))
        self.down = nn.Sequential(LayerNorm2d(channels), nn.Conv2d(channels, 2 * channels, 2, stride=2))
        self.stage2 = CNBlock(2 * channels, 0.5, 0.0)
        for module in self.modules():  # layer scales far from torchvision's 1e-6: the blocks' branches count
            if isinstance(module, CNBlock):
                module.layer_scale.data.uniform_(0.2, 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stage2(self.down(self.stage1(self.stem(x))))


def _compile(model: Any, **options: Any) -> tuple[Any, list[Any]]:
    captured: list[Any] = []
    return torch.compile(model, backend=capturing_backend(captured, **options)), captured


def _pointwise_lines(ir: str) -> list[str]:
    return [line for line in ir.splitlines() if "= pointwise(" in line]


def _loads(line: str) -> list[tuple[str, list[str]]]:
    """(slot, index expressions) of every load in a body (a top-level split of the brackets)."""
    loads = []
    for match in re.finditer(r"load(\d+)\[", line):
        depth, start, parts, k = 1, match.end(), [], match.end()
        while depth:
            ch = line[k]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            if (ch == "," and depth == 1) or depth == 0:
                parts.append(line[start:k].strip())
                start = k + 1
            k += 1
        loads.append((match.group(1), parts))
    return loads


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_convnext_like_network_matches_eager(dtype: torch.dtype, device: str) -> None:
    model = ConvNeXtLike().eval().to(device=device, dtype=dtype)
    compiled, captured = _compile(model)
    x = rand(2, 3, 32, 32, dtype=dtype, device=device)
    for layout in (x, non_contiguous(x), x.contiguous(memory_format=torch.channels_last)):
        expected = model(layout)
        actual = compiled(layout)
        assert_same(actual, expected, tolerance_scale=4.0 if dtype == torch.bfloat16 else 10.0)
        assert actual.is_contiguous()  # an output is written in its logical layout
    assert captured


def test_convnext_like_network_runs_channels_last(device: str) -> None:
    model = ConvNeXtLike().eval().to(device)
    compiled, captured = _compile(model)
    compiled(rand(2, 3, 32, 32, device=device))
    ir = captured[0].ir()
    convolutions = [line for line in ir.splitlines() if "[convolution" in line]
    assert len(convolutions) == 5, ir
    # The stem reads the caller's NCHW image: it keeps cuDNN's NCHW format (as eager's does). Every
    # later convolution reads and stores channels-last; the downsampling one reads a channels-last
    # copy of its weight (the depthwise weights, one channel per group, are that already).
    assert CHANNELS_LAST not in convolutions[0], convolutions[0]
    for line in convolutions[1:]:
        assert f"x {CHANNELS_LAST}" in line and f", {CHANNELS_LAST}]" in line, line
    assert sum("w stored [0, 2, 3, 1]" in line for line in convolutions) == 1, convolutions
    if device == "cuda" and torch.backends.cudnn.is_available():
        # cuDNN is offered every convolution, the channels-last ones too (their logical sizes, with
        # the stored order's strides); the generated kernel is only a measured alternative.
        steps = [c for c in captured[0].stats()["cuda"]["choices"] if "aten.convolution" in c]
        assert len(steps) >= 5 and not any("not for cuDNN" in c for c in steps), steps
    pointwise = _pointwise_lines(ir)
    for line in pointwise:
        # LayerNorm rows (folds over the channels) read contiguous rows: r0 is the innermost index.
        if "sum(r0 < " in line:
            for _, index in _loads(line):
                if any("r0" in i for i in index):
                    assert "r0" in index[-1] and all("r0" not in i for i in index[:-1]), line
        # No permute is materialized: a node that is one permuted load is only the weight copy, or
        # the graph output (its NCHW layout is the caller's).
        body = line.split("{", 1)[1]
        single = re.fullmatch(r"\s*load0\[(.*)\]\s*\}.*", body)
        if single and re.fullmatch(r"i0, i\d, i\d, i\d", single.group(1)) and single.group(1) != "i0, i1, i2, i3":
            assert "channels-last weight" in line, line
    # The residual adds run over [N, H, W, C] and read everything 4-D in that order, but for the
    # last one: the graph's output, written NCHW for the caller.
    output = re.search(r"^return (%\d+)$", ir, re.MULTILINE)
    assert output, ir
    residuals = [line for line in pointwise if "(aten.add.Tensor)" in line and not line.startswith(output[1] + ":")]
    assert residuals, ir  # (the second block's is inlined into the downsampling LayerNorm's rows)
    for line in residuals:
        for _, index in _loads(line):
            if len(index) == 4:
                assert index == ["i0", "i1", "i2", "i3"], line


def test_returned_intermediates_keep_their_layout(device: str) -> None:
    """A tensor returned to the caller (here the convolution's output, also read across channels)
    is written in its logical layout; only what no output is may move."""
    conv = nn.Conv2d(8, 8, 3, padding=1, groups=8).to(device)
    norm = nn.LayerNorm(8).to(device)

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = conv(x)
        z = norm(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return y, conv(z) + y

    compiled, captured = _compile(fn)
    x = rand(2, 8, 9, 7, device=device)
    actual = compiled(x)
    assert_same(actual, fn(x), tolerance_scale=10.0)
    assert all(t.is_contiguous() for t in actual)
    assert captured


def test_buffer_updated_in_place_keeps_its_layout(device: str) -> None:
    class Accumulate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.norm = nn.LayerNorm(8)
            self.register_buffer("total", torch.zeros(2, 8, 6, 5))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.norm(self.conv(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            self.total.add_(y)
            return self.conv(y)

    model = Accumulate().to(device)
    reference = Accumulate().to(device)
    reference.load_state_dict(model.state_dict())
    compiled, captured = _compile(model)
    for _ in range(2):
        x = rand(2, 8, 6, 5, device=device)
        assert_same(compiled(x), reference(x), tolerance_scale=10.0)
        assert_same(model.total, reference.total, tolerance_scale=10.0)
    assert model.total.is_contiguous()
    assert captured


def test_channels_last_output_read_by_a_matmul(device: str) -> None:
    """A convolution whose output a matmul reads through permute + reshape: the convolution stores
    channels-last and the matmul reads it as the rows it is."""
    conv = nn.Conv2d(8, 12, 3, padding=1).to(device)
    linear = nn.Linear(12, 40).to(device)

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.gelu(conv(torch.sigmoid(x)))
        return linear(y.permute(0, 2, 3, 1).reshape(-1, 12))

    compiled, captured = _compile(fn)
    x = rand(2, 8, 7, 6, device=device)
    assert_same(compiled(x), fn(x), tolerance_scale=10.0)
    assert CHANNELS_LAST in captured[0].ir()


@pytest.mark.parametrize("spatial", [1, 3])
def test_other_ranks_run_channels_last(spatial: int, device: str) -> None:
    conv_type = {1: nn.Conv1d, 3: nn.Conv3d}[spatial]
    first = conv_type(6, 6, 3, padding=1, groups=6).to(device)
    second = conv_type(6, 10, 2, stride=2).to(device)
    norm = nn.LayerNorm(6).to(device)
    last = (0, *range(2, spatial + 2), 1)
    back = (0, spatial + 1, *range(1, spatial + 1))

    def fn(x: torch.Tensor) -> torch.Tensor:
        h = x * 2.0 + 1.0  # an intermediate, free to move
        y = norm(first(h).permute(*last)).permute(*back)
        return second(torch.nn.functional.gelu(y + h))

    compiled, captured = _compile(fn)
    size = {1: (3, 6, 12), 3: (2, 6, 4, 6, 4)}[spatial]
    x = rand(*size, device=device)
    assert_same(compiled(x), fn(x), tolerance_scale=10.0)
    order = ", ".join(str(d) for d in last)
    convolutions = [line for line in captured[0].ir().splitlines() if "[convolution" in line]
    assert len(convolutions) == 2
    for line in convolutions:
        assert f"x stored [{order}]" in line and f", stored [{order}]]" in line, line


def test_convnext_tiny_matches_eager(device: str) -> None:
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.convnext_tiny(weights=None, num_classes=10).eval().to(device)
    for module in model.modules():
        if isinstance(module, CNBlock):
            module.layer_scale.data.uniform_(0.2, 1.0)
    compiled, captured = _compile(model)
    x = rand(2, 3, 64, 64, device=device)
    assert_same(compiled(x), model(x), tolerance_scale=100.0)
    convolutions = [line for line in captured[0].ir().splitlines() if "[convolution" in line]
    assert len(convolutions) == 22
    assert sum(CHANNELS_LAST + "]" in line for line in convolutions) == 21


def test_dynamic_batch_runs_channels_last(device: str) -> None:
    model = ConvNeXtLike(channels=8).eval().to(device)
    captured: list[Any] = []
    compiled = torch.compile(model, backend=capturing_backend(captured), dynamic=True)
    for batch in (3, 5, 2):
        x = rand(batch, 3, 16, 24, device=device)
        assert_same(compiled(x), model(x), tolerance_scale=10.0)
    assert captured
    for graph in captured:
        ir = graph.ir()
        assert re.search(r"input user #\d+ \"\w+\"", ir) and "f32[s" in ir, ir  # a symbolic batch
        assert ir.count(CHANNELS_LAST + "]") == 4, ir
