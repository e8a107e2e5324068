"""Matmuls of at most 8 rows on CUDA: the generated GEMV against eager, and the record of the choice.

LUMINAL_GEMV=generated:<configuration> forces one configuration of the generated GEMV (so every one
runs, whatever the timing would pick), "cublaslt" keeps cuBLASLt, unset times both and keeps the
faster. Rows 1, 2, 7 and 8 (also as a folded batch), K and N odd and multiples of 8, with and
without bias (and with bias + ReLU / GELU, which luminal fuses into the matmul), f32/f16/bf16,
nn.Linear's transposed weight and a plain [K, N] weight, and a weight view at an odd offset (read
element by element). Skipped without a GPU; the kernel's text is compiled on every machine
(tests/cpp/test_gemv.cpp).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from helpers import assert_same, capturing_backend, rand, set_env

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

CONFIGS = [
    "n1 k1 w4 u4",
    "n2 k1 w4 u4",
    "n4 k1 w2 u2",
    "n1 k4 w1 u4",
    "n2 k4 w1 u2",
    "n1 k8 w1 u2",
    "n1 k1 w4 u8",
    "n1 k4 w1 u8",
    "n1 k8 w1 u4",
]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [(64, 40), (67, 37), (520, 136)]  # (K, N)


class PlainWeight(torch.nn.Module):
    """x @ W with W stored [K, N] (each output's weights strided by N)."""

    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(k, n) / k**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


class OffsetWeight(torch.nn.Module):
    """A linear layer whose weight is a view one element into a larger parameter (misaligned rows)."""

    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.storage = torch.nn.Parameter(torch.randn(n, k + 1) / k**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.storage[:, 1:])


class LinearActivation(torch.nn.Module):
    def __init__(self, k: int, n: int, activation: str) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(k, n)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if self.activation == "relu":
            return torch.relu(y)
        return torch.nn.functional.gelu(y, approximate="tanh")


def _compile_and_run(fn: Any, x: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
    captured: list[Any] = []
    compiled = torch.compile(fn, backend=capturing_backend(captured, options={"megakernel": False}))
    result = compiled(x)
    result = compiled(x)  # a replay of the recorded graph, not just the instance build
    torch.cuda.synchronize()
    assert captured, "luminal was not used"
    return result, list(captured[0].stats()["cuda"]["choices"])


def _check(module: torch.nn.Module, x: torch.Tensor, dtype: torch.dtype) -> list[str]:
    module = module.to(device="cuda", dtype=dtype)
    with torch.no_grad():
        expected = module(x)
        result, choices = _compile_and_run(module, x)
    assert_same(result, expected, tolerance_scale=4)
    return choices


def _generated(choices: list[str], config: str) -> list[str]:
    return [c for c in choices if f"generated gemv {config} (forced by LUMINAL_GEMV)" in c]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows", [1, 2, 7, 8])
def test_linear_forced_configuration(
    config: str, dtype: torch.dtype, rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_env(monkeypatch, "LUMINAL_GEMV", f"generated:{config}")
    for index, (k, n) in enumerate(SIZES):
        x = rand(rows, k, dtype=dtype, device="cuda")
        choices = _check(torch.nn.Linear(k, n, bias=index != 1), x, dtype)
        assert len(_generated(choices, config)) == 1, choices


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_plain_and_misaligned_weights(config: str, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, "LUMINAL_GEMV", f"generated:{config}")
    for rows in (1, 7):
        for k, n in SIZES[1:]:
            x = rand(rows, k, dtype=dtype, device="cuda")
            for module in (PlainWeight(k, n), OffsetWeight(k, n)):
                choices = _check(module, x, dtype)
                assert len(_generated(choices, config)) == 1, (type(module).__name__, choices)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_epilogue(activation: str, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, "LUMINAL_GEMV", "generated")
    for rows in (1, 8):
        x = rand(rows, 72, dtype=dtype, device="cuda")
        choices = _check(LinearActivation(72, 48, activation), x, dtype)
        assert any("generated gemv" in c and "forced" in c for c in choices), choices


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_folded_batch_and_too_many_rows(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """[2, 4, K] folds into one 8-row product (the generated GEMV takes it); 9 rows stay on cuBLASLt."""
    set_env(monkeypatch, "LUMINAL_GEMV", "generated")
    x = rand(2, 4, 64, dtype=dtype, device="cuda")
    choices = _check(torch.nn.Linear(64, 24), x, dtype)
    assert any("generated gemv" in c for c in choices), choices
    x = rand(9, 64, dtype=dtype, device="cuda")
    choices = _check(torch.nn.Linear(64, 24), x, dtype)
    assert not any("generated gemv" in c for c in choices), choices


@pytest.mark.parametrize("mode", ["measured", "cublaslt"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_measured_and_library_choice(mode: str, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    if mode == "cublaslt":
        set_env(monkeypatch, "LUMINAL_GEMV", "cublaslt")
    for rows in (1, 8):
        x = rand(rows, 1024, dtype=dtype, device="cuda")
        choices = _check(torch.nn.Linear(1024, 2048, bias=False), x, dtype)
        matmul_choices = [c for c in choices if "cuBLASLt algorithm" in c or "generated gemv" in c]
        if mode == "cublaslt":  # (no choice at all where cuBLASLt offers one algorithm)
            assert len(matmul_choices) <= 1 and not any("generated gemv" in c for c in choices), choices
        else:  # the GEMV's configurations make it a choice: timed now or taken from the cache
            assert len(matmul_choices) == 1 and "ms" in matmul_choices[0], choices


class Projections(torch.nn.Module):
    """A layer's q, k, v (three weights, no bias) and gate, up projections of one activation: the
    CUDA graph runs each set as one grouped GEMV launch. Odd output counts (blocks with outputs
    past the end)."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.q = torch.nn.Linear(k, 2 * k + 3, bias=False)
        self.k = torch.nn.Linear(k, k // 2 + 1, bias=False)
        self.v = torch.nn.Linear(k, k // 2 + 1, bias=False)
        self.gate = torch.nn.Linear(k, 3 * k, bias=False)
        self.up = torch.nn.Linear(k, 3 * k, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * 2  # (a graph input reaches library products through staging copies into the arena)
        q, k, v = self.q(x), self.k(x), self.v(x)
        h = x + q[..., : x.shape[-1]] * 0.5
        hidden = torch.nn.functional.silu(self.gate(h)) * self.up(h)
        return torch.cat([hidden, k * v], dim=-1)


def _replayed(module: torch.nn.Module, x: torch.Tensor, stat: str) -> Any:
    """The module's second compiled call (a replay of the recorded CUDA graph), checked against
    eager, and the CUDA engine's statistic `stat`."""
    torch._dynamo.reset()
    captured: list[Any] = []
    compiled = torch.compile(module, backend=capturing_backend(captured, options={"megakernel": False}))
    with torch.no_grad():
        expected = module(x)
        compiled(x)
        result = compiled(x)
    torch.cuda.synchronize()
    assert_same(result, expected, tolerance_scale=4)
    return result, captured[0].stats()["cuda"][stat]


def _projections(monkeypatch: pytest.MonkeyPatch, grouped: bool, dtype: torch.dtype, rows: int, config: str) -> Any:
    set_env(monkeypatch, "LUMINAL_GEMV", f"generated:{config}")
    set_env(monkeypatch, "LUMINAL_GEMV_GROUP", "1" if grouped else "0")
    torch.manual_seed(0)
    module = Projections(72).to(device="cuda", dtype=dtype).eval()
    return _replayed(module, rand(rows, 72, dtype=dtype, device="cuda"), "grouped_gemvs")


@pytest.mark.parametrize("config", ["n1 k4 w1 u4", "n4 k1 w2 u2"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows", [1, 8])
def test_projections_of_one_activation_share_a_launch(
    rows: int, dtype: torch.dtype, config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """q, k, v share one launch and gate, up another (5 grouped products); with every member on the
    same configuration the results are bit-identical to one launch per product
    (LUMINAL_GEMV_GROUP=0)."""
    grouped, count = _projections(monkeypatch, True, dtype, rows, config)
    alone, none = _projections(monkeypatch, False, dtype, rows, config)
    assert (count, none) == (5, 0)
    assert torch.equal(grouped, alone)


class SwiGluMlp(torch.nn.Module):
    """A Llama MLP: down(silu(gate(x)) * up(x))."""

    def __init__(self, hidden: int, inner: int) -> None:
        super().__init__()
        self.gate = torch.nn.Linear(hidden, inner, bias=False)
        self.up = torch.nn.Linear(hidden, inner, bias=False)
        self.down = torch.nn.Linear(inner, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * 2  # an intermediate activation, as in a decoder layer
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def _swiglu_mlp(monkeypatch: pytest.MonkeyPatch, paired: bool, dtype: torch.dtype, rows: int, config: str) -> Any:
    set_env(monkeypatch, "LUMINAL_GEMV", f"generated:{config}")
    set_env(monkeypatch, "LUMINAL_GEMV_GLU", "1" if paired else "0")
    torch.manual_seed(0)
    module = SwiGluMlp(64, 203).to(device="cuda", dtype=dtype).eval()
    return _replayed(module, rand(rows, 64, dtype=dtype, device="cuda"), "swiglu_pairs")


@pytest.mark.parametrize("config", ["n1 k4 w1 u4", "n2 k1 w4 u4"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_gate_and_up_products_store_their_swiglu(
    rows: int, dtype: torch.dtype, config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One paired launch computes the same outputs of the gate and up products in each block and
    stores silu(gate) * up as the pointwise kernel after them would (that kernel is left out of the
    CUDA graph): bit-identical to the products and the kernel (LUMINAL_GEMV_GLU=0). Odd output
    counts (blocks with outputs past the end)."""
    paired, count = _swiglu_mlp(monkeypatch, True, dtype, rows, config)
    alone, none = _swiglu_mlp(monkeypatch, False, dtype, rows, config)
    assert (count, none) == (1, 0)
    assert torch.equal(paired, alone)
