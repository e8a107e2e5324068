"""The DLRM megakernel: the row matcher accepts the DLRM family (and declines, naming the check,
what it cannot run), and the one-kernel forward matches eager for every variant. On CUDA a call
runs the megakernel or the general path, whichever measured faster at the first call (rules only,
LUMINAL_SEARCH=0: the megakernel).

On CPU the matcher's decision is checked through stats(), and the megakernel's IR graph runs on
the CPU engine (LUMINAL_CPU_ROW_GRAPH=1) against eager; on CUDA the generated kernel itself runs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch import nn

import luminal
from helpers import assert_same, capturing_backend, set_env


@dataclass(frozen=True)
class Variant:
    bottom: tuple[int, ...] = (8, 4)
    tables: tuple[int, ...] = (10, 20, 30)
    top: tuple[int, ...] = (8, 1)
    mode: str = "sum"
    bags: str = "one"  # one | uniform (3 per sample) | ragged (0..4 per sample, from offsets)
    weighted: bool = False  # per_sample_weights
    self_interaction: bool = False  # include the diagonal of the dot products
    final_sigmoid: bool = True


class DLRMVariant(nn.Module):
    def __init__(self, v: Variant) -> None:
        super().__init__()
        self.v = v
        dim = v.bottom[-1]
        widths = [13, *v.bottom]
        self.bottom = nn.Sequential(
            *[m for a, b in zip(widths, widths[1:], strict=False) for m in (nn.Linear(a, b), nn.ReLU())]
        )
        self.bags = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode=v.mode) for rows in v.tables)
        features = len(v.tables) + 1
        offset = 0 if v.self_interaction else 1
        pairs = [(i, j) for i in range(features) for j in range(i + 1 - offset)]
        self.register_buffer("li", torch.tensor([i for i, _ in pairs]), persistent=False)
        self.register_buffer("lj", torch.tensor([j for _, j in pairs]), persistent=False)
        widths = [len(pairs) + dim, *v.top]
        layers: list[nn.Module] = []
        for k, (a, b) in enumerate(zip(widths, widths[1:], strict=False)):
            layers.append(nn.Linear(a, b))
            if k < len(widths) - 2:
                layers.append(nn.ReLU())
        if v.final_sigmoid:
            layers.append(nn.Sigmoid())
        self.top = nn.Sequential(*layers)

    def forward(
        self, dense: torch.Tensor, indices: list[torch.Tensor], offsets: list[torch.Tensor], weights: list[torch.Tensor]
    ) -> torch.Tensor:
        x = self.bottom(dense)
        pooled = [
            bag(indices[k], offsets[k], per_sample_weights=weights[k] if self.v.weighted else None)
            for k, bag in enumerate(self.bags)
        ]
        batch, dim = x.shape
        features = torch.cat([x, *pooled], dim=1).view(batch, -1, dim)
        z = torch.bmm(features, features.transpose(1, 2))
        return self.top(torch.cat([x, z[:, self.li, self.lj]], dim=1))


def make_batch(v: Variant, batch: int, device: str, index_dtype: torch.dtype) -> tuple[Any, ...]:
    dense = torch.randn(batch, 13, device=device)
    indices, offsets, weights = [], [], []
    for rows in v.tables:
        if v.bags == "one":
            lengths = [1] * batch
        elif v.bags == "uniform":
            lengths = [3] * batch
        else:
            lengths = [random.randint(0, 4) for _ in range(batch)]
        starts = [0]
        for n in lengths[:-1]:
            starts.append(starts[-1] + n)
        total = sum(lengths)
        indices.append(torch.randint(0, rows, (total,), dtype=index_dtype, device=device))
        offsets.append(torch.tensor(starts, dtype=index_dtype, device=device))
        weights.append(torch.rand(total, device=device))
    return dense, indices, offsets, weights


def compile_and_capture(model: nn.Module, **options: Any) -> tuple[Any, list[Any]]:
    captured: list[Any] = []

    backend = capturing_backend(captured, **options)

    return torch.compile(model, backend=backend), captured


VARIANTS = {
    "mini": Variant(),
    "deep-bottom": Variant(bottom=(16, 8, 8, 4)),
    "mean-uniform": Variant(mode="mean", bags="uniform"),
    "ragged": Variant(bags="ragged"),
    "weighted-ragged": Variant(bags="ragged", weighted=True),
    "self-interaction": Variant(self_interaction=True),
    "logits": Variant(final_sigmoid=False, top=(16, 8, 1)),
    "sixteen-tables": Variant(tables=tuple(range(3, 35, 2))),
    "wide-embedding": Variant(bottom=(32, 16), top=(32, 16, 1), tables=(50, 7, 300, 2)),
}


@pytest.fixture
def row_graph_on_cpu(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    # On CPU, run the megakernel's own IR (the GPU runs the kernel generated from it). On CUDA, rules
    # only: the megakernel runs whether or not it measures faster than the general path.
    if device == "cpu":
        set_env(monkeypatch, "LUMINAL_CPU_ROW_GRAPH", "1")
    else:
        set_env(monkeypatch, "LUMINAL_SEARCH", "0")


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_dlrm_family_runs_as_one_megakernel(
    name: str, index_dtype: torch.dtype, device: str, row_graph_on_cpu: None
) -> None:
    variant = VARIANTS[name]
    random.seed(hash(name) % 1000)
    model = DLRMVariant(variant).to(device).eval()
    compiled, captured = compile_and_capture(model)
    with torch.no_grad():
        for batch in random.sample(range(2, 700), 3):
            inputs = make_batch(variant, batch, device, index_dtype)
            assert_same(compiled(*inputs), model(*inputs), tolerance_scale=2)
    stats = captured[-1].stats()
    assert stats["megakernel"], stats["megakernel_reason"]
    if device == "cuda":
        cuda = stats["cuda"]
        assert cuda["megakernel"] and cuda["kernels"] == 1 and cuda["library_calls"] == 0
        assert cuda["launches_per_call"] == 1
        assert cuda["graph_nodes"] == 2  # the kernel and the error-record export


def test_one_megakernel_serves_every_batch_size(device: str) -> None:
    variant = Variant(bags="uniform")
    model = DLRMVariant(variant).to(device).eval()
    compiled, captured = compile_and_capture(model)
    with torch.no_grad():
        for batch in (1, 5, 300, 41, 2048):
            inputs = make_batch(variant, batch, device, torch.int64)
            assert_same(compiled(*inputs), model(*inputs), tolerance_scale=2)
    # Batch 1 specializes; every later size shares one dynamic graph.
    assert luminal.compile_count() == 2
    assert all(c.stats()["megakernel"] for c in captured)


def test_out_of_range_index_raises(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, "LUMINAL_SYNC_CHECK", "1")  # CUDA: raise in the failing call
    variant = Variant()
    model = DLRMVariant(variant).to(device).eval()
    compiled, captured = compile_and_capture(model)
    with torch.no_grad():
        inputs = make_batch(variant, 64, device, torch.int64)
        compiled(*inputs)
        assert captured[-1].stats()["megakernel"]
        inputs[1][2][17] = variant.tables[2]  # one past the end of table 2
        with pytest.raises(luminal.LuminalError, match="out of bounds"):
            compiled(*inputs)


def test_megakernel_option_off_uses_the_general_path(device: str) -> None:
    variant = Variant()
    model = DLRMVariant(variant).to(device).eval()
    compiled, captured = compile_and_capture(model, megakernel=False)
    with torch.no_grad():
        inputs = make_batch(variant, 33, device, torch.int64)
        assert_same(compiled(*inputs), model(*inputs))
    stats = captured[-1].stats()
    assert not stats["megakernel"] and "disabled" in stats["megakernel_reason"]
    if device == "cuda":
        assert stats["cuda"]["kernels"] > 1


@pytest.mark.parametrize(
    "variant,check",
    [
        (Variant(bottom=(512, 16), top=(512, 1)), "512 elements per row"),
        (Variant(tables=(10, 20)), None),  # accepted: a control for the cases above
    ],
    ids=["wide-layers", "control"],
)
def test_matcher_names_the_failed_check(variant: Variant, check: str | None) -> None:
    model = DLRMVariant(variant).eval()
    compiled, captured = compile_and_capture(model)
    with torch.no_grad():
        inputs = make_batch(variant, 9, "cpu", torch.int64)
        assert_same(compiled(*inputs), model(*inputs))
    stats = captured[-1].stats()
    if check is None:
        assert stats["megakernel"], stats["megakernel_reason"]
    else:
        assert not stats["megakernel"]
        assert check in stats["megakernel_reason"]
        assert "%" in stats["megakernel_reason"]  # names the node


def test_non_row_local_graph_is_declined() -> None:
    # Row 0 of the result depends on every row of x (a reduction over the batch).
    compiled, captured = compile_and_capture(lambda x: torch.relu(x) - torch.relu(x).mean(0))
    x = torch.randn(6, 5)
    assert_same(compiled(x), torch.relu(x) - torch.relu(x).mean(0))
    stats = captured[-1].stats()
    assert not stats["megakernel"]
    assert "%1 mean" in stats["megakernel_reason"] and "batch dimension" in stats["megakernel_reason"]


def test_row_of_an_input_whose_other_dims_are_dynamic(device: str) -> None:
    """A pooler (Longformer's, BERT's): a linear layer and tanh on x[:, 0] of x[batch, tokens, 64].
    The row kernel reads x's rows tokens * 64 apart: its parameters carry the token count, which
    no computed node's shape mentions (before, NVRTC failed and the graph ran in eager)."""
    pooler = nn.Sequential(nn.Linear(64, 64), nn.Tanh()).to(device).eval()

    def fn(x: torch.Tensor) -> torch.Tensor:
        return pooler(x[:, 0])

    compiled, captured = compile_and_capture(fn)
    with torch.no_grad():
        for batch, tokens in ((2, 5), (3, 8), (4, 3)):  # the second call makes both sizes dynamic
            x = torch.randn(batch, tokens, 64, device=device)
            assert_same(compiled(x), fn(x))
    assert luminal.compile_count() == 2
    stats = captured[-1].stats()
    assert not stats["fallback"] and stats["megakernel"], stats.get("eager_reason", stats["megakernel_reason"])


def test_non_contiguous_inputs_take_the_general_path(device: str) -> None:
    variant = Variant()
    model = DLRMVariant(variant).to(device).eval()
    compiled, captured = compile_and_capture(model)
    with torch.no_grad():
        dense, indices, offsets, weights = make_batch(variant, 40, device, torch.int64)
        assert_same(compiled(dense, indices, offsets, weights), model(dense, indices, offsets, weights))
        strided = torch.randn(13, 40, device=device).t()  # same shape, transposed layout
        assert_same(compiled(strided, indices, offsets, weights), model(strided, indices, offsets, weights))
    stats = captured[-1].stats()
    assert stats["megakernel"]
    assert stats["megakernel_fallbacks"] == (1 if device == "cuda" else 0)


ROW_CHOICE = "megakernel or general path: "


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("batch", [1, 37, 2048])
def test_megakernel_or_general_path_is_measured(batch: int, monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", "")  # caching off: this process measures
    variant = Variant(bags="ragged")
    model = DLRMVariant(variant).cuda().eval()
    compiled, captured = compile_and_capture(model)
    with torch.no_grad():
        for _ in range(3):  # the first call measures; the next ones reuse the decision
            inputs = make_batch(variant, batch, "cuda", torch.int64)
            assert_same(compiled(*inputs), model(*inputs), tolerance_scale=2)
    stats = captured[-1].stats()
    assert stats["megakernel"], stats["megakernel_reason"]
    record = stats["cuda"]["choices"][0]
    assert record.startswith(ROW_CHOICE) and "timed" in record, record
    assert "megakernel " in record and "general path " in record and " us" in record, record
    winner = record.removeprefix(ROW_CHOICE).split(" (")[0]
    assert winner in ("megakernel", "general path"), record
    # The path the calls take is the measured winner's.
    assert stats["cuda"]["megakernel"] == (winner == "megakernel"), (record, stats["cuda"])
    assert stats["cuda"]["choice_cache_misses"] >= 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_rules_only_runs_the_megakernel_unmeasured(monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, "LUMINAL_SEARCH", "0")
    variant = Variant()
    model = DLRMVariant(variant).cuda().eval()
    compiled, captured = compile_and_capture(model)
    with torch.no_grad():
        inputs = make_batch(variant, 300, "cuda", torch.int64)
        assert_same(compiled(*inputs), model(*inputs), tolerance_scale=2)
    cuda = captured[-1].stats()["cuda"]
    assert cuda["choices"][0] == ROW_CHOICE + "megakernel (by rule: LUMINAL_SEARCH=0)"
    assert cuda["megakernel"] and cuda["kernels"] == 1
    assert cuda["choice_cache_hits"] == 0 and cuda["choice_cache_misses"] == 0
