"""Fused attention on cuDNN (CUDA): cuDNN's SDPA operation against eager, and the record of the choice.

LUMINAL_ATTENTION=cudnn forces cuDNN wherever its operation takes the attention (f16/bf16, no
mask, not causal, q/k/v in memory of a fixed address: here the projections' outputs, read as
strided views), "generated" forces the generated flash kernel, unset measures both on the device
and keeps the faster. Batch 1, odd and ViT-like lengths, head sizes 64, 80 and 128,
grouped-query heads, and attentions cuDNN must decline (float32, causal, masked), which run the
generated kernel and say why. Skipped without a GPU; the cuDNN-forced cases skip where torch's
cuDNN is older than the operation (9.13).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_same, capturing_backend, rand, set_env

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

ENGINES = ["cudnn", "generated", "measured"]


class SelfAttention(torch.nn.Module):
    """ViT's attention block: one projection makes q, k and v (strided views of its output)."""

    def __init__(self, heads: int, head_size: int, kv_heads: int | None = None, causal: bool = False) -> None:
        super().__init__()
        self.heads, self.head_size = heads, head_size
        self.kv_heads = kv_heads or heads
        self.causal = causal
        width = heads * head_size
        self.qkv = torch.nn.Linear(width, (heads + 2 * self.kv_heads) * head_size)
        self.out = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        batch, length, _ = x.shape
        qkv = self.qkv(x).view(batch, length, self.heads + 2 * self.kv_heads, self.head_size).transpose(1, 2)
        q, k, v = qkv.split([self.heads, self.kv_heads, self.kv_heads], dim=1)
        o = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=self.causal, enable_gqa=self.kv_heads != self.heads
        )
        return self.out(o.transpose(1, 2).reshape(batch, length, -1))


def _set_engine(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    if engine == "cudnn" and torch.backends.cudnn.version() is not None and torch.backends.cudnn.version() < 91300:
        pytest.skip("torch's cuDNN has no SDPA operation (9.13 added it)")
    if engine == "cudnn" and not torch.backends.cudnn.is_available():
        pytest.skip("torch has no cuDNN")
    if engine != "measured":
        set_env(monkeypatch, "LUMINAL_ATTENTION", engine)


def _run(module: torch.nn.Module, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    captured: list[Any] = []
    torch._dynamo.reset()
    compiled = torch.compile(module, backend=capturing_backend(captured, strict=True, megakernel=False))
    with torch.no_grad():
        expected = module(*inputs)
        compiled(*inputs)
        result = compiled(*inputs)  # a replay of the recorded graph, not just the instance build
    torch.cuda.synchronize()
    assert captured, "luminal was not used"
    choices = [c for c in captured[0].stats()["cuda"]["choices"] if "attention" in c]
    return result, expected, choices


# (batch, length, heads, head size, kv heads)
SHAPES = {
    "vit": (2, 197, 4, 64, 4),
    "odd": (3, 33, 2, 128, 2),
    # Batch 1. (One query per head, a decode step, is test_fused_attention.py's decode cases.)
    "one-batch": (1, 33, 2, 64, 2),
    "head-80": (1, 50, 3, 80, 3),
    "gqa": (2, 40, 4, 64, 2),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shape", list(SHAPES), ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_attention_block(shape: str, dtype: torch.dtype, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _set_engine(monkeypatch, engine)
    batch, length, heads, head_size, kv_heads = SHAPES[shape]
    torch.manual_seed(0)
    module = SelfAttention(heads, head_size, kv_heads).cuda().to(dtype).eval()
    x = rand(batch, length, heads * head_size, dtype=dtype, device="cuda", low=-1.0, high=1.0)
    result, expected, choices = _run(module, x)
    assert_same(result, expected, tolerance_scale=4)
    assert len(choices) == 1, choices
    if engine == "cudnn":
        assert ": cuDNN (" in choices[0], choices
    elif engine == "generated":
        assert "generated kernel (LUMINAL_ATTENTION=generated)" in choices[0], choices
    elif torch.backends.cudnn.is_available() and (torch.backends.cudnn.version() or 0) >= 91300:
        # Measured: both were timed, and the record names both times.
        assert "cuDNN engine" in choices[0] and "generated kernel" in choices[0] and " ms" in choices[0], choices


@pytest.mark.parametrize(
    "case",
    ["float32", "causal", "masked"],
)
def test_attentions_cudnn_declines_run_generated(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _set_engine(monkeypatch, "cudnn")
    dtype = torch.float32 if case == "float32" else torch.bfloat16
    torch.manual_seed(0)
    module = SelfAttention(2, 64, causal=case == "causal").cuda().to(dtype).eval()
    x = rand(2, 37, 128, dtype=dtype, device="cuda", low=-1.0, high=1.0)
    inputs = [x]
    if case == "masked":
        inputs.append(rand(2, 1, 37, 37, dtype=dtype, device="cuda", low=-2.0, high=0.0))
    result, expected, choices = _run(module, *inputs)
    assert_same(result, expected, tolerance_scale=4)
    assert len(choices) == 1 and "generated kernel (not for cuDNN: " in choices[0], choices
    reason = {"float32": "takes no float32", "causal": "causal", "masked": "masked"}[case]
    assert reason in choices[0], choices
