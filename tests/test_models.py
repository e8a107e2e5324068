"""Whole models against eager: an MLP and DLRMs at several batch and bag sizes; one compile serves
every later batch size."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import luminal
from helpers import assert_same, rand

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "dlrm"))
from model import DLRM, MINI, DLRMConfig, make_inputs  # noqa: E402


def test_mlp(device: str) -> None:
    model = torch.nn.Sequential(
        torch.nn.Linear(13, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3)
    ).to(device)
    compiled = torch.compile(model, backend="luminal")
    with torch.no_grad():
        for batch in (1, 5, 64, 17):
            x = rand(batch, 13, device=device)
            assert_same(compiled(x), model(x))
    assert luminal.compile_count() == 2  # batch 1 (specialized) + one dynamic graph for the rest


@pytest.mark.parametrize("bag_size", [1, 3])
@pytest.mark.parametrize("final_sigmoid", [True, False], ids=["sigmoid", "logits"])
def test_dlrm_batches(bag_size: int, final_sigmoid: bool, device: str) -> None:
    config = DLRMConfig(final_sigmoid=final_sigmoid)
    model = DLRM(config).to(device).eval()
    compiled = torch.compile(model, backend="luminal")
    with torch.no_grad():
        for batch in (1, 7, 256, 2048):
            inputs = make_inputs(config, batch, bag_size, device=device)
            actual = compiled(*inputs)
            expected = model(*inputs)
            assert_same(actual, expected)
            assert (actual - expected).abs().max().item() <= 1e-5
    assert luminal.compile_count() == 2


def test_dlrm_repeated_calls_reuse_one_compile(device: str) -> None:
    model = DLRM(MINI).to(device).eval()
    compiled = torch.compile(model, backend="luminal", dynamic=True)
    with torch.no_grad():
        for batch in (3, 9, 40, 3, 9):
            inputs = make_inputs(MINI, batch, 2, device=device)
            assert_same(compiled(*inputs), model(*inputs))
    assert luminal.compile_count() == 1


def test_dlrm_wider_and_mean_mode(device: str) -> None:
    config = DLRMConfig(bottom=(64, 32, 16), tables=(100, 7, 1000, 33, 2), top=(64, 32, 1), mode="mean")
    model = DLRM(config).to(device).eval()
    compiled = torch.compile(model, backend="luminal")
    with torch.no_grad():
        for batch in (5, 130):
            inputs = make_inputs(config, batch, 4, device=device, index_dtype=torch.int32)
            assert_same(compiled(*inputs), model(*inputs), tolerance_scale=2)
