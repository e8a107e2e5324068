"""LUMINAL_PROFILE=1 on CUDA: every step runs on its own between a pair of events (outside the
CUDA graph) and its time is printed to stderr after the call; the results are still eager's."""

from __future__ import annotations

import re

import pytest
import torch

import luminal
from helpers import assert_same, rand, set_env

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(48, 96)
        self.down = torch.nn.Linear(96, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)) * 2 + 1).softmax(-1)


def test_profile_times_every_step_and_keeps_the_results(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    set_env(monkeypatch, "LUMINAL_PROFILE", "1")
    torch.manual_seed(0)
    model = Mlp().cuda().eval()
    x = rand(5, 48, device="cuda")
    module = luminal.compile(model, (x,))
    with torch.no_grad():
        capfd.readouterr()
        result = module(x)
        torch.cuda.synchronize()
        expected = model(x)
    err = capfd.readouterr().err
    assert_same(result, expected)
    steps = re.findall(r"^\[luminal cuda\] %\d+ .*? +([0-9.]+) us  ", err, flags=re.MULTILINE)
    total = re.search(r"^\[luminal cuda\] total ([0-9.]+) us over (\d+) steps", err, flags=re.MULTILINE)
    assert total is not None, err
    assert len(steps) == int(total.group(2)) >= 3, err  # two products and the kernels between them
    assert all(float(t) > 0 for t in steps), err
    assert abs(sum(float(t) for t in steps) - float(total.group(1))) <= 0.2 * len(steps), err
