"""Comparison helpers: luminal vs eager, with tolerances stated per dtype."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import luminal

# (rtol, atol) per floating dtype. Integer and bool results must match exactly.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}

FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INT_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]

# torch < 2.7's torch.export.save writes the legacy .pt2 layout, which luminal.load and _C.compile
# refuse by design (torch.compile(backend="luminal") writes the new layout itself on any torch).
needs_new_pt2_save = pytest.mark.skipif(
    tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7),
    reason="this torch's torch.export.save writes the legacy .pt2 layout",
)


def assert_same(actual: Any, expected: Any, tolerance_scale: float = 1.0) -> None:
    """Structure, dtypes and shapes equal; integers and bools bit-exact; floats within tolerance."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"expected a sequence, got {type(actual).__name__}"
        assert len(actual) == len(expected), f"{len(actual)} outputs vs {len(expected)}"
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e, tolerance_scale)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected, f"{actual!r} != {expected!r}"
        return
    assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual).__name__}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.device == expected.device, f"device {actual.device} != {expected.device}"
    if expected.dtype == torch.bool:
        # Compare bytes: a poisoned (unwritten) bool reads as true but is not byte 1.
        assert torch.equal(actual.contiguous().view(torch.uint8), expected.contiguous().view(torch.uint8))
    elif expected.dtype.is_floating_point:
        rtol, atol = TOLERANCES[expected.dtype]
        torch.testing.assert_close(
            actual, expected, rtol=rtol * tolerance_scale, atol=atol * tolerance_scale, equal_nan=True
        )
    else:
        assert torch.equal(actual, expected), f"integer results differ:\n{actual}\n{expected}"


def clone_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def compile_luminal(fn: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
    return torch.compile(fn, backend="luminal", **kwargs)


def capturing_backend(captured: list[Any], **options: Any) -> Callable[..., Any]:
    """A luminal backend that also appends each compiled function to `captured` (for its ir/stats)."""

    def backend(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> Any:
        compiled = luminal.luminal_backend(gm, inputs, **options)
        captured.append(compiled)
        return compiled

    return backend


class FunctionModule(torch.nn.Module):
    """A module whose forward calls `fn` (torch.export takes modules)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def check(fn: Callable[..., Any], *args: Any, tolerance_scale: float = 1.0, dynamic: bool | None = None) -> Any:
    """Runs fn eagerly and through luminal on copies of the same inputs and compares."""
    expected = fn(*clone_args(args))
    actual = compile_luminal(fn, dynamic=dynamic)(*clone_args(args))
    assert luminal.compile_count() >= 1, "luminal was not used"
    assert_same(actual, expected, tolerance_scale)
    return actual


# A user's custom op (x.flip(-1) * 0.5): luminal can never know it, so a graph that calls it
# always runs partly in eager.
@torch.library.custom_op("luminal_test::opaque", mutates_args=())
def opaque(x: torch.Tensor) -> torch.Tensor:
    return x.flip(-1) * 0.5


@opaque.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def rand(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cpu", low: float = -3.0, high: float = 3.0):
    """Fresh random values of any dtype (never all zeros or ones)."""
    if dtype == torch.bool:
        return torch.rand(*shape, device=device) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(*shape, device=device, dtype=torch.float64) * (high - low) + low).to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = max(int(low), info.min), min(int(high), info.max)
    return torch.randint(lo, hi + 1, shape, dtype=dtype, device=device)


def non_contiguous(t: torch.Tensor) -> torch.Tensor:
    """The same values in a non-contiguous layout (a transposed copy viewed back)."""
    if t.dim() < 2:
        doubled = torch.stack([t, torch.zeros_like(t)], dim=-1)
        return doubled[..., 0]
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def assert_raises_when_run(fn: Callable[..., Any], *args: Any, match: str, valid: tuple[Any, ...]) -> None:
    """The call must fail with a LuminalError matching `match`. `valid` are the arguments of a call
    made first, which must succeed: a graph whose first call fails runs in eager from then on (the
    failure policy), so luminal's own run-time checks are what later calls meet. CPU runs raise in
    the failing call; CUDA runs record the error on the GPU and the next call raises it once the
    failing one has finished."""
    fn(*valid)
    with pytest.raises(luminal.LuminalError, match=match):
        fn(*args)
        if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
            torch.cuda.synchronize()
            fn(*args)


def set_env(patch: pytest.MonkeyPatch, name: str, value: str) -> None:
    """Sets an environment variable for this test and has luminal read the environment again: it
    reads it once (luminal.settings, csrc/common/config.h). conftest reloads after every test,
    once the monkeypatch is undone."""
    patch.setenv(name, value)
    luminal.settings.reload()


def unset_env(patch: pytest.MonkeyPatch, name: str) -> None:
    patch.delenv(name, raising=False)
    luminal.settings.reload()


# A user's custom op: luminal can never know it, so these tests stay meaningful as coverage grows.
@torch.library.custom_op("luminal_test::wiggle", mutates_args=())
def wiggle(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * 0.5 + x.flip(-1)


@wiggle.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Mixed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(7, 6)
        self.second = torch.nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.first(x))
        return self.second(torch.tanh(wiggle(hidden)) + hidden)


def apply_rotary(x: torch.Tensor, cis: torch.Tensor) -> torch.Tensor:
    """Meta's apply_rotary_emb with a precomputed freqs_cis: x [batch, seq, heads, dim], cis [seq, dim/2]."""
    real = torch.float64 if cis.dtype == torch.complex128 else torch.float32
    pairs = torch.view_as_complex(x.to(real).reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * cis.view(1, x.shape[1], 1, pairs.shape[-1])).flatten(3).type_as(x)


class RotaryLinear(torch.nn.Module):
    """Meta's Llama layout: freqs_cis precomputed once and kept on the module, then sliced per call."""

    def __init__(self, dim: int, heads: int, max_seq: int) -> None:
        super().__init__()
        self.heads = heads
        self.proj = torch.nn.Linear(dim, dim)
        freqs = 1.0 / (10000.0 ** (torch.arange(0, dim // heads, 2).float() / (dim // heads)))
        angles = torch.outer(torch.arange(max_seq).float(), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q = self.proj(x).view(batch, seq, self.heads, dim // self.heads)
        return apply_rotary(q, self.freqs_cis[:seq]).flatten(2)
