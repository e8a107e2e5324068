"""Embedding bags against eager: run-time offsets (bag size 1, uniform, variable, empty bags),
modes sum/mean/max, per_sample_weights, padding_idx, include_last_offset, int32/int64 indices."""

from __future__ import annotations

import zipfile

import pytest
import torch
import torch.nn.functional as F

import luminal
from helpers import assert_raises_when_run, assert_same, capturing_backend, check, rand, set_env


def bags(sizes: list[int], rows: int, dtype: torch.dtype = torch.int64, device: str = "cpu"):
    """Indices and offsets for bags of the given sizes."""
    offsets = torch.tensor([0] + list(torch.tensor(sizes).cumsum(0)[:-1].tolist()), dtype=dtype, device=device)
    idx = torch.randint(0, rows, (sum(sizes),), dtype=dtype, device=device)
    return idx, offsets


BAG_SIZES = {
    "size1": [1] * 7,
    "uniform3": [3] * 5,
    "variable": [2, 1, 4, 3, 1],
    "with_empty": [2, 0, 3, 0, 1],
}


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("layout", sorted(BAG_SIZES))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=str)
def test_embedding_bag_modes(mode: str, layout: str, dtype: torch.dtype, device: str) -> None:
    weight = rand(13, 6, device=device)
    idx, offsets = bags(BAG_SIZES[layout], 13, dtype=dtype, device=device)
    check(lambda i, o: F.embedding_bag(i, weight, o, mode=mode), idx, offsets)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_include_last_offset(mode: str, device: str) -> None:
    weight = rand(9, 4, device=device)
    idx, offsets = bags([2, 3, 1], 9, device=device)
    offsets = torch.cat([offsets, torch.tensor([idx.numel()], device=device)])
    check(lambda i, o: F.embedding_bag(i, weight, o, mode=mode, include_last_offset=True), idx, offsets)


def test_embedding_bag_per_sample_weights(device: str) -> None:
    weight = rand(11, 5, device=device)
    idx, offsets = bags([3, 1, 2, 2], 11, device=device)
    psw = rand(idx.numel(), device=device)
    check(lambda i, o, w: F.embedding_bag(i, weight, o, mode="sum", per_sample_weights=w), idx, offsets, psw)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_padding_idx(mode: str, device: str) -> None:
    weight = rand(8, 3, device=device)
    idx = torch.tensor([2, 0, 2, 5, 2, 1, 2], device=device)
    offsets = torch.tensor([0, 2, 3, 5], device=device)  # bag 1 is only padding
    check(lambda i, o: F.embedding_bag(i, weight, o, mode=mode, padding_idx=2), idx, offsets)


@pytest.mark.parametrize(
    "padding_idx,dynamic",
    # dynamic=True passes padding_idx as an integer input, which the compiled graph takes down to -2.
    [(2, False), (-1, False), (-6, False), (2, True), (-1, True)],
    ids=["2", "-1", "-6", "2-dynamic", "-1-dynamic"],
)
def test_embedding_bag_padding_idx_of_the_public_op(padding_idx: int, dynamic: bool, device: str) -> None:
    """aten.embedding_bag.padding_idx: a negative padding_idx counts from the end, also when the
    weight's rows are symbolic (dynamic)."""
    weight = rand(8, 3, device=device)
    idx = torch.tensor([2, 7, 2, 5, 7, 1, 2], device=device)
    offsets = torch.tensor([0, 2, 3, 5], device=device)
    fn = lambda i, o, w: F.embedding_bag(i, w, o, mode="mean", padding_idx=padding_idx)  # noqa: E731
    check(fn, idx, offsets, weight, dynamic=dynamic)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input(mode: str, device: str) -> None:
    weight = rand(10, 4, device=device)
    idx = torch.randint(0, 10, (6, 3), device=device)
    check(lambda i: F.embedding_bag(i, weight, mode=mode), idx)


def test_embedding_bag_module_half_precision(device: str) -> None:
    bag = torch.nn.EmbeddingBag(12, 4, mode="sum").to(device=device, dtype=torch.float16)
    with torch.no_grad():
        bag.weight.copy_(rand(12, 4, device=device))
    idx, offsets = bags([2, 2, 1], 12, device=device)
    check(lambda i, o: bag(i, o), idx, offsets)


def test_embedding_bag_index_out_of_range_raises(device: str) -> None:
    weight = rand(5, 2, device=device)
    compiled = torch.compile(lambda i, o: F.embedding_bag(i, weight, o), backend="luminal")
    offsets = torch.tensor([0, 1], device=device)
    valid = (torch.tensor([1, 4], device=device), offsets)
    # The message names the op and its input, not the node that happens to run the check.
    match = r"embedding_bag: index 7 is out of bounds: valid range \[0, 5\) \(indices, aten\._?embedding_bag"
    assert_raises_when_run(compiled, torch.tensor([1, 7], device=device), offsets, match=match, valid=valid)


# Offsets eager rejects (CPU: RuntimeError/IndexError; CUDA: a device-side assert or an illegal
# address, except offsets[0] != 0, which CUDA reads as 0), with the message luminal gives. Each
# case: indices, valid offsets (the successful first call), bad offsets, include_last_offset.
EIGHT = list(range(1, 9))
BAD_OFFSETS = {
    "first_not_zero": (EIGHT, list(range(8)), [1, 1, 2, 3, 4, 5, 6, 7], False, r"offsets\[0\] has to be 0.* got 1"),
    "first_negative": (EIGHT, [0, 3], [-1, 3], False, r"offsets\[0\] has to be 0.* got -1"),
    # Several bags fail here; on CUDA the first to report wins.
    "empty_indices": ([], [0] * 8, list(range(8)), False, "offsets (can not be greater|have to be non-decreasing)"),
    "last_past_end": (EIGHT, [0, 8], [0, 9], False, "length of indices 8 or negative, but got an offset of 9"),
    "middle_past_end": (EIGHT, [0, 4, 8], [0, 9, 8], False, "offset of 9"),
    "decreasing": (EIGHT, [0, 3, 5], [0, 5, 3], False, "non-decreasing, but an offset of 5 is followed by 3"),
    "negative_middle": (EIGHT, [0, 2, 3], [0, -2, 3], False, "offsets (can not be greater|have to be non-decreasing)"),
    "last_first_not_zero": (EIGHT, [0, 3, 8], [2, 3, 8], True, r"offsets\[0\] has to be 0.* got 2"),
    "last_past_end_ilo": (EIGHT, [0, 3, 8], [0, 3, 9], True, "length of indices 8 or negative, but got an offset of 9"),
    # CPU ends the last bag at offsets[-1], CUDA at the end of indices: luminal raises instead.
    "last_short_ilo": (EIGHT, [0, 3, 8], [0, 3, 5], True, r"include_last_offset, offsets\[-1\] has to be the length"),
    "decreasing_ilo": (EIGHT, [0, 3, 5, 8], [0, 5, 3, 8], True, "non-decreasing"),
}


def bad_offsets_call(case: str, device: str, dtype: torch.dtype = torch.int64):
    indices, valid, bad, include_last, match = BAD_OFFSETS[case]

    def tensor(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=device)

    return tensor(indices), tensor(valid), tensor(bad), include_last, match


@pytest.mark.parametrize("case", sorted(BAD_OFFSETS))
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_embedding_bag_invalid_offsets_raise(case: str, dynamic: bool, device: str) -> None:
    weight = rand(10, 4, device=device)
    indices, valid, bad, include_last, match = bad_offsets_call(case, device)
    compiled = torch.compile(
        lambda i, o: F.embedding_bag(i, weight, o, include_last_offset=include_last), backend="luminal", dynamic=dynamic
    )
    assert_same(compiled(indices, valid), F.embedding_bag(indices, weight, valid, include_last_offset=include_last))
    assert_raises_when_run(compiled, indices, bad, match=f"embedding_bag: .*{match}", valid=(indices, valid))


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "mean"},
        {"mode": "max"},
        {"mode": "sum", "padding_idx": 3},
        {"mode": "max", "padding_idx": 3},
        {"mode": "sum", "per_sample_weights": True},
    ],
    ids=["mean", "max", "sum-padding", "max-padding", "weighted"],
)
@pytest.mark.parametrize("case", ["first_not_zero", "empty_indices", "decreasing", "last_short_ilo"])
def test_embedding_bag_invalid_offsets_raise_in_every_mode(case: str, options: dict, device: str) -> None:
    weight = rand(10, 4, device=device)
    indices, valid, bad, include_last, match = bad_offsets_call(case, device, torch.int32)
    kwargs = {k: v for k, v in options.items() if k != "per_sample_weights"}
    psw = rand(indices.numel(), device=device) if options.get("per_sample_weights") else None

    def fn(i: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        return F.embedding_bag(i, weight, o, include_last_offset=include_last, per_sample_weights=psw, **kwargs)

    compiled = torch.compile(fn, backend="luminal")
    assert_same(compiled(indices, valid), fn(indices, valid))
    assert_raises_when_run(compiled, indices, bad, match=f"embedding_bag: .*{match}", valid=(indices, valid))


def test_embedding_bag_issue_repro(device: str) -> None:
    """The issue's module: an nn.EmbeddingBag(10, 4) called with bad offsets after a good call."""
    eb = torch.nn.EmbeddingBag(10, 4).to(device).eval()
    compiled = torch.compile(lambda i, o: eb(i, o), backend="luminal")
    i = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8], device=device)
    good = torch.arange(8, device=device)
    with torch.no_grad():
        assert_same(compiled(i, good), eb(i, good))
        bad = torch.tensor([1, 1, 2, 3, 4, 5, 6, 7], device=device)
        assert_raises_when_run(compiled, i, bad, match=r"offsets\[0\] has to be 0", valid=(i, good))


def test_embedding_bag_valid_edge_offsets_match_eager(device: str) -> None:
    """Offsets at the edges of what is valid: every bag empty, repeated offsets, all in the last bag."""
    weight = rand(10, 4, device=device)
    compiled = torch.compile(lambda i, o: F.embedding_bag(i, weight, o, mode="mean"), backend="luminal")
    cases = [
        (torch.randint(0, 10, (6,), device=device), torch.tensor([0, 0, 0, 6], device=device)),
        (torch.randint(0, 10, (6,), device=device), torch.tensor([0, 2, 2, 6], device=device)),
        (torch.randint(0, 10, (6,), device=device), torch.tensor([0, 6, 6, 6], device=device)),
    ]
    for i, o in cases:
        assert_same(compiled(i, o), F.embedding_bag(i, weight, o, mode="mean"))
    empty = torch.zeros(0, dtype=torch.int64, device=device)
    compiled_empty = torch.compile(lambda i, o: F.embedding_bag(i, weight, o), backend="luminal")
    zeros = torch.zeros(5, dtype=torch.int64, device=device)
    assert_same(compiled_empty(empty, zeros), F.embedding_bag(empty, weight, zeros))


def test_embedding_bag_invalid_offsets_raise_in_the_megakernel(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bag graph the row matcher takes (one thread per bag on CUDA; its IR on the CPU engine)."""
    if device == "cpu":
        set_env(monkeypatch, "LUMINAL_CPU_ROW_GRAPH", "1")
    weight = rand(10, 4, device=device)
    captured: list = []
    compiled = torch.compile(
        lambda i, o: torch.relu(F.embedding_bag(i, weight, o, mode="sum")), backend=capturing_backend(captured)
    )
    for case in ("first_not_zero", "decreasing", "middle_past_end"):
        torch._dynamo.reset()
        indices, valid, bad, _, match = bad_offsets_call(case, device)
        assert_same(compiled(indices, valid), torch.relu(F.embedding_bag(indices, weight, valid, mode="sum")))
        assert captured[-1].stats()["megakernel"], captured[-1].stats()["megakernel_reason"]
        assert_raises_when_run(compiled, indices, bad, match=f"embedding_bag: .*{match}", valid=(indices, valid))
    indices, valid, _, _, _ = bad_offsets_call("first_not_zero", device)
    assert_raises_when_run(
        compiled,
        torch.tensor([1, 2, 3, 4, 5, 6, 7, 10], device=device),
        valid,
        match=r"index 10 is out of bounds: valid range \[0, 10\) \(indices",
        valid=(indices, valid),
    )


class Bags(torch.nn.Module):
    def __init__(self, include_last_offset: bool) -> None:
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(10, 4, mode="sum", include_last_offset=include_last_offset)

    def forward(self, i: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        return self.bag(i, o)


@pytest.mark.parametrize("decomposed", [False, True], ids=["embedding_bag", "_embedding_bag"])
@pytest.mark.parametrize("case", ["first_not_zero", "decreasing", "last_past_end", "last_short_ilo"])
def test_embedding_bag_invalid_offsets_raise_through_load(
    case: str, decomposed: bool, device: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saved torch.export program, as saved (the public embedding_bag op) or decomposed."""
    set_env(monkeypatch, "LUMINAL_SYNC_CHECK", "1")  # CUDA: raise in the failing call
    indices, valid, bad, include_last, match = bad_offsets_call(case, device)
    model = Bags(include_last).to(device).eval()
    exported = torch.export.export(model, (indices, valid))
    path = tmp_path / "bags.pt2"
    torch.export.save(exported.run_decompositions() if decomposed else exported, path)
    if not any(name.endswith("/archive_format") for name in zipfile.ZipFile(path).namelist()):  # torch < 2.7
        with pytest.raises(luminal.LuminalError, match="torch < 2.7"):
            luminal.load(path)
        return
    program = luminal.load(path)
    with torch.no_grad():
        (out,) = program(indices, valid)
        assert_same(out, model(indices, valid))
        with pytest.raises(luminal.LuminalError, match=f"embedding_bag: .*{match}"):
            program(indices, bad)
