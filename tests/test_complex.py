"""Complex tensors inside a graph (luminal computes them as pairs of real numbers): rotary embeddings
written with torch.polar / view_as_complex / a complex product / view_as_real, as Meta's Llama
reference and DeepSeek-V2 do, against eager. Complex values that would leave the graph, and complex
ops luminal does not compute, run in eager with a fallback warning."""

from __future__ import annotations

import pytest
import torch

import luminal
from helpers import assert_same, check, rand


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
