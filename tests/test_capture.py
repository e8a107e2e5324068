"""Calls made while the caller captures a CUDA graph (torch.cuda.graph, as serving stacks do around a
compiled model, once per batch size).

Before, any such call invalidated the caller's capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED from
a pinned allocation, or an event query). Now a call whose binding an earlier call built adds the
compiled graph to the capture (runtime/cuda/capture.cpp), and the caller's replays run luminal's
kernels; the instance is given to the capture and outlives the compiled function. A first call
inside the capture runs in eager, whose kernels the capture takes, with one LuminalFallbackWarning.
Replays are checked against eager on fresh inputs; an index out of range in a replay ends the CUDA
context, as eager's device-side assert does."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import luminal
from helpers import capturing_backend

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 32)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 16)

    def forward(self, tokens: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(self.embedding(tokens) + x))).softmax(-1)


def _model() -> Model:
    torch.manual_seed(0)
    return Model().cuda().eval()


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randint(0, 50, (8,), device="cuda"), torch.randn(8, 32, device="cuda")


def _warm_up(fn: Callable[..., Any], args: tuple[torch.Tensor, ...]) -> None:
    """Calls on a side stream, as torch.cuda.graph's documentation asks before a capture."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)


def _capture(fn: Callable[..., Any], static: tuple[torch.Tensor, ...]) -> tuple[torch.cuda.CUDAGraph, Any]:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*static)
    return graph, out


def _replays_match(graph: torch.cuda.CUDAGraph, out: torch.Tensor, static: tuple[torch.Tensor, ...], model: Model):
    for _ in range(3):
        for target, fresh in zip(static, _inputs(), strict=True):
            target.copy_(fresh)
        graph.replay()
        torch.testing.assert_close(out, model(*static))


def _compiled_calls_match(fn: Callable[..., Any], model: Model) -> None:
    args = _inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("error", luminal.LuminalFallbackWarning)
        torch.testing.assert_close(fn(*args), model(*args))


@torch.no_grad()
def test_torch_compile_capture_replays_luminal_kernels() -> None:
    model = _model()
    compiled: list[Any] = []
    fn = torch.compile(model, backend=capturing_backend(compiled))
    static = _inputs()
    _warm_up(fn, static)
    graph, out = _capture(fn, static)  # the suite fails on a fallback warning
    (function,) = compiled
    assert function.stats()["cuda"]["captured_calls"] == 1
    _replays_match(graph, out, static, model)
    _compiled_calls_match(fn, model)  # the capture took the instance: a new one is built
    # The graph keeps what it runs after the compiled function is gone.
    del fn, function, compiled
    torch._dynamo.reset()
    gc.collect()
    _replays_match(graph, out, static, model)


@torch.no_grad()
def test_luminal_compile_capture_replays_and_outlives_the_module() -> None:
    model = _model()
    module = luminal.compile(model, _inputs())
    static = _inputs()
    _warm_up(module, static)
    graph, out = _capture(module, static)
    assert module.stats()["cuda"]["captured_calls"] == 1
    _replays_match(graph, out, static, model)
    _compiled_calls_match(module, model)
    second, second_out = _capture(module, static)  # a second capture of the same binding
    assert module.stats()["cuda"]["captured_calls"] == 2
    del module
    gc.collect()
    _replays_match(graph, out, static, model)
    _replays_match(second, second_out, static, model)


@torch.no_grad()
def test_in_place_cache_update_replays_like_eager() -> None:
    """A decode-style step that writes a cache in place at a position: each replay writes as eager's."""

    def step(cache: torch.Tensor, position: torch.Tensor, row: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, position, row.tanh())
        return cache.sum(0) * 2

    cache = torch.randn(16, 32, device="cuda")
    reference = cache.clone()
    position = torch.tensor([3], device="cuda")
    row = torch.randn(1, 32, device="cuda")
    fn = torch.compile(step, backend="luminal")
    _warm_up(fn, (cache, position, row))
    step(reference, position, row)
    step(reference, position, row)
    graph, out = _capture(fn, (cache, position, row))  # records the step, runs nothing
    for k in range(5):
        position.fill_(k * 3)
        row.copy_(torch.randn_like(row))
        graph.replay()
        expected = step(reference, position, row)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(cache, reference)


@torch.no_grad()
def test_first_call_inside_a_capture_runs_eager_kernels() -> None:
    model = _model()
    static = _inputs()
    model(*static)  # eager's own lazy setup (cuBLAS's handle) happens outside the capture, as torch asks
    module = luminal.compile(model, _inputs())
    with pytest.warns(luminal.LuminalFallbackWarning, match="first call on the device"):
        graph, out = _capture(module, static)
    assert module.stats()["cuda"]["captured_calls"] == 0
    _replays_match(graph, out, static, model)
    _compiled_calls_match(module, model)  # the eager call was for the capture only


@torch.no_grad()
def test_loaded_package_captures_and_refuses_a_cold_capture(tmp_path: Path) -> None:
    model = _model()
    with pytest.warns(luminal.LuminalWarning, match="saved before its first call"):
        luminal.compile(model, _inputs()).save(tmp_path / "model.luminal")  # a cold package
    loaded = luminal.load(tmp_path / "model.luminal")
    static = _inputs()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        # No model to run in eager: the call raises before anything that would end the capture.
        with pytest.raises(luminal.LuminalError, match="first call on the device"):
            loaded(*static)
        doubled = static[1] * 2
    static[1].copy_(torch.randn_like(static[1]))
    graph.replay()
    torch.testing.assert_close(doubled, static[1] * 2)
    _warm_up(loaded, static)
    graph, out = _capture(loaded, static)
    _replays_match(graph, out, static, model)


_OUT_OF_RANGE_REPLAY = textwrap.dedent(
    """
    import torch, luminal
    embedding = torch.nn.Embedding(10, 4).cuda()
    with torch.no_grad():
        module = luminal.compile(embedding, (torch.zeros(3, dtype=torch.long, device="cuda"),))
        tokens = torch.zeros(3, dtype=torch.long, device="cuda")
        module(tokens)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = module(tokens)
        graph.replay()
        torch.cuda.synchronize()
        print("in range replayed", flush=True)
        tokens.fill_(12)
        graph.replay()
        torch.cuda.synchronize()
        print("out of range replayed", flush=True)
    """
)


def test_out_of_range_index_in_a_replay_ends_the_context(tmp_path: Path) -> None:
    """Nothing reads a replay's error record, so the replay traps: loud, as eager's device assert."""
    script = tmp_path / "replay.py"
    script.write_text(_OUT_OF_RANGE_REPLAY)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=os.environ)
    assert "in range replayed" in done.stdout, done.stderr[-3000:]
    assert "out of range replayed" not in done.stdout
    assert done.returncode != 0
    assert "CUDA error" in done.stderr or "AcceleratorError" in done.stderr, done.stderr[-3000:]
