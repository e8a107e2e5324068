"""Inputs updated element by element (a static cache's step counter, a running average) against
eager: written into the input's own memory after every read of the old value, not copied back;
updates the graph cannot order that way are copied back, still eager's result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from helpers import assert_same, capturing_backend, non_contiguous, rand


def compiled_with_stats(fn: Callable[..., Any]) -> tuple[Callable[..., Any], list[Any]]:
    torch._dynamo.reset()
    captured: list[Any] = []
    return torch.compile(fn, backend=capturing_backend(captured)), captured


def run_both(fn: Callable[..., Any], *args: torch.Tensor, calls: int = 3) -> list[Any]:
    """Calls fn eagerly and compiled `calls` times on the same (updated) state; compares outputs
    and the state after every call. Returns the captured compiled graphs."""
    compiled, captured = compiled_with_stats(fn)
    eager_args = [a.clone() for a in args]
    pointers = [a.data_ptr() for a in args]
    for _ in range(calls):
        expected = fn(*eager_args)
        actual = compiled(*args)
        assert_same(actual, expected)
        for mine, theirs in zip(args, eager_args, strict=True):
            assert_same(mine, theirs)
    assert [a.data_ptr() for a in args] == pointers
    return captured


def cache_step(cache: torch.Tensor, counter: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """A static cache's write: the row at the counter, then the counter moves on (read before)."""
    cache.index_copy_(1, counter.view(1), new)
    counter.add_(1)
    return cache.sum(-1)


def test_step_counter_is_written_in_place(device: str) -> None:
    cache, new = rand(2, 16, 8, device=device), rand(2, 1, 8, device=device)
    counter = torch.tensor(3, device=device)
    captured = run_both(cache_step, cache, counter, new, calls=4)
    assert int(counter) == 7
    stats = captured[0].stats()
    assert stats["copy_back_bytes"] == 0, stats
    if device == "cuda":
        assert stats["cuda"]["graph_builds"] == 1, stats["cuda"]


def running_average(state: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Reads the old state twice (one read is a reduction over all of it), then updates it."""
    out = x * state + state.sum()
    state.mul_(0.5).add_(x)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_running_average_is_written_in_place(dtype: torch.dtype, device: str) -> None:
    if dtype == torch.int64:
        state = torch.randint(-50, 50, (5, 7), device=device)
        x = torch.randint(-50, 50, (5, 7), device=device)

        def update(s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            out = v * s + s.sum()
            s.mul_(3).add_(v)
            return out

        captured = run_both(update, state, x)
    else:
        state, x = rand(5, 7, dtype=dtype, device=device), rand(5, 7, dtype=dtype, device=device)
        captured = run_both(running_average, state, x)
    assert captured[0].stats()["copy_back_bytes"] == 0


def test_update_that_cannot_be_written_in_place_is_copied_back(device: str) -> None:
    """A non-contiguous state: the new values are computed apart and copied back."""
    state = non_contiguous(rand(6, 4, device=device))
    x = rand(6, 4, device=device)
    captured = run_both(running_average, state, x)
    assert captured[0].stats()["copy_back_bytes"] == state.numel() * state.element_size()


def test_update_read_afterwards_is_copied_back(device: str) -> None:
    """The new value is read by the output: the update is no tail node; copied back."""

    def fn(counter: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        counter.add_(1)
        return x * counter

    counter, x = torch.tensor(2.0, device=device), rand(3, device=device)
    captured = run_both(fn, counter, x)
    assert captured[0].stats()["copy_back_bytes"] == counter.element_size()


def test_update_reading_another_updated_input(device: str) -> None:
    """a += b reads b, which is itself updated: a's new value is not written in place (b may
    already hold its new value then); b's is. Both match eager."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a.add_(b)
        b.add_(1)
        return a.sum()

    a, b = rand(4, device=device), rand(4, device=device)
    captured = run_both(fn, a, b)
    assert captured[0].stats()["copy_back_bytes"] == a.numel() * a.element_size()


def test_update_reading_a_shifted_element_is_copied_back(device: str) -> None:
    """state[i] = state[i] + state[i - 1] reads another element than it writes: never in place."""

    def fn(state: torch.Tensor) -> torch.Tensor:
        state.add_(torch.roll(state, 1, 0))
        return state.sum()

    state = rand(9, device=device)
    captured = run_both(fn, state)
    assert captured[0].stats()["copy_back_bytes"] == state.numel() * state.element_size()
