"""Matrix products against eager: mm, bmm, addmm (and what linear/matmul decompose into)."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_same, capturing_backend, check, non_contiguous, rand

# Float32 reductions over k reorder additions; tolerances scale with the inner dimension.
MM_SHAPES = [(1, 1, 1), (3, 5, 7), (17, 33, 9), (64, 128, 48), (2, 513, 3)]


@pytest.mark.parametrize("m,k,n", MM_SHAPES, ids=str)
def test_mm(m: int, k: int, n: int, device: str) -> None:
    check(torch.mm, rand(m, k, device=device), rand(k, n, device=device), tolerance_scale=4)


def test_mm_transposed_operands(device: str) -> None:
    a = rand(9, 6, device=device).t()
    b = rand(11, 9, device=device).t()
    check(torch.mm, a, b)
    check(torch.mm, non_contiguous(rand(5, 8, device=device)), rand(8, 4, device=device))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_matmul_operand_that_is_also_an_output(dtype: torch.dtype, device: str) -> None:
    """A graph output (or a view of one) that feeds a matmul: the output's memory is the caller's, new
    on every call, so a captured library call must not read it (partitions of models hit this)."""

    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        hidden = torch.relu(x) * 2
        return hidden, hidden @ w, hidden.t() @ x

    x, w = rand(6, 8, dtype=dtype, device=device), rand(8, 5, dtype=dtype, device=device)
    compiled = torch.compile(f, backend="luminal")
    for _ in range(2):  # the second call gets new output pointers
        assert_same(compiled(x, w), f(x, w), tolerance_scale=4)


def test_matmul_of_a_repeated_parameter(device: str) -> None:
    """SigLIP's attention-pooling head: a [1, 1, k] probe parameter repeated over the batch feeds
    linear layers. The repeat is a view whose rows all read one row (stride 0), which cuBLASLt
    cannot take: it is staged into a dense buffer first (the first call raised)."""
    probe = rand(1, 1, 64, device=device)
    weight, bias = rand(96, 64, device=device, low=-0.2, high=0.2), rand(96, device=device)

    def head(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        repeated = probe.repeat(x.shape[0], 1, 1)
        return torch.nn.functional.linear(repeated, weight, bias) + x, probe.expand(x.shape[0], 5, 64) @ weight.t()

    for batch in (3, 1):
        x = rand(batch, 1, 96, device=device)
        assert_same(torch.compile(head, backend="luminal")(x), head(x), tolerance_scale=4)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_mm_dtypes(dtype: torch.dtype, device: str) -> None:
    check(torch.mm, rand(8, 16, dtype=dtype, device=device), rand(16, 5, dtype=dtype, device=device), tolerance_scale=4)


@pytest.mark.parametrize("b,m,k,n", [(1, 2, 3, 4), (7, 27, 16, 27), (3, 1, 9, 1)], ids=str)
def test_bmm(b: int, m: int, k: int, n: int, device: str) -> None:
    x = rand(b, m, k, device=device)
    check(lambda t: torch.bmm(t, t.transpose(1, 2)), x, tolerance_scale=4)
    check(torch.bmm, x, rand(b, k, n, device=device), tolerance_scale=4)


@pytest.mark.parametrize("beta,alpha", [(1.0, 1.0), (0.5, 2.0), (0.0, 1.0)], ids=str)
def test_addmm(beta: float, alpha: float, device: str) -> None:
    bias = rand(6, device=device)
    check(
        lambda b, x, w: torch.addmm(b, x, w, beta=beta, alpha=alpha),
        bias,
        rand(4, 3, device=device),
        rand(3, 6, device=device),
    )


def test_addmm_beta_zero_ignores_nan_bias(device: str) -> None:
    bias = torch.full((3,), float("nan"), device=device)
    check(lambda b, x, w: torch.addmm(b, x, w, beta=0.0), bias, rand(2, 4, device=device), rand(4, 3, device=device))


def test_linear_and_matmul(device: str) -> None:
    w, b = rand(5, 7, device=device), rand(5, device=device)
    check(lambda x: torch.nn.functional.linear(x, w, b), rand(3, 7, device=device))
    check(lambda x: torch.nn.functional.linear(x, w), rand(2, 4, 7, device=device))  # 3-D input
    check(torch.matmul, rand(2, 3, 4, device=device), rand(4, 5, device=device))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_linear_gelu(approximate: str, dtype: torch.dtype, device: str) -> None:
    """tanh-GELU runs in the matmul's epilogue (cuBLASLt's GELU is that approximation); exact GELU
    stays a fused pointwise kernel."""
    model = torch.nn.Sequential(torch.nn.Linear(48, 72), torch.nn.GELU(approximate=approximate))
    model = model.to(device=device, dtype=dtype)
    captured: list = []

    backend = capturing_backend(captured)

    x = rand(37, 48, dtype=dtype, device=device)
    with torch.no_grad():
        assert_same(torch.compile(model, backend=backend)(x), model(x), tolerance_scale=4)
    assert ("+ bias, gelu_tanh" in captured[0].ir()) == (approximate == "tanh")


def _pairwise_dots(x: torch.Tensor) -> torch.Tensor:
    """DLRM's interaction: dot products of every pair of rows of each sample (lower triangle)."""
    rows = x.shape[1]
    i = torch.tensor([a for a in range(rows) for _ in range(a)], device=x.device)
    j = torch.tensor([b for a in range(rows) for b in range(a)], device=x.device)
    return torch.bmm(x, x.transpose(1, 2))[:, i, j]


def _misaligned(t: torch.Tensor) -> torch.Tensor:
    """The same values at an address 4 bytes past a 16-byte boundary (contiguous strides)."""
    storage = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = storage[1:].view(t.shape)
    view.copy_(t)
    return view


@pytest.mark.parametrize("width", [16, 6, 32], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "misaligned", "strided"])
def test_pairwise_dots_vector_loads(width: int, layout: str, device: str) -> None:
    """Folds over 4-aligned f32 rows read float4s when the pointer is 16-byte aligned and the
    innermost stride is 1, and the scalar loop otherwise: both give eager's numbers."""
    x = rand(5, 27, width, device=device)
    if layout == "misaligned":
        x = _misaligned(x)
        assert x.data_ptr() % 16 != 0
    elif layout == "strided":
        x = torch.stack([x, rand(5, 27, width, device=device)], dim=-1)[..., 0]  # innermost stride 2
    captured: list = []

    backend = capturing_backend(captured)

    expected = _pairwise_dots(x)
    assert_same(torch.compile(_pairwise_dots, backend=backend)(x), expected, tolerance_scale=4)
    source = captured[0].cuda_source()
    assert ("float4" in source) == (width % 4 == 0), "vector loads exactly when rows are whole float4s"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_layer(dtype: torch.dtype, bias: bool, device: str) -> None:
    """nn.Bilinear's aten._trilinear, decomposed (it ran in eager: no translator)."""
    layer = torch.nn.Bilinear(4, 5, 6, bias=bias).to(device=device, dtype=dtype).eval()
    with torch.no_grad():
        check(layer, rand(7, 4, dtype=dtype, device=device), non_contiguous(rand(7, 5, dtype=dtype, device=device)))
