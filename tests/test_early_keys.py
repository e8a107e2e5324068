"""A decode attention that requests its keys and values before it waits for the kernel ahead of it.

In a decode step a kernel ahead of the attention writes the step's new key and value rows
into the caches (index_copy at the layer's step counter). Where the schedule proves that those
writes go only to rows named by a small graph input that nothing up to the attention writes
(schedule::mark_early_attention_rows), the decode kernel requests its keys and values before the
wait, and after it only those rows again. A stale row would be silent wrong output, so the new key
here dominates every score: the output is then close to the new value row, and far from it if the
kernel used the row the cache held before the step. Checked against eager over several steps, at
positions in the first, a middle and the last slice of the keys; on the CPU the CUDA module is
generated (LUMINAL_CHECK_CUDA_CODEGEN) and its kernel's choice is checked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor

from helpers import assert_raises_when_run, assert_same, capturing_backend, rand

HEADS, KV_HEADS, LENGTH, DIM = 8, 2, 256, 64
SLOW_STEPS = 120
EARLY = "#define LM_EARLY_ROWS (1 && LM_VECTOR)"
WAITS_FIRST = "#define LM_EARLY_ROWS (0 && LM_VECTOR)"


def _slowly(x: torch.Tensor) -> torch.Tensor:
    """x plus a small term that takes the kernel computing it a long chain of dependent operations.
    Inlined into the cache writes, it makes the kernel ahead of the attention write its rows late:
    a row requested before the wait and not again after it would then be the cache's old row. With
    the reload after the wait left out, every CUDA case below that has an attention node (f16, bf16)
    failed on a lent H200; without this term all of them had passed."""
    y = x
    for _ in range(SLOW_STEPS):
        y = torch.sin(y) * 1.25
    return x + y * 1e-3


def _attend(q: Tensor, cache_k: Tensor, cache_v: Tensor, position: Tensor) -> Tensor:
    keys = torch.arange(cache_k.shape[2], device=q.device)
    mask = (keys <= position).view(1, 1, 1, -1)
    return torch.nn.functional.scaled_dot_product_attention(q, cache_k, cache_v, attn_mask=mask, enable_gqa=True)


def _write_and_attend(
    q: Tensor, k: Tensor, v: Tensor, cache_k: Tensor, cache_v: Tensor, rows: Tensor, last: Tensor
) -> Tensor:
    cache_k.index_copy_(2, rows, k)
    cache_v.index_copy_(2, rows, v)
    return _attend(q, cache_k, cache_v, last)


def counter_step(q: Tensor, k: Tensor, v: Tensor, cache_k: Tensor, cache_v: Tensor, counter: Tensor) -> Tensor:
    """transformers' static cache: writes at the layer's counter, which moves on at the end."""
    if q.is_cuda:  # where the race can happen (on the CPU it costs the NVRTC check seconds)
        k, v = _slowly(k), _slowly(v)
    out = _write_and_attend(q, k, v, cache_k, cache_v, counter.view(1), counter)
    counter.add_(1)
    return out


def two_rows(q: Tensor, k: Tensor, v: Tensor, cache_k: Tensor, cache_v: Tensor, counter: Tensor) -> Tensor:
    """The new key and value in two rows, at the counter and after it: the second is no value of
    the counter, so the rows written are not proven."""
    at = counter + torch.arange(2, device=counter.device)
    out = _write_and_attend(q, k.expand(-1, -1, 2, -1), v.expand(-1, -1, 2, -1), cache_k, cache_v, at, counter + 1)
    counter.add_(2)
    return out


def clamped_index(q: Tensor, k: Tensor, v: Tensor, cache_k: Tensor, cache_v: Tensor, counter: Tensor) -> Tensor:
    """Rows at a value computed from the counter: not an input's value, so not proven."""
    at = counter.clamp(0, cache_k.shape[2] - 1)
    out = _write_and_attend(q, k, v, cache_k, cache_v, at.view(1), at)
    counter.add_(1)
    return out


def _dominant_step(dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v of one step whose new key outscores every cached one by far: each query head of a
    group is the same vector u, the new key is 4u (a score of about 96 against at most about 9 for
    the cached keys, with values in [-3, 3], 64 of them per row, and the scale 1/8)."""
    u = rand(1, KV_HEADS, 1, DIM, device=device)
    q = u.repeat_interleave(HEADS // KV_HEADS, dim=1)
    k = 4 * u
    v = 3 * rand(1, KV_HEADS, 1, DIM, device=device)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def _compiled(fn: Callable[..., Any], seed: int) -> tuple[Callable[..., Any], list[Any]]:
    """`fn` through torch.compile with the luminal backend (general path), after a Dynamo reset and
    seeding; the compiled graphs are appended to the returned list."""
    torch._dynamo.reset()
    torch.manual_seed(seed)
    captured: list[Any] = []
    return torch.compile(fn, backend=capturing_backend(captured, options={"megakernel": False})), captured


def _run_steps(
    fn: Callable[..., torch.Tensor], dtype: torch.dtype, device: str, start: int, steps: int = 3
) -> list[Any]:
    compiled, captured = _compiled(fn, start)
    cache_k = rand(1, KV_HEADS, LENGTH, DIM, dtype=dtype, device=device)
    cache_v = rand(1, KV_HEADS, LENGTH, DIM, dtype=dtype, device=device)
    counter = torch.tensor(start, device=device)
    expected_state = [cache_k.clone(), cache_v.clone(), counter.clone()]
    for _ in range(steps):  # the recorded graph is replayed with the counter moving on
        q, k, v = _dominant_step(dtype, device)
        expected = fn(q, k, v, *expected_state)
        actual = compiled(q, k, v, cache_k, cache_v, counter)
        # The output is close to the new value row; one read from the cache before the step would
        # give a mix of the other rows instead.
        assert (expected.float() - v.float().repeat_interleave(HEADS // KV_HEADS, dim=1)).abs().max() < 0.1
        assert_same(actual, expected, tolerance_scale=8)
        for mine, theirs in zip([cache_k, cache_v, counter], expected_state, strict=True):
            assert_same(mine, theirs)
    assert len(captured) == 1
    return captured


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("start", [0, 30, 127, 253])
def test_keys_requested_before_the_wait_see_the_step_s_rows(dtype: torch.dtype, start: int, device: str) -> None:
    """Positions in the first slice, at a slice boundary (31 -> 32), in a middle one and the last."""
    captured = _run_steps(counter_step, dtype, device, start)
    attentions = captured[0].stats()["attentions"]
    # On CUDA, eager's f32 attention with grouped heads exports as its math (products and a
    # softmax), with no attention node; every other case has one.
    assert attentions == 1 or (dtype == torch.float32 and device == "cuda"), attentions
    if attentions:
        assert EARLY in captured[0].cuda_source()


def another_write_first(q: Tensor, k: Tensor, v: Tensor, cache_k: Tensor, cache_v: Tensor, counter: Tensor) -> Tensor:
    """The keys written at row 0 as well, before the counter's row: kernels ahead of the attention
    may still be running when it starts, so that write is not proven final before its wait. (Scaled
    down: the new key still outscores it by far.)"""
    cache_k.index_copy_(2, torch.zeros(1, dtype=torch.long, device=k.device), k * 0.25)
    out = _write_and_attend(q, k, v, cache_k, cache_v, counter.view(1), counter)
    counter.add_(1)
    return out


@pytest.mark.parametrize("fn", [two_rows, clamped_index, another_write_first], ids=lambda f: f.__name__)
def test_unproven_rows_keep_the_wait_first(fn: Callable[..., torch.Tensor], device: str) -> None:
    captured = _run_steps(fn, torch.bfloat16, device, 40)
    source = captured[0].cuda_source()
    assert WAITS_FIRST in source and EARLY not in source


def two_layers(q: Tensor, k: Tensor, v: Tensor, *state: Tensor) -> tuple[Tensor, Tensor]:
    """Two layers, each with its caches and its own counter (at different positions): each
    attention's early rows are its own layer's counter."""
    return counter_step(q, k, v, *state[:3]), counter_step(q, k, v, *state[3:])


def test_each_layer_reads_its_own_counter(device: str) -> None:
    compiled, captured = _compiled(two_layers, 7)
    dtype = torch.bfloat16
    state: list[Tensor] = []
    for start in (5, 90):
        state += [rand(1, KV_HEADS, LENGTH, DIM, dtype=dtype, device=device) for _ in range(2)]
        state.append(torch.tensor(start, device=device))
    expected_state = [t.clone() for t in state]
    for _ in range(3):
        q, k, v = _dominant_step(dtype, device)
        expected = two_layers(q, k, v, *expected_state)
        assert_same(compiled(q, k, v, *state), expected, tolerance_scale=8)
        for mine, theirs in zip(state, expected_state, strict=True):
            assert_same(mine, theirs)
    assert captured[0].stats()["attentions"] == 2
    assert EARLY in captured[0].cuda_source()


@pytest.mark.parametrize("bad", [LENGTH, -1, 2**40], ids=["length", "negative", "huge"])
def test_a_counter_out_of_range_raises(bad: int, device: str) -> None:
    """A hostile counter: the rows requested before the wait are compared with the keys the kernel
    reads (never used as addresses), and the cache write's bounds check fails the call."""
    compiled, captured = _compiled(counter_step, 3)
    dtype = torch.bfloat16
    cache_k, cache_v = (rand(1, KV_HEADS, LENGTH, DIM, dtype=dtype, device=device) for _ in range(2))
    q, k, v = _dominant_step(dtype, device)
    valid = (q, k, v, cache_k, cache_v, torch.tensor(5, device=device))
    assert_raises_when_run(
        compiled, q, k, v, cache_k, cache_v, torch.tensor(bad, device=device), match="out of bounds", valid=valid
    )
    assert EARLY in captured[0].cuda_source()
