"""Independent generated kernels that share one launch on CUDA (a decode layer's RoPE of the
queries and its two cache writes; the caches' step counters at the end of the step): the same
results as one launch per kernel (LUMINAL_KERNEL_GROUP=0), bit for bit, and as eager."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from helpers import assert_same, capturing_backend, rand, set_env

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class DecodeLayers(torch.nn.Module):
    """Layers of a decode step without their products: per layer, RoPE of q and k, the k and v
    cache writes at the layer's step counter, which then moves on, and a read of both caches."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        self.layers = layers

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        *state: torch.Tensor,
    ) -> torch.Tensor:
        total = torch.zeros((), device=q.device)  # read out in f32: the sums' order is not eager's
        for layer in range(self.layers):
            cache_k, cache_v, counter = state[3 * layer : 3 * layer + 3]
            scale = layer + 1
            q_rot = q * cos + rotate_half(q) * sin
            cache_k.index_copy_(2, counter.view(1), (k * scale) * cos + rotate_half(k * scale) * sin)
            cache_v.index_copy_(2, counter.view(1), v * scale)
            counter.add_(1)
            total = total + (q_rot.float() * cache_k.float().sum(2, keepdim=True)).sum() + cache_v.float().sum()
        return total


def _run(monkeypatch: pytest.MonkeyPatch, grouped: bool, dtype: torch.dtype, layers: int) -> tuple[Any, ...]:
    set_env(monkeypatch, "LUMINAL_KERNEL_GROUP", "1" if grouped else "0")
    torch._dynamo.reset()
    torch.manual_seed(0)
    heads, length, dim = 2, 12, 16
    q, k, v = (rand(1, heads, 1, dim, dtype=dtype, device="cuda") for _ in range(3))
    cos, sin = rand(1, 1, 1, dim, dtype=dtype, device="cuda"), rand(1, 1, 1, dim, dtype=dtype, device="cuda")
    state: list[torch.Tensor] = []
    for layer in range(layers):
        state += [
            rand(1, heads, length, dim, dtype=dtype, device="cuda"),
            rand(1, heads, length, dim, dtype=dtype, device="cuda"),
            torch.tensor(3 + layer, device="cuda"),
        ]
    eager_state = [t.clone() for t in state]
    module = DecodeLayers(layers)
    captured: list[Any] = []
    compiled = torch.compile(module, backend=capturing_backend(captured, options={"megakernel": False}))
    results = []
    for _ in range(3):  # the recorded graph is replayed, the counters move on
        expected = module(q, k, v, cos, sin, *eager_state)
        results.append(compiled(q, k, v, cos, sin, *state))
        assert_same(results[-1], expected, tolerance_scale=8)
        for mine, theirs in zip(state, eager_state, strict=True):
            assert_same(mine, theirs)
    torch.cuda.synchronize()
    stats = captured[0].stats()
    assert stats["copy_back_bytes"] == 0, stats  # caches and counters updated in place
    return torch.stack(results), state, stats["cuda"]["grouped_kernels"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_independent_kernels_share_a_launch(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    layers = 3
    grouped, grouped_state, count = _run(monkeypatch, True, dtype, layers)
    alone, alone_state, none = _run(monkeypatch, False, dtype, layers)
    assert none == 0
    # per layer at least the two cache writes, and the three counters at the end
    assert count >= 3 * layers, count
    assert torch.equal(grouped, alone)
    for mine, theirs in zip(grouped_state, alone_state, strict=True):
        assert torch.equal(mine, theirs)


def _mask_beside_a_product_reader(
    x: torch.Tensor, w: torch.Tensor, w2: torch.Tensor, position: torch.Tensor
) -> torch.Tensor:
    q = x @ w
    rotated = torch.tanh(q) * 2.0  # the last reader of q
    keys = torch.arange(w.shape[1], device=x.device)
    mask = torch.where(keys <= position, 1.0, 0.0).view(1, -1)  # independent: shares rotated's launch
    return rotated @ w2 + mask @ w2  # products read both whole: neither is inlined into them


@pytest.mark.parametrize("position", [0, 37])
def test_a_member_output_does_not_take_the_slot_another_member_reads(position: int) -> None:
    """Layer 0 of a Llama decode step: the attention mask (computed from the position alone) and the
    RoPE of the q projection share a launch. Planned step by step, the mask's buffer could take
    the q projection's memory, whose last reader is the RoPE beside it in the launch; the group's
    buffers are held through its last step, so the launch is used and the result is eager's."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    x, w, w2 = rand(1, 64, device="cuda"), rand(64, 64, device="cuda") / 8, rand(64, 64, device="cuda") / 8
    pos = torch.tensor(position, device="cuda")
    captured: list[Any] = []
    compiled = torch.compile(_mask_beside_a_product_reader, backend=capturing_backend(captured))
    for _ in range(2):
        assert_same(compiled(x, w, w2, pos), _mask_beside_a_product_reader(x, w, w2, pos))
    assert captured[0].stats()["cuda"]["grouped_kernels"] >= 2, captured[0].stats()["cuda"]
