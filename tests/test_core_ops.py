"""Core-ATen inference ops translated natively: sort/topk, batch norm with batch or running statistics,
masked_scatter, col2im, bilinear upsampling, cdist/pdist, grid_sampler_2d and as_strided, against
eager (odd sizes, size-1 dims, non-contiguous inputs, every dtype each translator claims), plus the
forms that are refused and run in eager through the fallback."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import luminal
from helpers import check, compile_luminal, non_contiguous, rand

FLOATS = [torch.float32, torch.float64, torch.bfloat16]
SORT_DTYPES = [*FLOATS, torch.float16, torch.int64, torch.int32, torch.int16, torch.uint8, torch.bool]


@pytest.fixture(autouse=True)
def no_fallback():
    """A node that ran in eager would prove nothing: the fallback warning is an error here (pytest's
    ini filter cannot name the class, which lives in the extension module)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", luminal.LuminalFallbackWarning)
        yield


def exported_targets(fn, *args) -> set[str]:
    class Wrapped(torch.nn.Module):
        def forward(self, *a):
            return fn(*a)

    program = torch.export.export(Wrapped(), args).run_decompositions(luminal.decompositions.decomposition_table())
    return {str(n.target) for n in program.graph.nodes if n.op == "call_function"}


def expect_fallback(fn, *args, match: str, compare: bool = True) -> None:
    """The node is refused with a clear message and runs in eager: results still equal eager."""
    with pytest.warns(luminal.LuminalFallbackWarning, match=match):
        actual = compile_luminal(fn)(*args)
    if compare:
        torch.testing.assert_close(actual, fn(*args))


# ---- sort / topk ---------------------------------------------------------------------------


def test_targets_stay_whole() -> None:
    x = rand(3, 5)
    assert "aten.sort.default" in exported_targets(lambda t: torch.sort(t), x)
    assert "aten.sort.stable" in exported_targets(lambda t: torch.sort(t, stable=True), x)
    assert "aten.topk.default" in exported_targets(lambda t: torch.topk(t, 2), x)
    assert "aten.col2im.default" in exported_targets(lambda t: F.fold(t, (3, 4), 2), rand(1, 8, 6))
    assert "aten.upsample_bilinear2d.vec" in exported_targets(
        lambda t: F.interpolate(t, size=(5, 7), mode="bilinear"), rand(1, 2, 3, 4)
    )
    assert "aten._native_batch_norm_legit.no_stats" in exported_targets(lambda t: F.instance_norm(t), rand(2, 3, 4))


@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable(dtype: torch.dtype, descending: bool, device: str) -> None:
    # Few distinct values: many ties, whose order the stable sort fixes (index order).
    x = rand(4, 7, 1, dtype=dtype, device=device, low=-3, high=3)
    if dtype.is_floating_point:
        x = x.round()
    for dim in (1, -1, 0):
        check(lambda t, d=dim: torch.sort(t, dim=d, descending=descending, stable=True), x, dynamic=False)
    check(lambda t: torch.sort(t, dim=0, descending=descending, stable=True), non_contiguous(rand(5, 3, dtype=dtype)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64], ids=str)
def test_sort_default_and_argsort(dtype: torch.dtype, device: str) -> None:
    # Distinct values: the unstable overload's order is then unique.
    x = torch.randperm(33, device=device).reshape(3, 11).to(dtype) - 10
    check(lambda t: torch.sort(t, 1), x)
    check(lambda t: torch.sort(t, 0, descending=True), x)
    check(lambda t: torch.argsort(t, dim=-1, descending=True), non_contiguous(x))
    check(lambda t: torch.sort(t), x[0, 0])  # 0-d


def test_sort_nan(device: str) -> None:
    nan = float("nan")
    x = torch.tensor([[3.0, nan, -1.0, nan, 2.0, -float("inf"), float("inf")], [nan, 0.0, -0.0, 1.0, nan, 1.0, 0.0]])
    x = x.to(device)
    for descending in (False, True):
        check(lambda t, d=descending: torch.sort(t, descending=d, stable=True), x, dynamic=False)
        # topk leaves the order of equal values open: one NaN per row.
        distinct = torch.tensor([[3.0, nan, -1.0, 2.0], [-float("inf"), 0.5, nan, 1.0]], device=device)
        check(lambda t, d=descending: torch.topk(t, 3, largest=d), distinct, dynamic=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32], ids=str)
def test_topk(dtype: torch.dtype, device: str) -> None:
    x = (torch.randperm(5 * 9 * 2, device=device).reshape(5, 9, 2) - 40).to(dtype)  # distinct values
    check(lambda t: torch.topk(t, 3, dim=1), x)
    check(lambda t: torch.topk(t, 1, dim=0, largest=False), x)
    check(lambda t: torch.topk(t, 2), non_contiguous(x))
    check(lambda t: torch.topk(t, 9, dim=1, largest=False), x)


def test_topk_of_nothing_is_empty(device: str) -> None:
    """k = 0 gives empty values and indices (it ran in eager)."""
    check(lambda t: torch.topk(t, 0, dim=1), rand(3, 4, device=device), dynamic=False)
    check(lambda t: torch.topk(t, 0, dim=0, largest=False)[1] + 1, rand(3, 4, device=device), dynamic=False)


def test_topk_unsorted_same_elements(device: str) -> None:
    x = rand(4, 10, device=device)
    values, indices = compile_luminal(lambda t: torch.topk(t, 4, sorted=False))(x)
    expected_values, expected_indices = torch.topk(x, 4, sorted=False)
    torch.testing.assert_close(values.sort(-1).values, expected_values.sort(-1).values)
    assert torch.equal(indices.sort(-1).values, expected_indices.sort(-1).values)


# ---- batch norm ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_batch_statistics(dtype: torch.dtype, affine: bool, device: str) -> None:
    bn = torch.nn.BatchNorm2d(3, affine=affine, track_running_stats=False).to(device, dtype).eval()
    if affine:
        with torch.no_grad():
            bn.weight.copy_(rand(3, dtype=dtype))
            bn.bias.copy_(rand(3, dtype=dtype))
    with torch.no_grad():
        check(bn, rand(2, 3, 5, 3, dtype=dtype, device=device), tolerance_scale=4)
        check(bn, non_contiguous(rand(1, 3, 1, 7, dtype=dtype, device=device)), tolerance_scale=4)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_batch_norm_legit_no_stats_outputs(dtype: torch.dtype, device: str) -> None:
    w, b = rand(4, dtype=dtype, device=device), rand(4, dtype=dtype, device=device)

    def fn(t, w, b):
        return torch.ops.aten._native_batch_norm_legit.no_stats(t, w, b, True, 0.1, 1e-5)

    check(fn, rand(3, 4, dtype=dtype, device=device), w, b, tolerance_scale=4)
    check(fn, rand(2, 4, 3, 5, dtype=dtype, device=device), w, b, tolerance_scale=4)
    check(lambda t: F.instance_norm(t), rand(2, 3, 7, dtype=dtype, device=device), tolerance_scale=4)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_batch_norm_legit_running_stats(dtype: torch.dtype, device: str) -> None:
    # _native_batch_norm_legit mutates the running stats: the exported graph has its functional form.
    params = torch.float64 if dtype == torch.float64 else torch.float32  # eager: bf16 input, f32 params
    mean, var = rand(3, dtype=params, device=device), rand(3, dtype=params, device=device, low=0.5, high=2)
    w, b = rand(3, dtype=params, device=device), rand(3, dtype=params, device=device)

    def fn(t, w, b, m, v):
        return torch.ops.aten._native_batch_norm_legit.default(t, w, b, m, v, False, 0.1, 1e-5)

    x = rand(2, 3, 5, dtype=dtype, device=device)
    assert "aten._native_batch_norm_legit_functional.default" in exported_targets(fn, x, w, b, mean, var)
    if device == "cuda":
        # CUDA's kernel returns per-channel save_mean/save_rstd (CPU's: empty); luminal refuses that
        # form and the node runs in eager.
        expect_fallback(fn, x, w, b, mean, var, match="batch_norm")
        return
    if dtype == torch.bfloat16:
        # torch's meta function says bf16 for the empty save_mean/save_rstd, eager says f32.
        check(lambda *a: fn(*a)[0], x, w, b, mean, var, tolerance_scale=4)
        return
    check(fn, x, w, b, mean, var, tolerance_scale=4)
    check(fn, non_contiguous(rand(1, 3, 4, 1, dtype=dtype, device=device)), None, b, mean, var, tolerance_scale=4)


def test_batch_norm_legit_training_refused() -> None:
    def fn(t, m, v):
        return torch.ops.aten._native_batch_norm_legit.default(t, None, None, m, v, True, 0.1, 1e-5)[0]

    expect_fallback(fn, rand(2, 3, 4), torch.zeros(3), torch.ones(3), match="batch_norm")


# ---- masked_scatter ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [*FLOATS, torch.int64, torch.int32, torch.uint8, torch.bool], ids=str)
def test_masked_scatter(dtype: torch.dtype, device: str) -> None:
    def fn(t, m, s):
        return t.masked_scatter(m, s)

    x = rand(4, 5, dtype=dtype, device=device)
    mask = rand(4, 5, dtype=torch.bool, device=device)
    check(fn, x, mask, rand(23, dtype=dtype, device=device))  # more source than needed
    check(fn, x, mask, rand(4, 5, dtype=dtype, device=device))
    check(fn, non_contiguous(x), non_contiguous(mask), non_contiguous(rand(5, 4, dtype=dtype, device=device)))
    # Mask broadcast over rows, and a self that broadcasts to the mask.
    check(fn, x, rand(1, 5, dtype=torch.bool, device=device), rand(3, 7, dtype=dtype, device=device))
    check(fn, rand(5, dtype=dtype, device=device), mask, rand(20, dtype=dtype, device=device))


def test_masked_scatter_source_too_small() -> None:
    mask = torch.ones(3, 4, dtype=torch.bool)
    # A first call that succeeds (a graph whose first call fails runs in eager), then the same
    # dynamic graph with too small a source: luminal's check raises.
    compiled = compile_luminal(lambda t, m, s: t.masked_scatter(m, s), dynamic=True)
    compiled(rand(3, 4), mask, rand(12))
    with pytest.raises(luminal.LuminalError, match=r"index|source|elements"):
        compiled(rand(3, 4), mask, rand(5))


# ---- col2im --------------------------------------------------------------------------------

FOLDS = [
    dict(output_size=(4, 5), kernel_size=2),
    dict(output_size=(7, 6), kernel_size=(3, 2), stride=2, padding=1),
    dict(output_size=(9, 5), kernel_size=(2, 3), dilation=(2, 1), stride=(1, 2), padding=(0, 1)),
    dict(output_size=(1, 5), kernel_size=(1, 3)),
]


@pytest.mark.parametrize("params", FOLDS, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_fold(params, dtype: torch.dtype, device: str) -> None:
    x = rand(2, 3, params["output_size"][0], params["output_size"][1], dtype=dtype, device=device)
    cols = F.unfold(x, **{k: v for k, v in params.items() if k != "output_size"})
    check(lambda t: F.fold(t, **params), cols, tolerance_scale=4)
    check(lambda t: F.fold(t, **params), non_contiguous(cols[0]), tolerance_scale=4)  # unbatched


# ---- upsample_bilinear2d -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [dict(size=(7, 9)), dict(size=(2, 3)), dict(scale_factor=2), dict(scale_factor=(1.7, 0.6)), dict(size=(1, 1))],
    ids=str,
)
@pytest.mark.parametrize("align_corners", [False, True])
def test_upsample_bilinear(kwargs, align_corners: bool, device: str) -> None:
    def fn(t):
        return F.interpolate(t, mode="bilinear", align_corners=align_corners, **kwargs)

    # Static shapes: sizes computed from float scale factors have no symbolic form in luminal.
    check(fn, rand(2, 3, 5, 4, device=device), tolerance_scale=4, dynamic=False)
    check(fn, non_contiguous(rand(1, 2, 1, 6, device=device)), tolerance_scale=4, dynamic=False)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=str)
def test_upsample_bilinear_dtypes(dtype: torch.dtype, device: str) -> None:
    x = rand(1, 2, 4, 5, dtype=dtype, device=device)
    check(lambda t: F.interpolate(t, scale_factor=1.5, mode="bilinear"), x, tolerance_scale=4, dynamic=False)
    check(lambda t: F.interpolate(t, size=(3, 8), mode="bilinear", align_corners=True), x, tolerance_scale=4)


# ---- cdist / pdist -------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, float("inf")], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_cdist(p: float, dtype: torch.dtype, device: str) -> None:
    def fn(a, b):
        return torch.cdist(a, b, p=p)

    a = rand(2, 5, 3, dtype=dtype, device=device)
    b = rand(2, 7, 3, dtype=dtype, device=device)
    if p == 0.0:
        a, b = a.round(), b.round()  # some equal coordinates
    check(fn, a, b, tolerance_scale=8)
    check(fn, non_contiguous(a[0]), b[1], tolerance_scale=8)
    check(
        fn,
        rand(3, 1, 4, 1, 2, dtype=dtype, device=device),
        rand(4, 6, 2, dtype=dtype, device=device),
        tolerance_scale=8,
    )


def test_cdist_large_euclidean(device: str) -> None:
    # More than 25 rows: torch computes p = 2 through a matrix product (different rounding).
    a, b = rand(30, 8, device=device), rand(40, 8, device=device)
    check(lambda x, y: torch.cdist(x, y), a, b, tolerance_scale=100)
    check(lambda x, y: torch.cdist(x, y, compute_mode="use_mm_for_euclid_dist"), a, b, tolerance_scale=100)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 1.5, float("inf")], ids=str)
def test_pdist(n: int, p: float, device: str) -> None:
    x = rand(n, 3, device=device)
    if p == 0.0:
        x = x.round()
    check(lambda t: F.pdist(t, p=p), x, tolerance_scale=8)
    check(lambda t: F.pdist(t, p=p), non_contiguous(rand(3, n, device=device)).T.contiguous(), tolerance_scale=8)


def test_pdist_float64(device: str) -> None:
    check(lambda t: F.pdist(t), rand(7, 4, dtype=torch.float64, device=device))


# ---- grid_sampler_2d -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(mode: str, padding_mode: str, align_corners: bool, device: str) -> None:
    def fn(x, g):
        return F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)

    x = rand(2, 3, 5, 4, device=device)
    grid = rand(2, 3, 7, 2, device=device, low=-1.3, high=1.3)  # some samples outside
    check(fn, x, grid, tolerance_scale=4)
    if padding_mode == "reflection":  # mirrored several times over, both ways
        check(fn, x, rand(2, 4, 9, 2, device=device, low=-4.5, high=4.5), tolerance_scale=4)
    check(fn, non_contiguous(x), non_contiguous(grid), tolerance_scale=4)
    check(fn, rand(1, 1, 1, 3, device=device), rand(1, 2, 1, 2, device=device), tolerance_scale=4)


def test_grid_sample_nearest_ties(device: str) -> None:
    # Source coordinates exactly halfway between pixels round to even.
    x = torch.arange(12.0, device=device).reshape(1, 1, 3, 4)
    xs = torch.tensor([-1.0, -0.75, -0.25, 0.25, 0.75, 1.0], device=device)
    grid = torch.stack(torch.meshgrid(xs, xs, indexing="xy"), dim=-1)[None]
    for align_corners in (False, True):
        check(
            lambda t, g, a=align_corners: F.grid_sample(t, g, mode="nearest", align_corners=a), x, grid, dynamic=False
        )


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=str)
def test_grid_sample_dtypes(dtype: torch.dtype, device: str) -> None:
    # Grid values on a 1/8 lattice and sizes 5 and 9: source coordinates exact in every dtype (torch's
    # CPU kernel rounds them to bf16, luminal computes them in f32).
    x = rand(1, 2, 5, 9, dtype=dtype, device=device)
    grid = (rand(1, 5, 3, 2, device=device, low=-9, high=9).round() / 8).to(dtype)
    for mode in ("bilinear", "nearest"):
        check(
            lambda t, g, m=mode: F.grid_sample(t, g, mode=m, align_corners=True),
            x,
            grid,
            tolerance_scale=4,
            dynamic=False,
        )


@pytest.mark.parametrize("kwargs", [dict(mode="bicubic"), dict(mode="bicubic", padding_mode="reflection")], ids=str)
def test_grid_sample_refused(kwargs) -> None:
    x, grid = rand(1, 2, 4, 4), rand(1, 3, 3, 2, low=-1, high=1)
    expect_fallback(lambda t, g: F.grid_sample(t, g, align_corners=False, **kwargs), x, grid, match="grid_sampler_2d")


# ---- as_strided ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32], ids=str)
def test_as_strided_of_fresh_tensor(dtype: torch.dtype, device: str) -> None:
    x = rand(3, 5, dtype=dtype, device=device)
    check(lambda t: (t * 2).as_strided((2, 3), (1, 2), 1), x)
    check(lambda t: (t + 1).as_strided((4, 2, 2), (3, 0, 5)), x)  # overlapping and broadcast reads
    check(lambda t: torch.sort(t, 0)[0].as_strided((3,), (4,), 2), x)
    # Eager's add of a transposed layout keeps that layout: storage order is column-major.
    check(lambda t: (t + 1).as_strided((2, 5), (1, 3), 1), non_contiguous(x))
    check(lambda t: (t + 1).as_strided((3, 2), (2, 1)), rand(4, 1, 3, dtype=dtype, device=device).transpose(0, 2))


def test_as_strided_with_dynamic_sizes(device: str) -> None:
    """Symbolic sizes and strides (a dynamic batch): adaptive average pooling to 1x1 of a
    channels-last input restrides its mean with as_strided (torchvision's Swin); a permuted fresh
    tensor read through as_strided."""

    def pooled(t: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(t.permute(0, 3, 1, 2), 1).flatten(1) * 2

    def restrided(t: torch.Tensor) -> torch.Tensor:
        fresh = t.transpose(0, 1) * 2  # eager keeps the transposed layout: strides (1, n)
        return fresh.as_strided((3, t.shape[1]), (t.shape[1], 1))

    for fn, shapes in [(pooled, [(2, 3, 4, 5), (3, 2, 5, 5), (4, 3, 4, 5)]), (restrided, [(3, 4), (3, 5), (3, 7)])]:
        compiled = compile_luminal(fn, dynamic=True)
        for shape in shapes:
            x = rand(*shape, device=device)
            torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-5)


def test_as_strided_of_a_view(device: str) -> None:
    """Longformer's chunking: overlapping windows of a reshaped fresh tensor (a view spanning the
    whole storage) read with as_strided; a transposed view too."""

    def chunks(t: torch.Tensor) -> torch.Tensor:
        h = (t * 2).view(2, 2, 8, 3)
        stride = list(h.stride())
        stride[1] //= 2
        return h.as_strided([2, 3, 8, 3], stride) + 1

    check(chunks, rand(2, 16, 3, device=device))
    check(lambda t: (t + 1).t().as_strided((3, 4), (1, 3)), rand(4, 3, device=device))


def test_as_strided_refused() -> None:
    x = rand(4, 6)
    expect_fallback(lambda t: t.as_strided((2, 2), (1, 2), 1), x, match="as_strided")
    # Refused; the views feeding it run in eager with it, so eager's storage is read.
    expect_fallback(lambda t: t[1:].as_strided((2, 2), (1, 2), 1), x, match="as_strided")
    expect_fallback(lambda t: t.transpose(0, 1).as_strided((2, 2), (1, 2), 1), x, match="as_strided")
    # A view of part of a fresh tensor: eager's as_strided may read the rest of the storage.
    expect_fallback(lambda t: (t * 2)[:2].as_strided((2, 2), (1, 2)), x, match="part of")


def test_as_strided_of_view_fallback_result() -> None:
    # The views feeding an eager as_strided run in eager too, so that it reads eager's storage.
    expect_fallback(lambda t: t[1:].as_strided((2, 2), (1, 2), 1), rand(4, 6), match="as_strided")
