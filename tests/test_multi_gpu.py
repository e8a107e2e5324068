"""A model on a second GPU, and the caller's current device.

luminal makes the call's device's context current for its CUDA calls, and torch takes its current
device from the current context: a call on cuda:1 used to leave torch's current device at 1, so
the caller's next `.cuda()` or `device="cuda"` allocated on cuda:1 (seen on a two-GPU H200 host:
a fresh model's `.cuda()` landed on cuda:1, and Dynamo then failed on a cross-device embedding).
Needs two GPUs: skipped elsewhere."""

from __future__ import annotations

import pytest
import torch

import luminal

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 32)
        self.linear = torch.nn.Linear(32, 16)

    def forward(self, tokens: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.embedding(tokens) + x).softmax(-1)


def _inputs(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randint(0, 50, (8,), device=device), torch.randn(8, 32, device=device)


@pytest.mark.parametrize("how", ["torch.compile", "luminal.compile"])
@torch.no_grad()
def test_calls_on_cuda1_keep_the_callers_current_device(how: str) -> None:
    model = Model().to("cuda:1").eval()
    if how == "torch.compile":
        fn = torch.compile(model, backend="luminal")
    else:
        fn = luminal.compile(model, _inputs("cuda:1"))
    for current in (0, 1, 0):
        with torch.cuda.device(current):
            for _ in range(2):
                args = _inputs("cuda:1")
                out = fn(*args)
                assert out.device == torch.device("cuda:1")
                torch.testing.assert_close(out, model(*args))
                assert torch.cuda.current_device() == current
                assert torch.empty(1, device="cuda").device == torch.device("cuda", current)


@torch.no_grad()
def test_one_compiled_function_on_both_devices() -> None:
    """Dynamo compiles a graph per device; each runs on its own, the current device untouched."""
    model = Model().eval()
    fn = torch.compile(model, backend="luminal")
    for device in ("cuda:0", "cuda:1", "cuda:0", "cuda:1"):
        model.to(device)
        args = _inputs(device)
        torch.testing.assert_close(fn(*args), model(*args))
        assert torch.cuda.current_device() == 0
