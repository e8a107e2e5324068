"""Sizes computed from dynamic sizes with float arithmetic or powers, under torch.compile(dynamic=True):
torch.export writes them as CeilToInt/FloorToInt of float steps (arange with float bounds, as in
XLNet's and Funnel's relative positions; interpolate with a scale factor) or as SymInt powers
(_operator.pow); sizes the export knows to be constants where luminal's expression does not
simplify. Each compiles once for every size, without falling back."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import luminal
from helpers import assert_same, rand


def relative_positions(x: torch.Tensor) -> torch.Tensor:
    """XLNet: arange(klen, -qlen, -1.0); Funnel: arange(-2n, 2n, 1.0)."""
    n = x.shape[1]
    backward = torch.arange(n, -n, -1.0, device=x.device, dtype=torch.float32)
    symmetric = torch.arange(-2.0 * n, 2.0 * n, 1.0, device=x.device)
    return x.sum(1, keepdim=True) * backward.sum() + symmetric[None, :] * x[:, :1]


def integer_ranges(x: torch.Tensor) -> torch.Tensor:
    """arange of integers with a symbolic start: forward, backward by 2, and half steps of floats."""
    n = x.shape[1]
    forward = torch.arange(n, 3 * n, device=x.device)
    backward = torch.arange(n, -n, -2, device=x.device)
    halves = torch.arange(-n, n, 0.5, device=x.device)
    return x * forward[:n] + backward.sum() + halves.reshape(-1, 4)[:1, :1]


def upsampled(x: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, scale_factor=2.0, mode="nearest") * 2


def halved(x: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, scale_factor=0.5, mode="nearest") + 1


def squared_size(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[0]
    return torch.ones(n**2, device=x.device, dtype=x.dtype).reshape(n, n) @ x


# Per case: shapes whose sizes are all >= 2 (one dynamic compile serves them all), then shapes
# with sizes of 1 (which Dynamo specializes: a compile of their own).
def last_positions(x: torch.Tensor) -> torch.Tensor:
    """Bounds counted from the end by a size (Mamba2's attention_mask[:, -seq_len:]), and a bound
    whose sign luminal cannot prove (Dynamo's guard keeps it in range)."""
    n = x.shape[0]
    tail = x[:, -n:] * 2 + x[:, -2 * n : x.shape[1] - n] + x[:, -1 - n : -1]
    return tail + x[:, x.shape[1] - 3 :].sum(1, keepdim=True)


def chunk_decay(x: torch.Tensor) -> torch.Tensor:
    """Mamba2's chunked scan: x[b, t] padded to chunks of 8, the chunk length inferred (-1), and
    each chunk's last cumulative sum broadcast against the chunk. torch.export knows that the
    slice [..., -1:] has size 1; luminal's expression for it (max(0, n - max(0, n - 1)) of an n it
    cannot bound) does not simplify, so the subtraction must take the export's size to broadcast
    (before, every call after the dynamic compile ran in eager)."""
    b, t = x.shape
    chunks = F.pad(x, (0, (8 - t % 8) % 8)).reshape(b, -1, 8)
    running = chunks.reshape(b, chunks.shape[1], -1).cumsum(-1)
    return torch.exp(running[..., -1:] - running)


CASES: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], list[tuple[int, ...]], list[tuple[int, ...]]]] = {
    "arange_float_bounds": (relative_positions, [(2, 5), (3, 7), (4, 2)], [(1, 1)]),
    "arange_symbolic_start": (integer_ranges, [(2, 5), (3, 7), (4, 2)], [(1, 1)]),
    "negative_symbolic_bounds": (last_positions, [(2, 6), (3, 8), (2, 5)], [(1, 3)]),
    "interpolate_up": (upsampled, [(2, 3, 4, 5), (3, 3, 7, 3)], [(1, 3, 1, 2)]),
    "interpolate_down": (halved, [(2, 3, 8, 6), (3, 3, 9, 5), (2, 3, 4, 7)], [(1, 3, 2, 3)]),
    "pow_of_size": (squared_size, [(3, 4), (5, 4), (2, 4)], [(1, 4)]),
    "slice_of_an_inferred_size": (chunk_decay, [(2, 9), (3, 21), (2, 14)], [(1, 3)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sizes_from_float_steps_and_powers(name: str, device: str) -> None:
    fn, shapes, specialized = CASES[name]
    compiled = torch.compile(fn, backend="luminal", dynamic=True)
    for shape in shapes:
        x = rand(*shape, device=device)
        assert_same(compiled(x), fn(x), tolerance_scale=4)
    assert luminal.compile_count() == 1
    for shape in specialized:
        x = rand(*shape, device=device)
        assert_same(compiled(x), fn(x), tolerance_scale=4)
