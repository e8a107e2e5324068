"""Small tables computed from the graph's inputs alone (a RoPE table: the angles of the positions,
a batched matmul with K = 1, then their concatenation) are computed inside the kernels that read
each of their elements once (the cosine and sine tables) instead of in launches of their own; values
computed by other kernels (a residual stream) and tables holding reductions stay kernels."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from helpers import assert_same, capturing_backend, rand


class Rope(torch.nn.Module):
    """Llama's rotary embedding as transformers writes it (angles by a batched matmul), applied."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, position: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        expanded = self.inv_freq[None, :, None].float().expand(position.shape[0], -1, 1)
        angles = (expanded @ position[:, None, :].float()).transpose(1, 2)
        table = torch.cat((angles, angles), dim=-1)
        cos, sin = table.cos().to(x.dtype).unsqueeze(1), table.sin().to(x.dtype).unsqueeze(1)
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin


def _optimized_ir(fn: Any, *args: torch.Tensor) -> tuple[str, Any]:
    torch._dynamo.reset()
    captured: list[Any] = []
    result = torch.compile(fn, backend=capturing_backend(captured))(*args)
    return captured[0].ir(optimized=True), result


def _compute_lines(ir: str) -> list[str]:
    return [line for line in ir.splitlines() if re.search(r"= (pointwise|reduce|matmul|scatter|attention)", line)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("positions", [[0], [130], [4095], [3, 4, 5, 1000]], ids=str)
def test_rope_table_is_computed_in_its_reader(device: str, dtype: torch.dtype, positions: list[int]) -> None:
    torch.manual_seed(0)
    rope = Rope(64).to(device)
    position = torch.tensor([positions], device=device)
    x = rand(1, 8, len(positions), 64, dtype=dtype, device=device)
    ir, actual = _optimized_ir(rope, position, x)
    compute = _compute_lines(ir)
    # The angles (a reduction over K = 1) and their concatenation are computed inside the cosine and
    # sine tables; those stay nodes, which the kernel applying them reads for every head.
    assert len(compute) == 3, ir
    assert not any(re.search(r"= reduce|\(aten\.(bmm|cat)\.default\)", line) for line in compute), ir
    assert_same(actual, rope(position, x))


def _residual_layers(x: torch.Tensor, w: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    h = x @ w
    for _ in range(3):
        normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * gamma
        h = h + normed @ w
    return h


def test_values_from_other_kernels_stay_kernels(device: str) -> None:
    """Each residual sum (a product's output plus the stream) is read by the next norm twice and by
    the next sum: inlined, every reader would add up the whole stream again."""
    torch.manual_seed(0)
    x, w, gamma = rand(1, 64, device=device), rand(64, 64, device=device) / 8, rand(64, device=device)
    ir, actual = _optimized_ir(_residual_layers, x, w, gamma)
    sums = [line for line in _compute_lines(ir) if "(aten.add.Tensor)" in line]
    assert len(sums) >= 2, ir  # the first two sums stay nodes (the last is the output)
    assert_same(actual, _residual_layers(x, w, gamma))


def _scaled_twice(table_source: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    scale = torch.rsqrt(table_source.pow(2).mean(-1, keepdim=True))  # a reduction over an input
    return a * scale + torch.tanh(b * scale)


def test_tables_holding_a_reduction_stay_kernels(device: str) -> None:
    """A small table from an input that reduces (each element a mean over 512 values): a reader
    that inlined it would repeat the reduction for every element it computes."""
    torch.manual_seed(0)
    source, a, b = rand(4, 512, device=device), rand(4, 512, device=device), rand(4, 512, device=device)
    ir, actual = _optimized_ir(_scaled_twice, source, a, b)
    assert any("(aten.rsqrt.default)" in line for line in _compute_lines(ir)), ir
    assert_same(actual, _scaled_twice(source, a, b))
