"""Complex tensors inside a graph (luminal computes them as pairs of real numbers): rotary embeddings
written with torch.polar / view_as_complex / a complex product / view_as_real, as Meta's Llama
reference and DeepSeek-V2 do, against eager. Complex values that would leave the graph, and complex
ops luminal does not compute, run in eager with a fallback warning."""

from __future__ import annotations

import pytest
import torch

import luminal
from helpers import RotaryLinear, apply_rotary, assert_same, check, rand


def rotary(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Meta's precompute_freqs_cis and apply_rotary_emb: x [batch, seq, heads, dim], freqs [seq, dim/2]."""
    cis = torch.polar(torch.ones_like(freqs), freqs)
    pairs = torch.view_as_complex(x.to(freqs.dtype).reshape(*x.shape[:-1], -1, 2))
    cis = cis.view(1, x.shape[1], 1, pairs.shape[-1])
    return torch.view_as_real(pairs * cis).flatten(3).type_as(x)


@pytest.mark.parametrize("real", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", [(2, 5, 3, 8), (1, 1, 1, 2), (3, 7, 1, 6)], ids=str)
def test_rotary_embedding_with_complex_numbers(real: torch.dtype, shape: tuple[int, ...], device: str) -> None:
    x = rand(*shape, dtype=torch.bfloat16 if real == torch.float32 else real, device=device)
    freqs = rand(shape[1], shape[3] // 2, dtype=real, device=device, low=-7, high=7)
    check(rotary, x, freqs, tolerance_scale=4)


def test_rotary_embedding_on_a_non_contiguous_input(device: str) -> None:
    x = rand(2, 3, 6, 10, device=device).transpose(1, 2)  # [2, 6, 3, 10], strided
    check(rotary, x, rand(6, 5, device=device))


def test_complex_times_real_and_scalar_and_unsqueeze(device: str) -> None:
    def fn(x: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = torch.view_as_complex(x)  # [4, 5]
        scaled = z * scale  # complex times a real tensor
        halved = 0.5 * z.unsqueeze(-2)  # a number times complex, [4, 1, 5]
        return torch.view_as_real(scaled), torch.view_as_real(halved.unsqueeze(0) * z.unsqueeze(-1))

    check(fn, rand(4, 5, 2, device=device), rand(5, device=device))


def test_unsupported_complex_op_runs_in_eager(device: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        z = torch.view_as_complex(x)
        return torch.view_as_real(z + z * z) * 2.0  # the complex add is not luminal's

    x = rand(3, 4, 2, device=device)
    with pytest.warns(luminal.LuminalFallbackWarning, match="complex"):
        actual = torch.compile(fn, backend="luminal")(x)
    assert_same(actual, fn(x))


def test_a_complex_result_comes_from_eager(device: str) -> None:
    def fn(x: torch.Tensor, freqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cis = torch.polar(torch.ones_like(freqs), freqs)
        return cis, torch.view_as_real(torch.view_as_complex(x) * cis) + 1.0

    x, freqs = rand(3, 4, 2, device=device), rand(3, 4, device=device)
    with pytest.warns(luminal.LuminalFallbackWarning):
        actual = torch.compile(fn, backend="luminal")(x, freqs)
    expected = fn(x, freqs)
    assert actual[0].dtype == torch.complex64
    torch.testing.assert_close(actual[0], expected[0])
    assert_same(actual[1], expected[1])


def test_complex_errors_are_refusals_in_strict_mode(device: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.view_as_complex(x).exp())

    compiled = torch.compile(fn, backend="luminal", options={"strict": True})
    with pytest.raises(Exception, match="complex"):
        compiled(rand(3, 4, 2, device=device))


# ------------------------------------------------------------------------------------------------
# Complex inputs: bound as their pairs (a precomputed freqs_cis passed in, or a module's buffer)
# ------------------------------------------------------------------------------------------------
def complex_rand(*shape: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    magnitude = rand(*shape, dtype=real, device=device, low=0.5, high=2)
    return torch.polar(magnitude, rand(*shape, dtype=real, device=device))


STRICT = {"strict": True}  # a fallback raises: these graphs must run in luminal whole


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
@pytest.mark.parametrize("shape", [(2, 5, 3, 8), (1, 1, 1, 2), (3, 7, 1, 6)], ids=str)
def test_a_complex_input_is_bound_as_its_pairs(dtype: torch.dtype, shape: tuple[int, ...], device: str) -> None:
    x = rand(*shape, dtype=torch.bfloat16 if dtype == torch.complex64 else torch.float64, device=device)
    compiled = torch.compile(apply_rotary, backend="luminal", options=STRICT)
    for _ in range(2):  # the first call, then a repeated one with a new freqs_cis (only its pointer moves)
        cis = complex_rand(shape[1], shape[3] // 2, dtype=dtype, device=device)
        assert_same(compiled(x, cis), apply_rotary(x, cis), tolerance_scale=4)


def test_strided_complex_inputs(device: str) -> None:
    def fn(x: torch.Tensor, cis: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.view_as_complex(x) * cis) * 0.5

    x = rand(4, 5, 2, device=device)
    compiled = torch.compile(fn, backend="luminal", options=STRICT)
    wide = complex_rand(4, 10, dtype=torch.complex64, device=device)
    for cis in (wide[:, ::2], complex_rand(5, 4, dtype=torch.complex64, device=device).t(), wide[:, 3:8]):
        assert not cis.is_contiguous() or cis.storage_offset() > 0
        assert_same(compiled(x, cis), fn(x, cis))


def test_a_module_with_a_complex_buffer(device: str, tmp_path) -> None:
    torch.manual_seed(0)
    model = RotaryLinear(dim=16, heads=2, max_seq=12).to(device).eval()
    x = rand(2, 7, 16, device=device)
    with torch.no_grad():
        expected = model(x)
        assert_same(torch.compile(model, backend="luminal", options=STRICT)(x), expected)
        compiled = luminal.compile(model, (x,), options=STRICT)
        assert_same(compiled(x), expected)
        compiled.save(tmp_path / "rotary.luminal")  # the package's state holds the complex buffer
        assert_same(luminal.load(tmp_path / "rotary.luminal")(x), expected)


def test_conjugate_and_negative_bits_run_that_call_in_eager(device: str) -> None:
    def fn(x: torch.Tensor, cis: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.view_as_complex(x) * cis) * scale.unsqueeze(-1)

    x, z = rand(3, 4, 2, device=device), complex_rand(3, 4, dtype=torch.complex64, device=device)
    compiled = torch.compile(fn, backend="luminal")
    assert_same(compiled(x, z, z.real.clone()), fn(x, z, z.real.clone()))
    # Lazy views: their memory holds the values before the negation torch applies on read.
    for cis, scale in ((z.conj(), z.real.clone()), (z, z.conj().imag)):
        assert cis.is_conj() or scale.is_neg()
        with pytest.warns(luminal.LuminalFallbackWarning, match="bit set"):
            actual = compiled(x, cis, scale)
        assert_same(actual, fn(x, cis.resolve_conj(), scale.resolve_neg()))
    assert_same(compiled(x, z.conj().resolve_conj(), z.real.clone()), fn(x, z.conj().resolve_conj(), z.real.clone()))


def test_a_compiled_module_runs_a_call_with_a_conjugated_input_in_eager(device: str) -> None:
    class Scaled(torch.nn.Module):
        def forward(self, x: torch.Tensor, cis: torch.Tensor) -> torch.Tensor:
            return torch.view_as_real(torch.view_as_complex(x) * cis)

    x, z = rand(3, 4, 2, device=device), complex_rand(3, 4, dtype=torch.complex64, device=device)
    compiled = luminal.compile(Scaled(), (x, z))
    assert_same(compiled(x, z), Scaled()(x, z))
    with pytest.warns(luminal.LuminalFallbackWarning, match="conjugate bit"):
        actual = compiled(x, z.conj())
    assert_same(actual, Scaled()(x, z.conj().resolve_conj()))
    assert compiled.stats()["aot"]["exports"] == 1
