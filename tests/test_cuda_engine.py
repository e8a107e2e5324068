"""CUDA-only properties of the engine: no hidden host synchronization, one graph launch per call,
zero-copy outputs on torch's current stream. Skipped without a GPU (the equivalence suites cover
the numbers on both devices)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import luminal
from helpers import assert_same, capturing_backend, rand, set_env

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


class _DecodeLike(torch.nn.Module):
    """A decode step in miniature: normalization, row matmuls (the generated GEMV) between
    elementwise kernels, and a cache updated in place that a later matmul reads as its weights."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.up = torch.nn.Linear(dim, 2 * dim, bias=False)
        self.down = torch.nn.Linear(2 * dim, dim, bias=False)

    def forward(self, x: torch.Tensor, cache: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        h = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)
        y = self.down(torch.nn.functional.silu(self.up(h))) + x
        cache.index_copy_(0, position, y)
        return torch.softmax((y @ cache.t()).float(), dim=-1)


def _decode_like_results(monkeypatch: pytest.MonkeyPatch, programmatic: bool) -> tuple[list[Any], dict[str, Any]]:
    set_env(monkeypatch, "LUMINAL_GEMV", "generated")
    set_env(monkeypatch, "LUMINAL_PDL", "1" if programmatic else "0")
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _DecodeLike(256).to(device="cuda", dtype=torch.bfloat16).eval()
    captured: list[Any] = []
    compiled = torch.compile(model, backend=capturing_backend(captured))
    generator = torch.Generator(device="cuda").manual_seed(1)
    cache = torch.randn(24, 256, device="cuda", dtype=torch.bfloat16, generator=generator)
    results: list[Any] = []
    with torch.no_grad():
        for step in range(5):  # fresh inputs every call; the cache carries the previous writes
            x = torch.randn(1, 256, device="cuda", dtype=torch.bfloat16, generator=generator)
            position = torch.tensor([3 * step + 1], device="cuda")
            expected_cache = cache.clone()
            expected = model(x, expected_cache, position)
            actual = compiled(x, cache, position)
            assert_same(actual, expected)
            assert_same(cache, expected_cache)
            results.append((actual.clone(), cache.clone()))
    return results, captured[0].stats()["cuda"]


def test_programmatic_launch_links_kernels_without_changing_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """On sm_90+ consecutive kernels of the CUDA graph (the generated GEMV among them) are linked by
    programmatic edges: each may launch while the one before it finishes, and waits for it before it
    touches memory. Results must be bit-identical to plain edges (LUMINAL_PDL=0): a kernel that read
    too early would differ."""
    linked, linked_stats = _decode_like_results(monkeypatch, programmatic=True)
    plain, plain_stats = _decode_like_results(monkeypatch, programmatic=False)
    assert plain_stats["programmatic_edges"] == 0
    if torch.cuda.get_device_capability() >= (9, 0):
        assert linked_stats["programmatic_edges"] >= 4, linked_stats
    else:
        assert linked_stats["programmatic_edges"] == 0
    for (out_a, cache_a), (out_b, cache_b) in zip(linked, plain, strict=True):
        assert torch.equal(out_a, out_b)
        assert torch.equal(cache_a, cache_b)


def test_an_error_is_not_erased_by_a_later_call_queued_before_it_finished() -> None:
    """Calls do not wait: a call raises the error of the latest replay only once that replay has
    finished. A call queued while an erroneous one still runs used to export its own empty record
    over the error, which then went unraised (an out-of-range index passed silently)."""
    embedding = torch.nn.Embedding(10, 4).cuda()
    good = torch.zeros(3, dtype=torch.long, device="cuda")
    bad = torch.full((3,), 12, dtype=torch.long, device="cuda")
    with torch.no_grad():
        module = luminal.compile(embedding, (good,))
        module(good)
        torch.cuda.synchronize()
        torch.cuda._sleep(50_000_000)  # keeps the stream busy: the two calls below queue behind it
        module(bad)
        module(good)  # finds the erroneous replay unfinished, launches its own
        torch.cuda.synchronize()
        with pytest.raises(luminal.LuminalError, match="out of bounds"):
            module(good)
