"""CUDA-only properties of the engine: no hidden host synchronization, one graph launch per call,
zero-copy outputs on torch's current stream. Skipped without a GPU (the equivalence suites cover
the numbers on both devices)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from helpers import assert_same, capturing_backend, rand

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "dlrm"))
from model import DLRM, MINI, DLRMConfig, make_inputs  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


# The general path's first layer reads the user's dense input through cuBLASLt (K=13, N=128: too
# wide to lower): the staging copy must be materialized, or a new input pointer rebuilds the
# instance (a host wait per call).
WIDE_BOTTOM = DLRMConfig(bottom=(128, 4))


@pytest.mark.parametrize(("config", "megakernel"), [(MINI, True), (WIDE_BOTTOM, False)], ids=["megakernel", "general"])
def test_repeated_calls_do_not_synchronize_cuda(config: DLRMConfig, megakernel: bool) -> None:
    model = DLRM(config).cuda().eval()
    captured: list[Any] = []
    compiled = torch.compile(model, backend=capturing_backend(captured, options={"megakernel": megakernel}))
    batches = [make_inputs(config, 512, 2, device="cuda") for _ in range(6)]
    with torch.no_grad():
        compiled(*batches[0])  # compiles, builds the graph instance and tunes matmuls: may wait
        torch.cuda.synchronize()
        before = captured[0].stats()["cuda"]
        results = []
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")  # torch raises on any synchronizing call it makes
        try:
            for inputs in batches[1:]:  # fresh input tensors: new pointers every call
                results.append(compiled(*inputs))
        finally:
            torch.cuda.set_sync_debug_mode(previous)
        after = captured[0].stats()["cuda"]
        # Our own driver calls are invisible to torch's check: the engine counts its waits itself.
        assert after["host_syncs"] == before["host_syncs"], (before, after)
        assert after["graph_builds"] == before["graph_builds"]
        assert after["calls"] == before["calls"] + len(batches) - 1
        assert after["launches_per_call"] == 1
        assert after["megakernel"] == megakernel
        assert (after["library_calls"] > 0) != megakernel  # the general case exercises a staged library operand
        for inputs, actual in zip(batches[1:], results, strict=True):
            assert_same(actual, model(*inputs))


def test_runs_on_torch_current_stream() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(96, 80), torch.nn.ReLU(), torch.nn.Linear(80, 7)).cuda()
    compiled = torch.compile(model, backend="luminal")
    x = rand(33, 96, device="cuda")
    with torch.no_grad():
        expected = model(x)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                actual = compiled(x)
        side.synchronize()  # waiting for `side` alone must make the result complete
        assert_same(actual, expected)
