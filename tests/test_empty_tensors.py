"""Tensors without elements against eager: outputs of size 0, reductions over an empty dimension
(sum 0, prod 1, mean NaN), products with K = 0 (zeros), empty batches through layers.

A tensor of size 0 has any strides (at::empty([2, 0]) has strides [1, 1]); every output used to
fail the engines' "the output view is contiguous" check, so each such graph ran in eager with a
fallback warning (which fails these tests).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from helpers import check, rand

CASES: dict[str, tuple[Callable[[torch.Tensor], Any], tuple[int, ...]]] = {
    "pointwise": (lambda x: x * 2 + 1, (2, 0, 8)),
    "sum over the empty dim": (lambda x: x.sum(1), (2, 0, 8)),
    "sum over another dim": (lambda x: x.sum(2), (2, 0, 8)),
    "sum of everything": (lambda x: x.sum() + 1, (2, 0)),
    "mean over the empty dim": (lambda x: x.mean(1), (2, 0, 8)),
    "prod over the empty dim": (lambda x: x.prod(1), (2, 0, 8)),
    "amax over another dim": (lambda x: x.amax(2), (2, 0, 8)),
    "softmax": (lambda x: x.softmax(-1), (2, 0, 8)),
    "cumsum": (lambda x: x.cumsum(1), (2, 0, 8)),
    "sort": (lambda x: x.sort(1)[0], (2, 0, 8)),
    "cat with an empty part": (lambda x: torch.cat([x, x.new_ones(2, 3, 8)], 1), (2, 0, 8)),
    "matmul with K = 0": (lambda x: x.transpose(1, 2) @ x, (2, 0, 8)),
    "matmul with M = 0": (lambda x: x @ x.transpose(1, 2), (2, 0, 8)),
    "bmm of no batch": (lambda x: torch.bmm(x, x.transpose(1, 2)), (0, 3, 4)),
    "slice to nothing": (lambda x: x[:, :0] + 1, (3, 4)),
    "index_select of no index": (lambda x: x.index_select(1, x.new_zeros(0, dtype=torch.long)), (2, 5, 8)),
    "any over the empty dim": (lambda x: (x > 0).any(1), (2, 0, 8)),
    "all over the empty dim": (lambda x: (x > 0).all(1), (2, 0, 8)),
    "where": (lambda x: torch.where(x > 0, x, 0.0), (2, 0, 8)),
    "transposed result": (lambda x: (x * 2).transpose(0, 1), (2, 0, 8)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_empty_tensors_compute_what_eager_does(case: str, device: str) -> None:
    fn, shape = CASES[case]
    check(fn, rand(*shape, device=device))


class _Layers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.norm = torch.nn.LayerNorm(4)
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = F.adaptive_avg_pool2d(self.conv(images), 1).flatten(1)
        return self.linear(self.norm(features)).softmax(-1)


@pytest.mark.parametrize("batch", [0, 3])
def test_a_batch_of_no_images_runs_through_the_layers(batch: int, device: str) -> None:
    model = _Layers().to(device).eval()
    with torch.no_grad():
        check(model, rand(batch, 3, 5, 5, device=device))


def test_a_linear_layer_without_input_features_gives_its_bias(device: str) -> None:
    linear = torch.nn.Linear(0, 3).to(device).eval()
    with torch.no_grad():
        check(linear, rand(5, 0, device=device))
