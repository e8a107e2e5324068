"""Run-time assertions torch.export keeps in the graph (aten._assert_async): luminal checks them on
every call as eager does, and raises the assertion's message instead of returning values.

one_hot is the common case: export decomposes it into a comparison with an arange, beside two
asserts that the classes are in [0, num_classes). luminal used to drop the asserts and return rows
of zeros for classes out of range, where eager raises. Older torch (2.11, the GPU machine's)
exports one_hot without the asserts; those cases skip there. Eager's one_hot does not check the
classes of CUDA tensors (a check would synchronize): its scatter then fails with a device-side
assert, which ends the process's CUDA context, so no test runs eager on such classes on a GPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import luminal
from helpers import assert_raises_when_run, assert_same, check, rand


def _one_hot_scaled(classes: torch.Tensor) -> torch.Tensor:
    return F.one_hot(classes, 5) * 3


def _one_hot_export_asserts() -> bool:
    """Whether this torch's one_hot decomposition keeps the range asserts (newer ones do; on older
    ones export drops the check, and luminal computes what the decomposed graph says)."""

    class OneHot(torch.nn.Module):
        def forward(self, classes: torch.Tensor) -> torch.Tensor:
            return F.one_hot(classes, 5)

    program = torch.export.export(OneHot(), (torch.tensor([1, 2]),)).run_decompositions()
    return any(node.target is torch.ops.aten._assert_async.msg for node in program.graph.nodes)


@pytest.mark.parametrize("shape", [(1,), (7,), (2, 3)])
def test_one_hot_of_valid_classes_matches_eager(shape: tuple[int, ...], device: str) -> None:
    check(_one_hot_scaled, torch.randint(0, 5, shape, device=device))


@pytest.mark.parametrize(
    ("classes", "message"),
    [([1, 5, 0], "Class values must be smaller than num_classes"), ([2, -1, 4], "Class values must be non-negative")],
)
def test_one_hot_of_classes_out_of_range_raises(classes: list[int], message: str) -> None:
    if not _one_hot_export_asserts():
        pytest.skip(f"torch {torch.__version__} exports one_hot without its range asserts")
    compiled = torch.compile(_one_hot_scaled, backend="luminal")
    valid = torch.tensor([0, 4, 2])
    with pytest.raises(RuntimeError, match=message):
        _one_hot_scaled(torch.tensor(classes))  # eager raises the same
    assert_raises_when_run(compiled, torch.tensor(classes), match=message, valid=(valid,))


def _asserted(x: torch.Tensor) -> torch.Tensor:
    torch._assert_async((x.sum() > 0).to(torch.uint8), "the sum must be positive")
    return x.exp()


def test_a_user_assert_is_checked_on_every_call(device: str) -> None:
    positive = rand(4, 3, device=device, low=0.5, high=2.0)
    check(_asserted, positive)
    compiled = torch.compile(_asserted, backend="luminal")
    assert_raises_when_run(compiled, -positive, match="the sum must be positive", valid=(positive,))


def test_an_assert_takes_nan_as_true(device: str) -> None:
    """Eager passes any nonzero value, NaN included. (torch.export drops an _assert_async without a
    message, so only the one with a message reaches luminal.)"""

    def fn(x: torch.Tensor) -> torch.Tensor:
        torch._assert_async(x.amax(), "the largest value is zero")
        return x * 2

    x = rand(3, device=device)
    x[1] = float("nan")
    check(fn, x)
    compiled = torch.compile(fn, backend="luminal")
    assert_raises_when_run(compiled, torch.zeros(3, device=device), match="the largest value is zero", valid=(x,))


def test_luminal_compile_returns_only_the_callers_outputs(device: str) -> None:
    class Counts(torch.nn.Module):
        def forward(self, classes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            torch._assert_async((classes >= 0).all(), "a class is negative")
            encoded = (classes.unsqueeze(-1) == torch.arange(4, device=classes.device)).long()
            return encoded.sum(0), encoded.argmax(-1)

    model = Counts()
    classes = torch.tensor([3, 0, 1, 3], device=device)
    compiled = luminal.compile(model, (classes,))
    again = torch.tensor([2, 2, 0, 1], device=device)
    assert_same(compiled(again), model(again))
    with pytest.raises(luminal.LuminalError, match="a class is negative"):
        compiled(torch.tensor([2, -1, 0, 0], device=device))
        if device == "cuda":  # recorded on the GPU, raised by the next call
            torch.cuda.synchronize()
            compiled(again)
