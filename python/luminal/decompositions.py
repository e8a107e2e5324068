"""Decompositions luminal adds to torch.export's Core-ATen table.

Some fused kernels survive export on CUDA (they are not Core ATen and have no default
decomposition): RMSNorm (``_fused_rms_norm``) is decomposed here into the primitives luminal
translates, so it compiles instead of running in eager; so is nn.TransformerEncoderLayer's fused
inference op (``_transformer_encoder_layer_fwd``, without a mask); so is nn.Bilinear's
``_trilinear``. Transposed convolutions become a
matmul and col2im (or a convolution of a zero-stuffed input). The fused attention kernels (efficient, flash,
CPU flash, cuDNN) are not decomposed: luminal translates them natively (one attention node), and
``decomposition_table`` keeps them out of torch's own table too.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

aten = torch.ops.aten


@functools.cache
def _eager_rms_norm_epsilon_is_the_inputs() -> bool:
    """Whether this torch's eager rms_norm without eps adds the input dtype's epsilon to half inputs
    (torch 2.6) rather than that of float32, which it computes in (newer torch). Asked of eager
    once, on a value where the two differ by 30x: 1e-3 normalized is 0.03 with float16's epsilon.
    decomposition_table asks first, outside the export's fake tensors, where an eager op can run."""
    if not hasattr(torch, "rms_norm"):
        return False
    probe = torch.full((1, 1), 1e-3, dtype=torch.float16)
    try:
        return float(torch.rms_norm(probe, [1])) < 0.5
    except RuntimeError:  # no half rms_norm on this torch's CPU: the newer rule
        return False


def _fused_rms_norm(
    input: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None, eps: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's rms_norm: computed in float32 for half types, rounded, then scaled by the weight.
    Without eps, ATen takes the epsilon of the type it computes in (float32's for half types); torch
    2.6 took the input dtype's (see _eager_rms_norm_epsilon_is_the_inputs)."""
    dims = tuple(range(-len(normalized_shape), 0))
    upcast = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
    epsilon_type = input.dtype if _eager_rms_norm_epsilon_is_the_inputs() else upcast.dtype
    epsilon = eps if eps is not None else torch.finfo(epsilon_type).eps
    rstd = torch.rsqrt(upcast.pow(2).mean(dims, keepdim=True) + epsilon)
    result = (upcast * rstd).to(input.dtype)
    if weight is not None:
        result = result * weight
    return result, rstd


def _rms_norm(
    input: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None = None, eps: float | None = None
) -> torch.Tensor:
    # Decomposed before dispatch: on CUDA, rms_norm's own composite emits _fused_rms_norm.
    return _fused_rms_norm(input, normalized_shape, weight, eps)[0]


def _in_kernel_layout(op: Any, output: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``output`` laid out as the fused kernel ``op`` lays out its result (its meta function says
    how). The graph was traced against the kernel's strides: a later ``.contiguous()`` that was a
    no-op there left no node, and a ``.view`` after it (Hugging Face's attention output) only
    works with those strides. Unchanged when the meta function is not available."""
    try:
        from torch._decomp import meta_table  # noqa: PLC0415

        meta = meta_table.get(op)
        if meta is None:
            return output
        result = meta(*args, **kwargs)
    except Exception:  # noqa: BLE001  (a meta function of another torch version: keep the output as is)
        return output
    layout = result[0] if isinstance(result, (tuple, list)) else result
    if not isinstance(layout, torch.Tensor) or layout.dtype != output.dtype or layout.dim() != output.dim():
        return output
    # The functional copy: the values of `output` in the strides of `layout` (no in-place op,
    # which the decomposition pass could not functionalize).
    return aten.copy.default(layout, output)


# ------------------------------------------------------------------------------------------------
# Transposed convolution
# ------------------------------------------------------------------------------------------------
def _convolution(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    transposed: bool,
    output_padding: list[int],
    groups: int,
) -> Any:
    """Transposed convolutions (ConvTranspose1d/2d/3d: DPT's and segmentation decoders' upsampling),
    which luminal's convolution translator does not take, as ops it does. 1-D and 2-D: one matmul
    per group (every input pixel times every kernel tap) and col2im, which sums the taps landing on
    each output pixel; half types accumulate in float32 and round once, as the kernels do. 3-D (and
    an output_padding not below the stride): the input with stride - 1 zeros between elements,
    padded, convolved with the flipped, transposed kernel. Plain convolutions are left alone."""
    if not transposed:
        return NotImplemented
    spatial = weight.dim() - 2
    stride, padding, dilation, output_padding = (
        [int(v) for v in values] * (spatial if len(values) == 1 else 1)
        for values in (stride, padding, dilation, output_padding)
    )
    if spatial <= 2 and all(o < s for o, s in zip(output_padding, stride, strict=True)):
        output = _transposed_convolution_col2im(input, weight, bias, stride, padding, dilation, output_padding, groups)
    else:
        output = _transposed_convolution_stuffed(input, weight, bias, stride, padding, dilation, output_padding, groups)
    args = (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return _in_kernel_layout(aten.convolution.default, output, *args)


def _transposed_convolution_col2im(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    output_padding: list[int],
    groups: int,
) -> torch.Tensor:
    one_dimensional = weight.dim() == 3
    if one_dimensional:  # a 1-D convolution is a 2-D one of height 1
        input, weight = input.unsqueeze(2), weight.unsqueeze(2)
        stride, padding, dilation, output_padding = [1, *stride], [0, *padding], [1, *dilation], [0, *output_padding]
    batch, channels, height, width = input.shape
    _, group_outputs, kernel_h, kernel_w = weight.shape
    compute = torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype
    pixels = input.to(compute).reshape(batch, groups, channels // groups, height * width)
    taps = weight.to(compute).reshape(groups, channels // groups, group_outputs * kernel_h * kernel_w)
    # columns[n, g, (o, a, b), l]: output channel o of group g, kernel tap (a, b), input pixel l.
    columns = torch.matmul(taps.transpose(1, 2), pixels)
    columns = columns.reshape(batch, groups * group_outputs * kernel_h * kernel_w, height * width)
    size = [
        (extent - 1) * s - 2 * p + d * (k - 1) + o + 1
        for extent, k, s, p, d, o in zip(
            (height, width), (kernel_h, kernel_w), stride, padding, dilation, output_padding, strict=True
        )
    ]
    output = aten.col2im.default(columns, size, [kernel_h, kernel_w], dilation, padding, stride)
    if bias is not None:
        output = output + bias.to(compute).reshape(1, -1, 1, 1)
    output = output.to(input.dtype)
    return output.squeeze(2) if one_dimensional else output


def _transposed_convolution_stuffed(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    output_padding: list[int],
    groups: int,
) -> torch.Tensor:
    spatial = weight.dim() - 2
    kernel = list(weight.shape[2:])
    for k, step in enumerate(stride):
        if step == 1:
            continue
        axis = 2 + k
        extent = input.shape[axis]
        zeros = input.new_zeros((*input.shape[: axis + 1], step - 1, *input.shape[axis + 1 :]))
        input = torch.cat([input.unsqueeze(axis + 1), zeros], dim=axis + 1).flatten(axis, axis + 1)
        input = input.narrow(axis, 0, (extent - 1) * step + 1)
    pads: list[int] = []
    for k in reversed(range(spatial)):  # F.pad lists the last dimension first; negative pads crop
        edge = dilation[k] * (kernel[k] - 1) - padding[k]
        pads += [edge, edge + output_padding[k]]
    input = torch.nn.functional.pad(input, pads)
    channels, group_outputs = weight.shape[0], weight.shape[1]
    flipped = weight.reshape(groups, channels // groups, group_outputs, *kernel).transpose(1, 2)
    flipped = flipped.reshape(groups * group_outputs, channels // groups, *kernel).flip(list(range(2, 2 + spatial)))
    ones, zeros_ = [1] * spatial, [0] * spatial
    return aten.convolution.default(input, flipped, bias, ones, zeros_, dilation, False, zeros_, groups)


def _transformer_encoder_layer_fwd(
    src: torch.Tensor,
    embed_dim: int,
    num_heads: int,
    qkv_weight: torch.Tensor,
    qkv_bias: torch.Tensor,
    proj_weight: torch.Tensor,
    proj_bias: torch.Tensor,
    use_gelu: bool,
    norm_first: bool,
    eps: float,
    norm_weight_1: torch.Tensor,
    norm_bias_1: torch.Tensor,
    norm_weight_2: torch.Tensor,
    norm_bias_2: torch.Tensor,
    ffn_weight_1: torch.Tensor,
    ffn_bias_1: torch.Tensor,
    ffn_weight_2: torch.Tensor,
    ffn_bias_2: torch.Tensor,
    mask: torch.Tensor | None = None,
    mask_type: int | None = None,
) -> Any:
    """nn.TransformerEncoderLayer's fused inference op (its fast path in eval mode, batch first) in
    the layer's order of operations: in-projection, attention, out-projection, layer norms, the
    feed-forward block. A masked call keeps the op (NotImplemented) and runs in eager: the op's
    merged-mask semantics are not reproduced here."""
    if mask is not None or src.dim() != 3 or embed_dim % num_heads != 0:
        return NotImplemented
    functional = torch.nn.functional
    batch, length = src.shape[0], src.shape[1]
    head_dim = embed_dim // num_heads

    def attention(x: torch.Tensor) -> torch.Tensor:
        qkv = functional.linear(x, qkv_weight, qkv_bias).view(batch, length, 3, num_heads, head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        out = functional.scaled_dot_product_attention(q, k, v)  # one attention node
        return functional.linear(out.transpose(1, 2).reshape(batch, length, embed_dim), proj_weight, proj_bias)

    def norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return functional.layer_norm(x, (embed_dim,), weight, bias, eps)

    def feed_forward(x: torch.Tensor) -> torch.Tensor:
        hidden = functional.linear(x, ffn_weight_1, ffn_bias_1)
        if not use_gelu:
            return functional.linear(functional.relu(hidden), ffn_weight_2, ffn_bias_2)
        # On CUDA the fused op's first product is _addmm_activation, whose GELU is cuBLASLt's
        # epilogue (or, without it, gelu with approximate="tanh"): the tanh form there.
        approximate = "tanh" if hidden.device.type == "cuda" else "none"
        hidden = functional.gelu(hidden, approximate=approximate)
        return functional.linear(hidden, ffn_weight_2, ffn_bias_2)

    if norm_first:
        x = src + attention(norm(src, norm_weight_1, norm_bias_1))
        return x + feed_forward(norm(x, norm_weight_2, norm_bias_2))
    x = norm(src + attention(src), norm_weight_1, norm_bias_1)
    return norm(x + feed_forward(x), norm_weight_2, norm_bias_2)


def _trilinear(
    i1: torch.Tensor,
    i2: torch.Tensor,
    i3: torch.Tensor,
    expand1: list[int],
    expand2: list[int],
    expand3: list[int],
    sumdim: list[int],
    unroll_dim: int = 1,
) -> torch.Tensor:
    """nn.Bilinear's op (``torch.bilinear``): each input unsqueezed at its expand dims, the three
    multiplied and summed over ``sumdim``. In eager's order: i1 * i2 summed over the dims i3 lacks
    (a bmm), rounded to the dtype, then times i3 summed over the rest (half types accumulate in
    float32 and round after each product, as eager's two bmms do)."""
    dtype = torch.promote_types(torch.promote_types(i1.dtype, i2.dtype), i3.dtype)
    upcast = dtype in (torch.float16, torch.bfloat16)

    def expanded(t: torch.Tensor, dims: list[int]) -> torch.Tensor:
        t = t.float() if upcast else t.to(dtype)
        for dim in sorted(dims):
            t = t.unsqueeze(dim)
        return t

    first = sorted(d for d in sumdim if d in expand3)
    rest = sorted(d for d in sumdim if d not in expand3)
    pair = expanded(i1, expand1) * expanded(i2, expand2)
    pair = (pair.sum(first, keepdim=True) if first else pair).to(dtype)
    product = (pair.float() if upcast else pair) * expanded(i3, expand3)
    product = product.sum(rest, keepdim=True) if rest else product
    return product.to(dtype).squeeze(sorted(sumdim)) if sumdim else product.to(dtype)


def _extra() -> dict[Any, Any]:
    table: dict[Any, Any] = {
        aten.convolution.default: _convolution,  # transposed only: plain ones stay whole
    }
    if hasattr(aten, "_fused_rms_norm"):  # torch >= 2.8
        table[aten._fused_rms_norm.default] = _fused_rms_norm
    if hasattr(aten, "rms_norm"):
        table[aten.rms_norm.default] = _rms_norm
    _eager_rms_norm_epsilon_is_the_inputs()  # now, in eager: the decompositions run on fake tensors
    if hasattr(aten, "_transformer_encoder_layer_fwd"):
        table[aten._transformer_encoder_layer_fwd.default] = _transformer_encoder_layer_fwd
    table[aten._trilinear.default] = _trilinear
    return table


# torch's fused attention kernels, translated natively (one attention node each): never decomposed,
# whatever torch's table holds for them (each may be missing from some torch versions).
_FUSED_ATTENTION = (
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_cudnn_attention",
)


# Targets translated for some forms only, whose decomposition serves the rest (none at present:
# floor_divide of floats, once decomposed here, is translated since).
_DECOMPOSED_THOUGH_TRANSLATED: frozenset[str] = frozenset()


def natively_translated() -> frozenset[str]:
    """The ATen targets luminal's core translates itself ("torch.ops.aten.silu.default", ...)."""
    from luminal import _C  # noqa: PLC0415 (the extension imports torch first)

    return frozenset(_C.supported_targets())


def decomposition_table() -> Any:
    """torch.export's default (Core ATen) decompositions plus luminal's, less the ops luminal
    translates natively: those stay whole in the exported graph (one fused node, the native
    kernel's numerics) instead of becoming a chain of Core-ATen ops."""
    if hasattr(torch.export, "default_decompositions"):
        table = torch.export.default_decompositions()
    else:  # torch 2.6
        from torch._decomp import core_aten_decompositions

        table = core_aten_decompositions()
    native = natively_translated() - _DECOMPOSED_THOUGH_TRANSLATED
    for op in [op for op in table.keys() if f"torch.ops.{op}" in native]:
        del table[op]
    for op, fn in _extra().items():
        table[op] = fn
    for name in _FUSED_ATTENTION:
        if hasattr(aten, name):
            table.pop(getattr(aten, name).default, None)
    return table
