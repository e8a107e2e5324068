"""Decompositions luminal adds to torch.export's Core-ATen table.

Some fused kernels survive export on CUDA (they are not Core ATen and have no default
decomposition): RMSNorm (``_fused_rms_norm``) and the efficient, flash and cuDNN attention kernels. Decomposed here
into the primitives luminal translates, they compile instead of running in eager. The CPU flash
attention kernel (sdpa on CPU) is decomposed here too. An attention decomposition returns its output
in the kernel's layout (strides), as the graph after it was traced against those.
"""

from __future__ import annotations

import math
from typing import Any

import torch

aten = torch.ops.aten


def _fused_rms_norm(
    input: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None, eps: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's rms_norm: computed in float32 for half types, rounded, then scaled by the weight."""
    dims = tuple(range(-len(normalized_shape), 0))
    epsilon = eps if eps is not None else torch.finfo(input.dtype).eps
    upcast = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
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


def _attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_bias: torch.Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention as matmuls and a softmax in float32 (inference: dropout must be 0). Returns the
    output in the query's dtype and the float32 scores (for the log-sum-exp outputs)."""
    if dropout_p != 0.0:
        raise NotImplementedError("luminal decomposes attention for inference only (dropout_p must be 0)")
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    if key.dim() == query.dim() and key.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        # Grouped-query attention: every key/value head serves a group of query heads.
        group = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(group, dim=-3), value.repeat_interleave(group, dim=-3)
    factor = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = (query.to(compute) @ key.to(compute).transpose(-2, -1)) * factor
    if is_causal:  # top-left aligned, as torch's kernels
        rows = torch.arange(query.shape[-2], device=query.device)
        columns = torch.arange(key.shape[-2], device=query.device)
        scores = scores.masked_fill(rows[:, None] < columns[None, :], float("-inf"))
    if attn_bias is not None and attn_bias.dtype == torch.bool:
        scores = scores.masked_fill(attn_bias.logical_not(), float("-inf"))
    elif attn_bias is not None:
        scores = scores + attn_bias
    # A query that may attend to no key (a fully masked row, e.g. a padding token) gets zeros, as
    # from torch's fused kernels and its math path's safe softmax; a plain softmax would give NaN.
    attends_to_nothing = (scores == float("-inf")).all(-1, keepdim=True)
    probabilities = torch.softmax(scores, -1).masked_fill(attends_to_nothing, 0.0)
    output = (probabilities @ value.to(compute)).to(query.dtype)
    return output, scores


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


def _efficient_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_bias: torch.Tensor | None,
    compute_log_sumexp: bool,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    output, scores = _attention(query, key, value, attn_bias, dropout_p, is_causal, scale)
    output = _in_kernel_layout(
        aten._scaled_dot_product_efficient_attention.default,
        output,
        query,
        key,
        value,
        attn_bias,
        compute_log_sumexp,
        dropout_p,
        is_causal,
        scale=scale,
    )
    if compute_log_sumexp:
        log_sumexp = torch.logsumexp(scores, -1)
    else:
        log_sumexp = scores.new_empty((*scores.shape[:-2], 0))
    seed = torch.zeros((), dtype=torch.int64, device=query.device)
    return output, log_sumexp, seed, seed.clone()


def _flash_or_cudnn_outputs(
    output: torch.Tensor, scores: torch.Tensor, query: torch.Tensor, key: torch.Tensor
) -> tuple[Any, ...]:
    """The flash/cuDNN attention result tuple: output, log-sum-exp, then the training-only
    outputs (sequence offsets, RNG state, debug mask) as empty tensors."""
    empty = torch.empty(0, dtype=torch.int32, device=query.device)
    seed = torch.empty(0, dtype=torch.int64, device=query.device)
    debug = torch.empty(0, dtype=query.dtype, device=query.device)
    log_sumexp = torch.logsumexp(scores, -1)
    return output, log_sumexp, empty, empty.clone(), query.shape[-2], key.shape[-2], seed, seed.clone(), debug


def _flash_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    return_debug_mask: bool = False,
    *,
    scale: float | None = None,
) -> tuple[Any, ...]:
    output, scores = _attention(query, key, value, None, dropout_p, is_causal, scale)
    output = _in_kernel_layout(
        aten._scaled_dot_product_flash_attention.default,
        output,
        query,
        key,
        value,
        dropout_p,
        is_causal,
        return_debug_mask,
        scale=scale,
    )
    return _flash_or_cudnn_outputs(output, scores, query, key)


def _flash_attention_for_cpu(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    attn_mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The CPU flash kernel (what sdpa runs on CPU). Replaces torch's own decomposition, whose
    output layout differs from the kernel's on recent torch (GPT-2's attention output `.view`
    then fails to export)."""
    output, scores = _attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    output = _in_kernel_layout(
        aten._scaled_dot_product_flash_attention_for_cpu.default,
        output,
        query,
        key,
        value,
        dropout_p,
        is_causal,
        attn_mask=attn_mask,
        scale=scale,
    )
    log_sumexp = torch.logsumexp(scores, -1).to(torch.float64 if query.dtype == torch.float64 else torch.float32)
    return output, log_sumexp


def _cudnn_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_bias: torch.Tensor | None,
    compute_log_sumexp: bool,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    return_debug_mask: bool = False,
    *,
    scale: float | None = None,
) -> tuple[Any, ...]:
    output, scores = _attention(query, key, value, attn_bias, dropout_p, is_causal, scale)
    output = _in_kernel_layout(
        aten._scaled_dot_product_cudnn_attention.default,
        output,
        query,
        key,
        value,
        attn_bias,
        compute_log_sumexp,
        dropout_p,
        is_causal,
        return_debug_mask,
        scale=scale,
    )
    return _flash_or_cudnn_outputs(output, scores, query, key)


def _extra() -> dict[Any, Any]:
    table: dict[Any, Any] = {
        aten._scaled_dot_product_efficient_attention.default: _efficient_attention,
        aten._scaled_dot_product_flash_attention.default: _flash_attention,
        aten._scaled_dot_product_flash_attention_for_cpu.default: _flash_attention_for_cpu,
    }
    if hasattr(aten, "_scaled_dot_product_cudnn_attention"):
        table[aten._scaled_dot_product_cudnn_attention.default] = _cudnn_attention
    if hasattr(aten, "_fused_rms_norm"):  # torch >= 2.8
        table[aten._fused_rms_norm.default] = _fused_rms_norm
    if hasattr(aten, "rms_norm"):
        table[aten.rms_norm.default] = _rms_norm
    return table


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
    return table
