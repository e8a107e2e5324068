"""Tensor constructors (arange, full, zeros/ones, scalar_tensor) against eager."""

from __future__ import annotations

import pytest
import torch

from helpers import check, rand


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + torch.arange(x.shape[-1], device=x.device),
        lambda x: x * torch.arange(1, 2 * x.shape[-1] + 1, 2, device=x.device),
        lambda x: x + torch.arange(0.5, 0.5 + 0.25 * x.shape[-1], 0.25, device=x.device),
        lambda x: x + torch.full((x.shape[-1],), 2.5, device=x.device),
        lambda x: x * torch.ones_like(x) - torch.zeros(x.shape, device=x.device),
        lambda x: x + torch.scalar_tensor(3.0, device=x.device),
        lambda x: torch.arange(x.shape[0], device=x.device, dtype=torch.int64) * 3,
    ],
    ids=["arange", "arange_step", "arange_float", "full", "ones_zeros", "scalar_tensor", "arange_int"],
)
def test_constructors(fn, device: str) -> None:
    check(fn, rand(4, 6, device=device))


def test_arange_with_dynamic_length(device: str) -> None:
    fn = torch.compile(lambda x: x + torch.arange(x.shape[0], device=x.device).unsqueeze(1), backend="luminal")
    for n in (3, 5, 9):
        x = rand(n, 2, device=device)
        torch.testing.assert_close(fn(x), x + torch.arange(n, device=device).unsqueeze(1))


def test_lifted_constant_tensor(device: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x * torch.tensor([1.0, -2.0, 3.5], device=x.device)

    check(fn, rand(4, 3, device=device))
