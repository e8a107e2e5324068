"""Views, layout changes, concatenation and dtype conversion against eager."""

from __future__ import annotations

import pytest
import torch

from helpers import FLOAT_DTYPES, check, non_contiguous, rand


@pytest.mark.parametrize(
    "shape,new_shape",
    [
        ((4, 6), (24,)),
        ((4, 6), (3, -1)),
        ((2, 3, 4), (6, 4)),
        ((2, 3, 4), (2, 12)),
        ((5, 1, 3), (3, 5)),
        ((7,), (7, 1)),
    ],
    ids=str,
)
def test_reshape(shape, new_shape, device: str) -> None:
    check(lambda x: x.reshape(new_shape) * 2, rand(*shape, device=device))
    check(lambda x: x.view(new_shape) + 1, rand(*shape, device=device))


def test_reshape_of_non_contiguous(device: str) -> None:
    x = non_contiguous(rand(6, 10, device=device))
    check(lambda t: t.reshape(4, 15) - 1, x)
    check(lambda t: t.t().reshape(-1), rand(3, 5, device=device))


@pytest.mark.parametrize("dims", [(1, 0, 2), (2, 0, 1), (0, 2, 1), (2, 1, 0)], ids=str)
def test_permute(dims, device: str) -> None:
    check(lambda x: x.permute(dims).contiguous(), rand(3, 4, 5, device=device))


def test_transpose_and_t(device: str) -> None:
    check(lambda x: x.transpose(0, 2) * 1.5, rand(2, 3, 4, device=device))
    check(lambda x: x.t() + 0, rand(3, 7, device=device))
    check(lambda x: x.transpose(-1, -2).contiguous(), rand(5, 1, 2, device=device))


def test_expand(device: str) -> None:
    check(lambda x: x.expand(4, 3, 5) + 0, rand(3, 1, device=device))
    check(lambda x: x.expand(2, -1, 6).contiguous(), rand(5, 1, device=device))


def test_unsqueeze_squeeze(device: str) -> None:
    check(lambda x: x.unsqueeze(0).unsqueeze(-1) * 2, rand(3, 4, device=device))
    check(lambda x: x.squeeze() + 1, rand(1, 3, 1, 4, device=device))
    check(lambda x: x.squeeze(2) + 1, rand(2, 3, 1, device=device))
    check(lambda x: x.squeeze(0) + 1, rand(2, 3, device=device))  # size-2 dim: no-op


@pytest.mark.parametrize(
    "index",
    [
        (slice(1, 4),),
        (slice(None), slice(2, None)),
        (slice(None, None, 2),),
        (slice(1, None, 3), slice(-3, None)),
        (slice(-4, -1), slice(None, -2, 2)),
        (slice(0, 100),),
    ],
    ids=str,
)
def test_slice(index, device: str) -> None:
    check(lambda x: x[index] * 3, rand(9, 7, device=device))


def test_select(device: str) -> None:
    check(lambda x: x[2] * 2 + x[:, -1][1], rand(5, 4, device=device))
    check(lambda x: x[:, 0, -2] * 2, rand(3, 4, 5, device=device))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dim: int, device: str) -> None:
    a = rand(3, 4, device=device)
    b_shape = [3, 4]
    b_shape[dim] = 2
    b = rand(*b_shape, device=device)
    c_shape = [3, 4]
    c_shape[dim] = 1
    c = rand(*c_shape, device=device)
    check(lambda x, y, z: torch.cat([x, y, z], dim=dim) * 2, a, b, c)


def test_cat_mixed_dtypes_promotes(device: str) -> None:
    check(lambda x, y: torch.cat([x, y]), rand(2, 3, device=device), rand(4, 3, dtype=torch.int64, device=device))


def test_cat_of_non_contiguous_and_many_parts(device: str) -> None:
    parts = [non_contiguous(rand(4, 3 + i, device=device)) for i in range(6)]
    check(lambda *xs: torch.cat(xs, dim=1), *parts)


def test_cat_integer_exact(device: str) -> None:
    check(
        lambda x, y: torch.cat([x, y], 0),
        rand(2, 5, dtype=torch.int64, device=device),
        rand(3, 5, dtype=torch.int64, device=device),
    )


def test_flatten_and_clone(device: str) -> None:
    check(lambda x: torch.flatten(x, 1) + x.clone().sum(), rand(2, 3, 4, device=device))


@pytest.mark.parametrize("target", FLOAT_DTYPES + [torch.int64, torch.int32, torch.bool, torch.uint8], ids=str)
@pytest.mark.parametrize("source", [torch.float32, torch.int64, torch.bool, torch.bfloat16], ids=str)
def test_dtype_conversion(source: torch.dtype, target: torch.dtype, device: str) -> None:
    x = rand(4, 9, dtype=source, device=device, low=-20, high=20)
    if source.is_floating_point and target == torch.uint8:
        x = x.abs()  # negative float -> uint8 is undefined in C++ and torch
    check(lambda t: t.to(target), x)


def test_output_is_input_view(device: str) -> None:
    # Outputs that are views of inputs are returned as separate tensors with equal values.
    x = rand(3, 4, device=device)
    check(lambda t: (t.t(), t[1]), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16], ids=str)
def test_flip_repeat_diagonal(dtype: torch.dtype, device: str) -> None:
    x = rand(3, 4, 5, dtype=dtype, device=device)
    check(lambda t: (t.flip(0, 2), t.flip(-1), t.repeat(2, 1, 3), t.repeat(2, 1, 1, 2)), x)
    check(lambda t: (t.diagonal(), t.diagonal(1, 1, 2), t.diagonal(-2, 0, 1), torch.diag_embed(t[0])), x)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
@pytest.mark.parametrize("pad", [(1, 2), (2, 0, 1, 1), (0, 3, 2, 1)], ids=str)
def test_pad_modes(mode: str, pad, device: str) -> None:
    x = rand(2, 3, 5, 6, device=device) if len(pad) == 4 else rand(3, 5, 6, device=device)  # eager's rank rules
    check(lambda t: torch.nn.functional.pad(t, pad, mode=mode), x)


def test_constant_pad_value_negative_pads_and_integers(device: str) -> None:
    check(lambda t: torch.nn.functional.pad(t, (2, -1, -1, 3), value=-7), rand(4, 6, dtype=torch.int32, device=device))
    check(lambda t: torch.nn.functional.pad(t, (1, 1), value=2.5), non_contiguous(rand(3, 5, device=device)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool], ids=str)
def test_unfold(dtype: torch.dtype, device: str) -> None:
    """Tensor.unfold: overlapping (step < size), gapped (step > size) and exact windows, the last
    and a negative dimension, windows of 1 and of the whole dimension, non-contiguous input."""
    x = rand(3, 10, 7, dtype=dtype, device=device)
    check(lambda t: (t.unfold(1, 3, 1), t.unfold(1, 2, 4), t.unfold(-1, 7, 1), t.unfold(0, 1, 2)), x)
    check(lambda t: t.unfold(2, 3, 2).clone(), non_contiguous(x))
    check(lambda t: t.unfold(0, 1, 1).clone(), rand(1, dtype=dtype, device=device)[0])  # 0-d: one window of 1


def test_unfold_feeds_a_reduction(device: str) -> None:
    check(lambda t: t.unfold(1, 4, 3).sum(-1), rand(2, 10, device=device))


def test_unfold_halo_blocks(device: str) -> None:
    """Halo attention's pattern: padded feature maps unfolded into overlapping blocks on two dims."""

    def blocks(t: torch.Tensor) -> torch.Tensor:
        padded = torch.nn.functional.pad(t, [2, 2, 2, 2])
        return padded.unfold(2, 8, 4).unfold(3, 8, 4).reshape(t.shape[0], t.shape[1], -1, 64).transpose(-1, -2)

    check(blocks, rand(2, 3, 12, 8, device=device))


def test_split_chunk_unbind(device: str) -> None:
    x = rand(7, 6, device=device)
    check(lambda t: (t.split([2, 4, 1]), t.split(3, dim=1), t.chunk(3), t.unbind(1)), x)


def test_fill_and_copy(device: str) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.zeros_like(x).fill_(3.5)
        b = torch.empty(4, 5, dtype=torch.int64, device=x.device).copy_(y)  # broadcast and cast
        return a * x, b

    check(fn, rand(4, 5, device=device), rand(5, device=device, low=-9, high=9))


def test_split_outputs_feed_other_ops(device: str) -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        q, k, v = t.split(16, -1)  # one node with a list of outputs
        a, b = t.unbind(1)[:2]
        return q * 2 + k - v + (a - b).sum()

    check(fn, rand(2, 5, 48, device=device), tolerance_scale=4)
