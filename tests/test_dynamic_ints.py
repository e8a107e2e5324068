"""Dynamic integer arguments that are no tensor's size (a cache's step counter, an offset): Dynamo passes
them as SymInts after a second value; luminal carries each as the size of an empty tensor and binds it
as a shape symbol, so one compile serves every value."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import luminal
from helpers import assert_same, capturing_backend, opaque, rand
from luminal.policy import LuminalFallbackWarning


def shifted(x: torch.Tensor, n: int) -> torch.Tensor:
    positions = torch.arange(x.shape[-1], device=x.device) + n  # a symbolic scalar operand
    return x * n + positions.to(x.dtype) - (n // 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_integer_argument_stays_symbolic(dtype: torch.dtype, device: str) -> None:
    captured: list[Any] = []
    compiled = torch.compile(shifted, backend=capturing_backend(captured))
    x = rand(3, 5, dtype=dtype, device=device)
    for n in (3, 5, 0, 1, 12, 7):  # 0 and 1 after the integer became dynamic: carried, not specialized
        assert_same(compiled(x, n), shifted(x, n))
    # The first value compiles specialized; the second makes the integer dynamic; no more compiles.
    assert luminal.compile_count() == 2
    assert all(not c.stats().get("fallback", False) for c in captured)


def test_integer_argument_outside_the_carried_range_runs_in_eager(device: str) -> None:
    compiled = torch.compile(shifted, backend="luminal")
    x = rand(2, 4, device=device)
    for n in (3, 5):
        assert_same(compiled(x, n), shifted(x, n))
    with pytest.warns(LuminalFallbackWarning, match="runs in eager"):
        assert_same(compiled(x, -9), shifted(x, -9))  # luminal cannot carry it: this call runs in eager
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(compiled(x, 4), shifted(x, 4))  # later calls are luminal's again, silently


def test_integer_argument_feeds_a_scalar_tensor(device: str) -> None:
    def fn(x: torch.Tensor, n: int) -> torch.Tensor:
        return x + torch.scalar_tensor(n, device=x.device) * 2

    compiled = torch.compile(fn, backend="luminal")
    x = rand(4, device=device)
    for n in (2, 9, 4):
        assert_same(compiled(x, n), fn(x, n))


def test_integer_argument_in_a_partitioned_graph(device: str) -> None:
    """A graph with an op luminal does not know: the carried integer reaches the luminal partitions."""

    def fn(x: torch.Tensor, n: int) -> torch.Tensor:
        return opaque(shifted(x, n)) + n

    compiled = torch.compile(fn, backend="luminal")
    x = rand(3, 4, device=device)
    with pytest.warns(LuminalFallbackWarning, match="opaque"):
        for n in (2, 6, 3):
            assert_same(compiled(x, n), fn(x, n))


def test_graph_built_from_integers_alone_returns_on_its_device(device: str) -> None:
    """After a graph break whose only operands are sizes (DeBERTa's relative positions), the graph's
    inputs are the integers' size carriers, which live on the host: its outputs still belong on the
    device the model runs on, as in eager."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape
        torch._dynamo.graph_break()
        ids = torch.arange(rows, device=x.device)
        return (ids[:, None] - torch.arange(cols, device=x.device)[None, :]).clamp(-2, 2) * 3

    captured: list[Any] = []
    compiled = torch.compile(fn, backend=capturing_backend(captured))
    for shape in ((3, 4), (5, 2), (7, 9), (1, 1)):  # the second shape makes both sizes dynamic
        x = rand(*shape, device=device)
        actual, expected = compiled(x), fn(x)
        assert actual.device == expected.device
        assert_same(actual, expected)
    assert captured and all(not c.stats().get("fallback", False) for c in captured)


@pytest.mark.skipif(not hasattr(torch, "sym_sum"), reason="torch.sym_sum is newer than this torch")
def test_a_sum_of_sizes_by_sym_sum_stays_compiled(device: str) -> None:
    """torch.sym_sum (transformers' caches sum their lengths with it) is no op torch.export's
    serializer knows: a graph holding one ran in eager whole. luminal writes it as additions."""

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        total = torch.sym_sum([x.shape[0], y.shape[0], 1])
        return torch.cat([x, y]).sum(0) * total + torch.arange(total, device=x.device).sum()

    compiled = torch.compile(fn, backend="luminal", dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows, more in [(3, 4), (5, 2), (6, 7)]:
            x, y = rand(rows, 6, device=device), rand(more, 6, device=device)
            assert_same(compiled(x, y), fn(x, y))
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, LuminalFallbackWarning)]
    assert not fallbacks, fallbacks
    assert luminal.compile_count() == 1
