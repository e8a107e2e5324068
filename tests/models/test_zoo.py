"""The model zoo against eager: every model compiles whole (pytest turns any LuminalFallbackWarning into
an error) and matches eager; LLMs also in bfloat16 on CUDA; a StaticCache decode loop writes its
caches in place."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

import luminal
from helpers import assert_same, capturing_backend
from zoo import VOCAB, ZOO, ZooModel, available, decoder_config


def cases() -> list[Any]:
    out = []
    for entry in ZOO:
        out.append(pytest.param(entry, torch.float32, id=f"{entry.name}-f32"))
        if entry.llm:
            out.append(pytest.param(entry, torch.bfloat16, id=f"{entry.name}-bf16"))
    return out


@pytest.mark.parametrize("entry,dtype", cases())
def test_model_matches_eager_without_fallback(entry: ZooModel, dtype: torch.dtype, device: str) -> None:
    if not available(entry.library):
        pytest.skip(f"{entry.library} is not installed")
    if dtype == torch.bfloat16 and device == "cpu":
        pytest.skip("bfloat16 LLMs run on CUDA (the CPU reference engine covers float32)")
    model, forward, inputs = entry.build(device, dtype)
    with torch.no_grad():
        expected = forward(*inputs)
        assert expected.float().std() > 1e-3, "degenerate model output: it would hide bugs"
        compiled = torch.compile(forward, backend="luminal")
        for _ in range(2):  # the second call reuses the compiled graph
            actual = compiled(*inputs)
            assert_same(actual, expected, tolerance_scale=entry.tolerance_scale)
    assert luminal.compile_count() >= 1


VARYING = ["llama", "gpt2", "qwen3_moe", "gemma3", "bert", "t5_encoder"]


@pytest.mark.parametrize("name", VARYING)
def test_varying_sequence_length_stays_in_luminal(name: str, device: str) -> None:
    """A second sequence length makes Dynamo recompile with a symbolic length (automatic dynamic
    shapes); that graph compiles whole too and serves every later length."""
    entry = next(e for e in ZOO if e.name == name)
    if not available(entry.library):
        pytest.skip(f"{entry.library} is not installed")
    model, forward, _ = entry.build(device, torch.float32)
    compiled = torch.compile(forward, backend="luminal")
    with torch.no_grad():
        for length in (11, 6, 15, 9):
            ids = torch.randint(3, VOCAB, (2, length), device=device)
            mask = torch.ones_like(ids)
            mask[1, :2] = 0
            assert_same(compiled(ids, mask), forward(ids, mask), tolerance_scale=entry.tolerance_scale)
    assert luminal.compile_count() == 2


DECODERS = [
    ("LlamaForCausalLM", "LlamaConfig", {}),
    ("Qwen3ForCausalLM", "Qwen3Config", {"head_dim": 16}),
    ("Gemma3ForCausalLM", "Gemma3TextConfig", {"head_dim": 16, "sliding_window": 8}),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("class_name,config_name,overrides", DECODERS, ids=[d[0] for d in DECODERS])
def test_static_cache_decode(
    class_name: str, config_name: str, overrides: dict[str, Any], dtype: torch.dtype, device: str
) -> None:
    """Three decode steps with transformers' StaticCache: logits and caches equal eager's, and each
    step writes the new keys and values into the caches in place (no cache is copied)."""
    transformers = pytest.importorskip("transformers")
    if dtype == torch.bfloat16 and device == "cpu":
        pytest.skip("bfloat16 LLMs run on CUDA")
    torch.manual_seed(0)
    model = getattr(transformers, class_name)(decoder_config(config_name, **overrides)).to(device, dtype).eval()
    cache = transformers.StaticCache(config=model.config, max_cache_len=24)
    prompt = torch.randint(3, VOCAB, (2, 5), device=device)
    with torch.no_grad():
        model(input_ids=prompt, past_key_values=cache, use_cache=True)  # prefill in eager
    eager_cache = copy.deepcopy(cache)
    pointers = [layer.keys.data_ptr() for layer in cache.layers]

    def step(token: torch.Tensor, position: torch.Tensor, past: Any) -> torch.Tensor:
        return model(input_ids=token, past_key_values=past, cache_position=position, use_cache=True).logits

    captured: list[Any] = []
    compiled = torch.compile(step, backend=capturing_backend(captured))
    tolerance = 8 if dtype == torch.float32 else 16
    with torch.no_grad():
        for t in range(3):
            token = torch.randint(3, VOCAB, (2, 1), device=device)
            position = torch.tensor([5 + t], device=device)
            expected = step(token, position, eager_cache)
            assert_same(compiled(token, position, cache), expected, tolerance_scale=tolerance)
            for mine, theirs in zip(cache.layers, eager_cache.layers, strict=True):
                assert_same(mine.keys, theirs.keys, tolerance_scale=tolerance)
                assert_same(mine.values, theirs.values, tolerance_scale=tolerance)
    assert [layer.keys.data_ptr() for layer in cache.layers] == pointers
    cache_bytes = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    for compiled_graph in captured:
        stats = compiled_graph.stats()
        # Only the step counters (0-d int64 tensors) are written back; the caches are updated in place.
        assert stats["scatter_copy_bytes"] == 0, stats
        assert stats["copy_back_bytes"] < cache_bytes // 100, stats
