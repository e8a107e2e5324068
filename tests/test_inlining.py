"""Fusion of producers whose bodies hold inline reductions (folds: gather-form scatter_reduce) into
consumers that reduce or fold themselves: a producer's fold variable must not capture the
consumer's reduce variable. Each case failed IR verification ("fold variable r0 is already
bound") before fold variables were renumbered on substitution (index_put, the issue's repro, was
a fold then; it is a scatter node now and stays covered as a model of the same computation)."""

from __future__ import annotations

import pytest
import torch

from helpers import capturing_backend, check, rand


def inverse_permutation(perm: torch.Tensor) -> torch.Tensor:
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel(), device=perm.device)
    return inv


def inverse_permutation_fold(perm: torch.Tensor) -> torch.Tensor:
    """The same inverse as a gather-form reduction: each element folds over the positions of perm."""
    positions = torch.arange(perm.numel(), device=perm.device)
    return torch.zeros_like(perm).scatter_reduce(0, perm, positions, "amax", include_self=False)


def gather_inverse_then_sum(perm: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return w[inverse_permutation(perm)].view(-1, 2, w.shape[1]).sum(1)


def gather_double_inverse_then_sum(perm: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """inverse(inverse(perm)) == perm: one scatter's fold is inlined into the other's fold, and both
    into the sum (two nested folds inside a reduction)."""
    return w[inverse_permutation(inverse_permutation(perm))].view(-1, 2, w.shape[1]).sum(1)


def gather_double_inverse_fold_then_sum(perm: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return w[inverse_permutation_fold(inverse_permutation_fold(perm))].view(-1, 2, w.shape[1]).sum(1)


@pytest.mark.parametrize(
    "fn",
    [gather_inverse_then_sum, gather_double_inverse_then_sum, gather_double_inverse_fold_then_sum],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize("rows", [2, 8, 14])
def test_scatter_fold_inlined_into_sum(fn, rows: int, device: str) -> None:
    perm = torch.randperm(rows, device=device)
    check(fn, perm, rand(rows, 3, device=device))


def test_scatter_fold_inlined_into_sum_strict(device: str) -> None:
    """The issue's repro, with folds: strict mode raised the verification error."""
    perm, w = torch.randperm(8, device=device), rand(8, 3, device=device)
    captured: list = []
    fn = gather_double_inverse_fold_then_sum
    out = torch.compile(fn, backend=capturing_backend(captured, strict=True))(perm, w)
    torch.testing.assert_close(out, fn(perm, w), rtol=1.3e-6, atol=1e-5)
    # Everything fused into the one reduction: folds nested in its body, each with its own variable.
    ir = captured[0].ir()
    assert ir.count("reduce.sum") == 1 and "r2 <" in ir, ir


def test_scatter_add_fold_inlined_into_sum(device: str) -> None:
    x = rand(8, 3, device=device)
    index = torch.randint(0, 8, (8, 3), device=device)
    check(lambda x, i: torch.zeros_like(x).scatter_add(0, i, x).view(4, 2, 3).sum(1), x, index, tolerance_scale=4)
