"""Embedding bags against eager: run-time offsets (bag size 1, uniform, variable, empty bags),
modes sum/mean/max, per_sample_weights, padding_idx, include_last_offset, int32/int64 indices."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_raises_when_run, check, rand


def bags(sizes: list[int], rows: int, dtype: torch.dtype = torch.int64, device: str = "cpu"):
    """Indices and offsets for bags of the given sizes."""
    offsets = torch.tensor([0] + list(torch.tensor(sizes).cumsum(0)[:-1].tolist()), dtype=dtype, device=device)
    idx = torch.randint(0, rows, (sum(sizes),), dtype=dtype, device=device)
    return idx, offsets


BAG_SIZES = {
    "size1": [1] * 7,
    "uniform3": [3] * 5,
    "variable": [2, 1, 4, 3, 1],
    "with_empty": [2, 0, 3, 0, 1],
}


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("layout", sorted(BAG_SIZES))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=str)
def test_embedding_bag_modes(mode: str, layout: str, dtype: torch.dtype, device: str) -> None:
    weight = rand(13, 6, device=device)
    idx, offsets = bags(BAG_SIZES[layout], 13, dtype=dtype, device=device)
    check(lambda i, o: F.embedding_bag(i, weight, o, mode=mode), idx, offsets)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_include_last_offset(mode: str, device: str) -> None:
    weight = rand(9, 4, device=device)
    idx, offsets = bags([2, 3, 1], 9, device=device)
    offsets = torch.cat([offsets, torch.tensor([idx.numel()], device=device)])
    check(lambda i, o: F.embedding_bag(i, weight, o, mode=mode, include_last_offset=True), idx, offsets)


def test_embedding_bag_per_sample_weights(device: str) -> None:
    weight = rand(11, 5, device=device)
    idx, offsets = bags([3, 1, 2, 2], 11, device=device)
    psw = rand(idx.numel(), device=device)
    check(lambda i, o, w: F.embedding_bag(i, weight, o, mode="sum", per_sample_weights=w), idx, offsets, psw)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_padding_idx(mode: str, device: str) -> None:
    weight = rand(8, 3, device=device)
    idx = torch.tensor([2, 0, 2, 5, 2, 1, 2], device=device)
    offsets = torch.tensor([0, 2, 3, 5], device=device)  # bag 1 is only padding
    check(lambda i, o: F.embedding_bag(i, weight, o, mode=mode, padding_idx=2), idx, offsets)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input(mode: str, device: str) -> None:
    weight = rand(10, 4, device=device)
    idx = torch.randint(0, 10, (6, 3), device=device)
    check(lambda i: F.embedding_bag(i, weight, mode=mode), idx)


def test_embedding_bag_module_half_precision(device: str) -> None:
    bag = torch.nn.EmbeddingBag(12, 4, mode="sum").to(device=device, dtype=torch.float16)
    with torch.no_grad():
        bag.weight.copy_(rand(12, 4, device=device))
    idx, offsets = bags([2, 2, 1], 12, device=device)
    check(lambda i, o: bag(i, o), idx, offsets)


def test_embedding_bag_index_out_of_range_raises(device: str) -> None:
    weight = rand(5, 2, device=device)
    compiled = torch.compile(lambda i, o: F.embedding_bag(i, weight, o), backend="luminal")
    offsets = torch.tensor([0, 1], device=device)
    valid = (torch.tensor([1, 4], device=device), offsets)
    assert_raises_when_run(compiled, torch.tensor([1, 7], device=device), offsets, match="out of bounds", valid=valid)


def test_embedding_bag_offset_out_of_range_raises(device: str) -> None:
    weight = rand(5, 2, device=device)
    compiled = torch.compile(lambda i, o: F.embedding_bag(i, weight, o), backend="luminal")
    indices = torch.tensor([1, 2], device=device)
    valid = (indices, torch.tensor([0, 1], device=device))
    assert_raises_when_run(compiled, indices, torch.tensor([0, 9], device=device), match="out of bounds", valid=valid)
