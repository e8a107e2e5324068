"""Randomly initialised tiny Hugging Face LlamaForCausalLM and GPT2LMHeadModel (built from configs, no
downloads)."""

from __future__ import annotations

import warnings

import pytest
import torch

import luminal
from helpers import assert_same, compile_luminal
from luminal.fallback import LuminalFallbackWarning

transformers = pytest.importorskip("transformers")

VOCAB = 96


def tiny_llama(attention: str, device: str, dtype: torch.dtype) -> torch.nn.Module:
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=112,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention
        max_position_embeddings=64,
        attn_implementation=attention,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


def logits(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    return model(input_ids=ids, attention_mask=mask, use_cache=False).logits


# bf16 logits: two layers of rounding in different places than eager's kernels.
DTYPE_TOLERANCE = {torch.float32: 8.0, torch.bfloat16: 16.0}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_tiny_llama_for_causal_lm(attention: str, padded: bool, dtype: torch.dtype, device: str) -> None:
    model = tiny_llama(attention, device, dtype)
    ids = torch.randint(0, VOCAB, (3, 13), device=device)
    mask = None
    if padded:  # left padding of different lengths, as a batched generate() would send
        mask = torch.ones_like(ids)
        mask[1, :4] = 0
        mask[2, :9] = 0
    with torch.no_grad():
        expected = logits(model, ids, mask)
        actual = compile_luminal(lambda i, m: logits(model, i, m))(ids, mask)
    assert luminal.compile_count() >= 1
    assert_same(actual, expected, tolerance_scale=DTYPE_TOLERANCE[dtype])


@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_tiny_gpt2_lm_head(padded: bool, device: str) -> None:
    """GPT-2's attention output goes through `.view` after a transpose (see test_attention's
    layout test): it failed to export before the attention decompositions kept the kernel's strides."""
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).to(device).eval()
    ids = torch.randint(3, VOCAB, (2, 11), device=device)
    mask = torch.ones_like(ids)
    if padded:
        mask[1, :3] = 0
    with torch.no_grad():
        expected = logits(model, ids, mask)
        actual = compile_luminal(lambda i, m: logits(model, i, m))(ids, mask)
    assert luminal.compile_count() >= 1
    assert_same(actual, expected, tolerance_scale=8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_tiny_llama_generate_compiles_every_step(dtype: torch.dtype, device: str) -> None:
    """generate() with the default dynamic cache: after the first decode steps Dynamo recompiles
    with dynamic sizes, and transformers' cache sums its lengths with torch.sym_sum, which
    torch.export's serializer refused, so every later step ran in eager (one fallback warning).
    Greedy tokens must equal eager's, and no graph may fall back."""
    model = tiny_llama("sdpa", device, dtype)
    ids = torch.randint(0, VOCAB, (2, 7), device=device)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    settings = dict(max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, **settings)
        compiled = torch.compile(model.forward, backend="luminal")
        model.forward = compiled
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            actual = model.generate(ids, attention_mask=mask, **settings)
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, LuminalFallbackWarning)]
    assert not fallbacks, fallbacks
    assert luminal.compile_count() >= 2  # the prefill and the dynamic decode step
    assert torch.equal(actual, expected)
