"""Fusion of producers whose bodies hold inline reductions (folds: gather-form scatter_reduce) into
consumers that reduce or fold themselves: a producer's fold variable must not capture the
consumer's reduce variable. Each case failed IR verification ("fold variable r0 is already
bound") before fold variables were renumbered on substitution (index_put, the issue's repro, was
a fold then; it is a scatter node now and stays covered as a model of the same computation)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

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


# ---- masked consumers of inlined producers ------------------------------------------------------
# A masked load reads 0 where its mask is false (col2im's patches outside the image, grid_sample's
# samples outside with zero padding). Inlining a producer into such a load pushed the mask into the
# producer's own loads, so a masked position computed the producer's body at zeros: exp(0) = 1,
# 0 + 1, 0 / 0 = NaN. timm's VOLO (softmax, a batched matmul, then F.fold) came out all NaN in
# bfloat16, and F.fold(exp(x)) was off by whole units in float32.

FOLD = dict(output_size=(8, 7), kernel_size=3, padding=1, stride=2)
PRODUCERS = {
    "exp": lambda t, u: torch.exp(t),
    "plus_one": lambda t, u: t + 1,
    "divide": lambda t, u: t / u,
    "negate": lambda t, u: -t,
    "product": lambda t, u: t * u,  # zero at zero: no select needed, same results
}


@pytest.mark.parametrize("producer", PRODUCERS, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_fold_of_an_inlined_producer(producer: str, dtype: torch.dtype, device: str) -> None:
    make = PRODUCERS[producer]
    cols = rand(2, 4 * 9, 4 * 4, dtype=dtype, device=device, low=-1, high=1)
    divisor = rand(2, 4 * 9, 4 * 4, dtype=dtype, device=device, low=0.5, high=2)
    check(lambda t, u: F.fold(make(t, u), **FOLD), cols, divisor, tolerance_scale=4)
    # All-zero columns: the sign of each zero sum shows in 1 / fold (eager adds patches onto +0).
    check(lambda t, u: 1 / F.fold(make(t, u), **FOLD), cols * 0, divisor, tolerance_scale=4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_outlook_attention_fold(dtype: torch.dtype, device: str) -> None:
    """VOLO's outlook attention: softmax weights times unfolded values, folded back."""
    batch, heads, positions, window, channels = 2, 2, 16, 9, 8

    def outlook(logits: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        y = logits.softmax(dim=-1) @ values
        y = y.permute(0, 1, 4, 3, 2).reshape(batch, heads * channels * window, positions)
        return F.fold(y, output_size=(8, 8), kernel_size=3, padding=1, stride=2)

    logits = rand(batch, heads, positions, window, window, dtype=dtype, device=device)
    values = rand(batch, heads, positions, window, channels, dtype=dtype, device=device)
    check(outlook, logits, values, tolerance_scale=4)


@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_zero_padding_of_an_inlined_producer(align_corners: bool, device: str) -> None:
    def fn(x, g):
        return F.grid_sample(torch.exp(x) + 1, g, padding_mode="zeros", align_corners=align_corners)

    x = rand(2, 3, 5, 4, device=device, low=-1, high=1)
    grid = rand(2, 3, 7, 2, device=device, low=-1.5, high=1.5)  # some samples outside
    check(fn, x, grid, tolerance_scale=4)
