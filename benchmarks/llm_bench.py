"""LLM prefill (TTFT) and decode (TPOT) at realistic sizes: luminal against eager and Inductor, one process.

    python benchmarks/llm_bench.py [--models llama_1b qwen3_1_7b gemma3_1b qwen3_moe]
                                   [--backends eager inductor inductor-ro luminal luminal-aot]
                                   [--prompts 128 512 2048] [--batches 1 8] [--new-tokens 128]
                                   [--json benchmarks/results/h100_llm_bench.json]
                                   [--plot benchmarks/results/h100_llm_bench.png]
                                   [--table benchmarks/results/h100_llm_bench.md] [--append] [--tiny]

Models (Hugging Face transformers, random weights, no downloads, bfloat16): a Llama-3.2-1B-shaped
decoder (hidden 2048, 16 layers, GQA 32/8, vocab 128256, tied embeddings), a Qwen3-1.7B-shaped one
(hidden 2048, 28 layers, 16/8 heads of 128, vocab 151936), a Gemma-3-1B-shaped one (hidden 1152, 26
layers, 4/1 heads of 256, sliding window 512 on five layers of six, vocab 262144) and a
Qwen3-MoE-shaped one (hidden 2048, 12 layers, 64 experts of 512, top-8, 32/4 heads of 128).

TTFT: one prefill forward of batch 1 at each prompt length (logits of the last position only), per
call median and p90 from CUDA events after warm-up. TPOT: transformers' StaticCache, batch 1 and 8: a
prompt of --decode-prompt tokens fills the cache in eager, then --new-tokens single-token steps run
(cache_position advancing); the first step compiles and is checked against eager's first step, three
more warm up, the rest but the last are timed one by one (median and p90 ms per token), and the last
is checked against eager's last step (which reads what every earlier step wrote into the cache).

Backends: eager, inductor (torch.compile default), inductor-ro (mode="reduce-overhead": CUDA graphs),
luminal (torch.compile(backend="luminal")) and luminal-aot (luminal.compile: exported once, called
with no Dynamo; the decode step takes the cache tensors as arguments, which it updates in place).
A backend that fails to compile or run gets its error in its row. Every row has its error relative
to eager's output (max |diff| / max |eager|), luminal's fallback count (LuminalFallbackWarning) and,
for torch.compile backends, how many graphs Dynamo compiled (recompiles and graph breaks add to it).

Each TPOT row has its roofline: the bytes one decode step must read (every weight once, except the
input embedding of which only the batch's rows; for a MoE only the experts a batch is expected to
hit, E * (1 - (1 - k/E)^batch) per layer, routing taken as uniform; plus the keys and values of the
mean context over the decode, per layer up to its cache length) divided by the device's copy
bandwidth, measured here with a large device-to-device copy (bytes read + written / time).

--tiny shrinks every model (2 layers, hidden 64, vocab 256), the prompts and the number of tokens,
and runs on the CPU in float32 when there is no GPU (a smoke test of the script, not a benchmark;
under a minute with its default backends there, eager, luminal and luminal-aot).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import luminal

BACKENDS = ["eager", "inductor", "inductor-ro", "luminal", "luminal-aot"]


@dataclass(frozen=True)
class ModelSpec:
    config_class: str
    model_class: str
    fields: dict[str, Any]


MODELS: dict[str, ModelSpec] = {
    "llama_1b": ModelSpec(
        "LlamaConfig",
        "LlamaForCausalLM",
        {
            "vocab_size": 128256,
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_hidden_layers": 16,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "tie_word_embeddings": True,
            "max_position_embeddings": 8192,
        },
    ),
    "qwen3_1_7b": ModelSpec(
        "Qwen3Config",
        "Qwen3ForCausalLM",
        {
            "vocab_size": 151936,
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "num_hidden_layers": 28,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "tie_word_embeddings": True,
            "max_position_embeddings": 8192,
        },
    ),
    "gemma3_1b": ModelSpec(
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        {
            "vocab_size": 262144,
            "hidden_size": 1152,
            "intermediate_size": 6912,
            "num_hidden_layers": 26,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 256,
            "sliding_window": 512,
            "max_position_embeddings": 8192,
        },
    ),
    "qwen3_moe": ModelSpec(
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",
        {
            "vocab_size": 151936,
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "moe_intermediate_size": 512,
            "num_experts": 64,
            "num_experts_per_tok": 8,
            "num_hidden_layers": 12,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "max_position_embeddings": 8192,
        },
    ),
}

TINY_FIELDS = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "sliding_window": 24,  # longer than a tiny decode: as in the full-size run, no window fills
    "max_position_embeddings": 256,
}


def build_model(name: str, tiny: bool, device: str, dtype: torch.dtype) -> torch.nn.Module:
    import transformers

    spec = MODELS[name]
    fields = dict(spec.fields)
    if tiny:
        fields.update({k: v for k, v in TINY_FIELDS.items() if k in fields})
    config = getattr(transformers, spec.config_class)(**fields)
    if name.startswith("gemma3") and tiny:
        config.layer_types = ["sliding_attention", "full_attention"]  # one of each in two layers
    torch.manual_seed(0)
    with torch.device(device):
        model = getattr(transformers, spec.model_class)(config)
    return model.to(dtype).eval()


def last_logits_only(model: torch.nn.Module) -> dict[str, int]:
    """Prefill needs the last position's logits only (a 2048 x 262144 logits tensor would dominate)."""
    parameters = inspect.signature(model.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):  # transformers >= 4.50, then 4.45 to 4.49
        if name in parameters:
            return {name: 1}
    return {}


# ------------------------------------------------------------------------------------------------
# Timing
# ------------------------------------------------------------------------------------------------
class Clock:
    """CUDA events around a call on a GPU, the wall clock (after the call returns) on the CPU."""

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def time_ms(self, call: Callable[[], Any]) -> float:
        if not self.cuda:
            start = time.perf_counter()
            call()
            return (time.perf_counter() - start) * 1000.0
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        call()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end)


def summarize(times: list[float]) -> dict[str, Any]:
    ordered = sorted(times)
    return {
        "median_ms": statistics.median(ordered),
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))],
        "calls": len(ordered),
    }


def time_calls(clock: Clock, call: Callable[[], Any], seconds: float) -> dict[str, Any]:
    for _ in range(3):
        call()
    clock.sync()
    once = clock.time_ms(call) / 1000.0
    iterations = int(min(200, max(5, seconds / max(once, 1e-6))))
    return summarize([clock.time_ms(call) for _ in range(iterations)])


def copy_bandwidth(device: str, clock: Clock, megabytes: int) -> float:
    """Bytes read plus written per second by a large device-to-device copy (the roofline's denominator)."""
    source = torch.empty(megabytes * 2**20, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    times = [clock.time_ms(lambda: target.copy_(source)) for _ in range(20)]
    seconds = statistics.median(times[3:]) / 1000.0
    return 2 * source.numel() / seconds


# ------------------------------------------------------------------------------------------------
# Backends
# ------------------------------------------------------------------------------------------------
def compiled_for(backend: str, function: Callable[..., Any], graphs: list[int]) -> Callable[..., Any]:
    """The function under a torch.compile backend; `graphs` counts the graphs Dynamo hands it."""
    if backend == "eager":
        return function
    if backend in ("inductor", "inductor-ro"):  # graphs counted from Dynamo's counters (see measured)
        return torch.compile(function, mode="reduce-overhead" if backend == "inductor-ro" else None)
    if backend == "luminal":

        def counting_luminal(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
            graphs[0] += 1
            return luminal.luminal_backend(gm, inputs)

        return torch.compile(function, backend=counting_luminal)
    raise ValueError(backend)


class _Prefill(torch.nn.Module):
    """The prefill as a module (luminal.compile takes the model's parameters from a module)."""

    def __init__(self, model: torch.nn.Module, keep: dict[str, int]) -> None:
        super().__init__()
        self.model = model
        self.keep = keep

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, use_cache=False, **self.keep).logits


@dataclass
class Slot:
    """One tensor a cache holds: an attribute of an object, or an item of a list."""

    owner: Any
    key: str | int

    def get(self) -> torch.Tensor:
        return self.owner[self.key] if isinstance(self.owner, list) else getattr(self.owner, self.key)

    def set(self, value: torch.Tensor) -> None:
        if isinstance(self.owner, list):
            self.owner[self.key] = value
        else:
            setattr(self.owner, self.key, value)


def cache_slots(cache: Any) -> list[Slot]:
    """Every tensor of a StaticCache: per layer (transformers >= 4.56: keys, values and, in 5.x, the
    step counter) or the key_cache/value_cache lists of older versions."""
    slots = []
    for layer in getattr(cache, "layers", None) or []:
        slots += [Slot(layer, k) for k, v in sorted(vars(layer).items()) if isinstance(v, torch.Tensor)]
    for name in ("key_cache", "value_cache"):
        tensors = getattr(cache, name, None)
        if isinstance(tensors, list):
            slots += [Slot(tensors, i) for i, v in enumerate(tensors) if isinstance(v, torch.Tensor)]
    slots += [Slot(cache, k) for k, v in sorted(vars(cache).items()) if isinstance(v, torch.Tensor)]
    return slots


def decode(model: torch.nn.Module, token: torch.Tensor, position: torch.Tensor, cache: Any, keep: Any) -> Any:
    """One decode step. The positions are passed, not derived from the cache's length: transformers
    5.x derives them from a Python int of the first layer's cache (a sliding layer in Gemma 3), which
    an exported program would hold fixed at the export's value."""
    return model(
        input_ids=token,
        past_key_values=cache,
        cache_position=position,
        position_ids=position.view(1, -1),
        use_cache=True,
        **keep,
    ).logits


class _DecodeStep(torch.nn.Module):
    """One decode step with the cache's tensors as arguments (for luminal.compile, which takes
    tensors): they are put in the cache for the call, which updates them in place. What the cache
    holds as Python ints (a sliding layer's length in transformers 5.x) is fixed at export: the
    mask's query offset, read from the first layer (a sliding one in Gemma 3), is taken from the
    position tensor instead; the rest (window full or not, the window's start once full) stays
    right while no window fills during the decode, and the row's last-step check against eager
    says when it did not."""

    def __init__(self, model: torch.nn.Module, cache: Any, keep: dict[str, int]) -> None:
        super().__init__()
        self.model = model
        self.keep = keep
        self.__dict__["cache"] = cache
        self.__dict__["slots"] = cache_slots(cache)

    def forward(self, token: torch.Tensor, position: torch.Tensor, *state: torch.Tensor) -> torch.Tensor:
        slots: list[Slot] = self.__dict__["slots"]
        saved = [slot.get() for slot in slots]
        for slot, value in zip(slots, state, strict=True):
            slot.set(value)
        cache = self.__dict__["cache"]
        offset = hasattr(type(cache), "get_query_offset")  # transformers 5.x
        if offset:  # the query's offset is the token's position: a tensor, not a sliding layer's int
            cache.get_query_offset = lambda layer_idx=0: position.reshape(())
        try:
            return decode(self.model, token, position, cache, self.keep)
        finally:
            if offset:
                del cache.get_query_offset
            for slot, value in zip(slots, saved, strict=True):
                slot.set(value)


# ------------------------------------------------------------------------------------------------
# Rows
# ------------------------------------------------------------------------------------------------
def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    scale = expected.abs().max().item() or 1.0
    return (actual.float() - expected).abs().max().item() / scale


def measured(row: dict[str, Any], body: Callable[[], None], graphs: list[int]) -> None:
    """Runs a row's body, recording fallbacks, Dynamo's graph count and any error into the row."""
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", luminal.LuminalFallbackWarning)
            body()
        row["fallbacks"] = sum(issubclass(w.category, luminal.LuminalFallbackWarning) for w in caught)
    except Exception as error:  # one backend's failure is a result, not the end of the run
        text = str(error).strip()
        row["error"] = f"{type(error).__name__}: {text.splitlines()[0][:300] if text else ''}"
    if row["backend"] not in ("eager", "luminal-aot"):
        row["graphs"] = graphs[0] or int(counters["stats"].get("unique_graphs", 0))
        row["graph_breaks"] = int(sum(counters["graph_break"].values()))


def ttft_rows(
    name: str, model: torch.nn.Module, prompt: int, backends: list[str], clock: Clock, seconds: float
) -> list[dict[str, Any]]:
    keep = last_logits_only(model)
    prefill = _Prefill(model, keep)
    device = next(model.parameters()).device
    ids = torch.randint(3, model.config.vocab_size, (1, prompt), device=device)
    rows = []
    with torch.no_grad():
        expected = prefill(ids).float()
        for backend in backends:
            row: dict[str, Any] = {"kind": "ttft", "model": name, "prompt": prompt, "batch": 1, "backend": backend}
            graphs = [0]

            def body(backend: str = backend, row: dict[str, Any] = row, graphs: list[int] = graphs) -> None:
                start = time.perf_counter()
                if backend == "luminal-aot":
                    compiled: Callable[..., Any] = luminal.compile(prefill, (ids,))
                else:
                    compiled = compiled_for(backend, prefill, graphs)
                actual = compiled(ids)
                clock.sync()
                row["first_call_s"] = time.perf_counter() - start
                row["max_error_relative"] = relative_error(actual, expected)
                row.update(time_calls(clock, lambda: compiled(ids), seconds))

            measured(row, body, graphs)
            rows.append(row)
            print(format_row(row), flush=True)
            release()
    return rows


def new_cache(model: torch.nn.Module, batch: int, length: int) -> Any:
    """A StaticCache under the constructor of transformers 5.x / 4.56+ or of older 4.x versions
    (where a model with sliding layers takes a HybridCache, as its generate() does)."""
    import transformers

    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    parameter = next(model.parameters())
    if (major, minor) < (4, 56):  # allocated up front (its __init__ may take only *args, **kwargs)
        config = model.config  # Qwen3's config has a sliding_window it does not use
        sliding = getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True)
        hybrid = sliding and hasattr(transformers, "HybridCache")
        kind = transformers.HybridCache if hybrid else transformers.StaticCache  # Gemma 3's cache there
        return kind(
            config=model.config,
            max_batch_size=batch,
            max_cache_len=length,
            device=parameter.device,
            dtype=parameter.dtype,
        )
    return transformers.StaticCache(config=model.config, max_cache_len=length)


def weight_bytes_per_step(model: torch.nn.Module, batch: int) -> int:
    """Bytes of the weights one decode step reads (see the module's docstring)."""
    config = model.config
    embedding = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    tied = output is not None and output.weight.data_ptr() == embedding.data_ptr()
    total = 0
    experts = getattr(config, "num_experts", 0) or 0
    top_k = getattr(config, "num_experts_per_tok", 0) or 0
    hit = experts * (1.0 - (1.0 - top_k / experts) ** batch) if experts else 0.0
    for name, parameter in model.named_parameters():  # tied weights come once
        size = parameter.numel() * parameter.element_size()
        if parameter is embedding and not tied:
            size = batch * embedding.shape[1] * embedding.element_size()
        elif experts and ".experts" in name:
            size = int(size * hit / experts)
        total += size
    return total


def kv_bytes_per_step(cache: Any, context: int) -> int:
    """Keys and values one decode step reads: per cache tensor of [batch, heads, length, dim], the
    first min(context, length) positions (a sliding layer's cache is as long as its window)."""
    total = 0
    for slot in cache_slots(cache):
        tensor = slot.get()
        if tensor.dim() == 4 and tensor.is_floating_point():
            batch, heads, length, dim = tensor.shape
            total += batch * heads * min(context, length) * dim * tensor.element_size()
    return total


def tpot_rows(
    name: str,
    model: torch.nn.Module,
    batch: int,
    prompt: int,
    new_tokens: int,
    backends: list[str],
    clock: Clock,
    bandwidth: float,
) -> list[dict[str, Any]]:
    keep = last_logits_only(model)
    device = next(model.parameters()).device
    vocab = model.config.vocab_size
    prompt_ids = torch.randint(3, vocab, (batch, prompt), device=device)
    tokens = [torch.randint(3, vocab, (batch, 1), device=device) for _ in range(new_tokens)]
    positions = [torch.tensor([prompt + t], device=device) for t in range(new_tokens)]
    length = prompt + new_tokens

    def filled_cache() -> Any:
        cache = new_cache(model, batch, length)
        model(input_ids=prompt_ids, past_key_values=cache, use_cache=True, **keep)  # prefill in eager
        return cache

    def step(token: torch.Tensor, position: torch.Tensor, cache: Any) -> torch.Tensor:
        return decode(model, token, position, cache, keep)

    rows = []
    with torch.no_grad():
        reference = filled_cache()
        expected = step(tokens[0], positions[0], reference).float()
        for t in range(1, new_tokens - 1):
            step(tokens[t], positions[t], reference)
        expected_last = step(tokens[-1], positions[-1], reference).float()  # reads every step's cache writes
        weights = weight_bytes_per_step(model, batch)
        kv = kv_bytes_per_step(reference, prompt + new_tokens // 2)
        del reference
        for backend in backends:
            row: dict[str, Any] = {
                "kind": "tpot",
                "model": name,
                "prompt": prompt,
                "batch": batch,
                "new_tokens": new_tokens,
                "backend": backend,
                "weight_bytes": weights,
                "kv_bytes": kv,
                "roofline_ms": (weights + kv) / bandwidth * 1000.0,
            }
            graphs = [0]

            def body(backend: str = backend, row: dict[str, Any] = row, graphs: list[int] = graphs) -> None:
                cache = filled_cache()
                clock.sync()
                start = time.perf_counter()
                if backend == "luminal-aot":
                    state = [slot.get() for slot in cache_slots(cache)]
                    module = luminal.compile(_DecodeStep(model, cache, keep), (tokens[0], positions[0], *state))

                    def call(t: int) -> torch.Tensor:
                        return module(tokens[t], positions[t], *state)
                else:
                    compiled = compiled_for(backend, step, graphs)

                    def call(t: int) -> torch.Tensor:
                        return compiled(tokens[t], positions[t], cache)

                actual = call(0)
                clock.sync()
                row["first_call_s"] = time.perf_counter() - start
                row["max_error_relative"] = relative_error(actual, expected)
                for t in range(1, min(4, new_tokens)):
                    call(t)
                times = [clock.time_ms(lambda t=t: call(t)) for t in range(min(4, new_tokens), new_tokens - 1)]
                row.update(summarize(times))
                row["max_error_relative_last"] = relative_error(call(new_tokens - 1), expected_last)

            measured(row, body, graphs)
            rows.append(row)
            print(format_row(row), flush=True)
            release()
    return rows


def release() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------
def row_label(row: dict[str, Any]) -> str:
    if row["kind"] == "ttft":
        return f"TTFT {row['model']} prompt {row['prompt']}"
    return f"TPOT {row['model']} batch {row['batch']}"


def format_row(row: dict[str, Any]) -> str:
    head = f"{row_label(row):<32} {row['backend']:<12}"
    if "error" in row:
        return f"{head} ERROR {row['error']}"
    text = (
        f"{head} {row['median_ms']:9.3f} ms  p90 {row['p90_ms']:9.3f}  first call {row['first_call_s']:6.1f} s"
        f"  err {row['max_error_relative']:.1e}  fallbacks {row['fallbacks']}"
    )
    if "max_error_relative_last" in row:
        text += f"  last step err {row['max_error_relative_last']:.1e}"
    if "graphs" in row:
        text += f"  graphs {row['graphs']} (breaks {row['graph_breaks']})"
    if "roofline_ms" in row:
        text += f"  roofline {row['roofline_ms']:.3f} ms ({row['roofline_ms'] / row['median_ms']:.0%})"
    return text


def markdown_table(rows: list[dict[str, Any]], backends: list[str]) -> str:
    """One line per workload, one column per backend (median ms; ERR when it failed), then the roofline."""
    labels = list(dict.fromkeys(row_label(r) for r in rows))
    lines = ["| workload | " + " | ".join(backends) + " | roofline |", "|---" * (len(backends) + 2) + "|"]
    for label in labels:
        mine = {r["backend"]: r for r in rows if row_label(r) == label}
        cells = []
        for backend in backends:
            row = mine.get(backend)
            if row is None:
                cells.append("")
            elif "error" in row:
                cells.append("ERR")
            else:
                fallback = f" ({row['fallbacks']} fb)" if row.get("fallbacks") else ""
                cells.append(f"{row['median_ms']:.3f}{fallback}")
        roofline = next((r["roofline_ms"] for r in mine.values() if "roofline_ms" in r), None)
        unit = "ms/token" if label.startswith("TPOT") else "ms"
        lines.append(
            f"| {label} ({unit}) | " + " | ".join(cells) + f" | {'' if roofline is None else f'{roofline:.3f}'} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = [b for b in BACKENDS if any(r["backend"] == b for r in rows)]
    kinds = [k for k in ("ttft", "tpot") if any(r["kind"] == k for r in rows)]
    figure, axes = plt.subplots(len(kinds), 1, figsize=(12, 4.2 * len(kinds)), squeeze=False)
    for axis, kind in zip(axes[:, 0], kinds, strict=True):
        labels = list(dict.fromkeys(row_label(r) for r in rows if r["kind"] == kind))
        width = 0.8 / max(len(backends), 1)
        for k, backend in enumerate(backends):
            values = []
            for label in labels:
                row = next((r for r in rows if row_label(r) == label and r["backend"] == backend), None)
                values.append(row["median_ms"] if row and "median_ms" in row else 0.0)
            axis.bar([i + k * width for i in range(len(labels))], values, width, label=backend)
        if kind == "tpot":
            for i, label in enumerate(labels):
                roofline = next((r["roofline_ms"] for r in rows if row_label(r) == label), None)
                if roofline is not None:
                    axis.hlines(roofline, i - width / 2, i + width * (len(backends) - 0.5), colors="black")
            axis.plot([], [], color="black", label="roofline (bytes / copy bandwidth)")
        axis.set_xticks([i + width * (len(backends) - 1) / 2 for i in range(len(labels))])
        axis.set_xticklabels([label.split(" ", 1)[1].replace(" ", "\n", 1) for label in labels], fontsize=8)
        axis.set_yscale("log")
        axis.set_ylabel("ms per prefill (median)" if kind == "ttft" else "ms per token (median)")
        axis.set_title("TTFT: prefill, batch 1" if kind == "ttft" else "TPOT: StaticCache decode")
        axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def merged(previous: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The previous rows, each replaced by a row of this run for the same workload and backend, then the new ones."""

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["kind"], row["model"], row["prompt"], row["batch"], row["backend"])

    mine = {key(r): r for r in rows}
    kept = [mine.pop(key(r), r) for r in previous]
    return kept + [r for r in rows if key(r) in mine]


def write_json(path: Path, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()} for r in rows]
    path.write_text(json.dumps({"meta": meta, "rows": clean}, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument(
        "--backends", nargs="+", choices=BACKENDS, help="all (tiny on the CPU: eager luminal luminal-aot)"
    )
    parser.add_argument("--prompts", nargs="+", type=int, help="TTFT prompt lengths (128 512 2048; tiny: 12)")
    parser.add_argument("--batches", nargs="+", type=int, help="TPOT batch sizes (1 8; tiny: 2)")
    parser.add_argument("--decode-prompt", type=int, help="tokens in the cache before decoding (128; tiny: 8)")
    parser.add_argument("--new-tokens", type=int, help="decode steps per TPOT row (128; tiny: 10; at least 6)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["ttft", "tpot"])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per TTFT row (5 to 200 calls)")
    parser.add_argument("--tiny", action="store_true", help="tiny models and lengths; runs on the CPU")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--table", type=Path, help="also write the markdown table here")
    parser.add_argument(
        "--append",
        action="store_true",
        help="keep the rows already in --json (a run split over calls); a row measured again replaces the old one",
    )
    args = parser.parse_args()
    if args.new_tokens is not None and args.new_tokens < 6:
        parser.error("--new-tokens must be at least 6 (one compiles, three warm up, the last is checked)")
    cuda = torch.cuda.is_available()
    if not cuda and not args.tiny:
        print("llm_bench needs a CUDA device (--tiny runs small models on the CPU)")
        return 2
    device = "cuda" if cuda else "cpu"
    if not cuda:
        torch.set_num_threads(1)  # a smoke test on a shared CPU: OpenMP threads waiting on a busy core stall
    dtype = torch.bfloat16 if cuda else torch.float32  # luminal's CPU engine is the float32 reference
    # Inductor's CPU code takes minutes to compile: a tiny run on the CPU leaves it out unless asked.
    args.backends = args.backends or (BACKENDS if cuda else ["eager", "luminal", "luminal-aot"])
    prompts = args.prompts or ([12] if args.tiny else [128, 512, 2048])
    batches = args.batches or ([2] if args.tiny else [1, 8])
    decode_prompt = args.decode_prompt or (8 if args.tiny else 128)
    new_tokens = args.new_tokens or (10 if args.tiny else 128)
    seconds = 0.05 if args.tiny else args.seconds
    clock = Clock(device)
    torch.backends.cuda.matmul.allow_tf32 = False
    bandwidth = copy_bandwidth(device, clock, 64 if args.tiny else 1024)
    import transformers

    meta: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "dtype": str(dtype).removeprefix("torch."),
        "tiny": args.tiny,
        "copy_bandwidth_GBps": bandwidth / 1e9,
        "decode_prompt": decode_prompt,
        "new_tokens": new_tokens,
    }
    print(f"{meta['device']}: copy bandwidth {bandwidth / 1e9:.0f} GB/s (read + written), {meta['dtype']}", flush=True)
    rows: list[dict[str, Any]] = []
    previous: list[dict[str, Any]] = []
    if args.append and args.json and args.json.exists():
        report = json.loads(args.json.read_text())
        previous = report["rows"]
        meta["models"] = report["meta"].get("models", {})

    def save() -> None:  # after every workload: a run cut short keeps what it measured
        if args.json:
            write_json(args.json, meta, merged(previous, rows))

    for name in args.models:
        model = build_model(name, args.tiny, device, dtype)
        meta.setdefault("models", {})[name] = {
            "parameters": sum(p.numel() for p in model.parameters()),
            "config": model.config.to_diff_dict(),
        }
        if "ttft" not in args.skip:
            for prompt in prompts:
                rows += ttft_rows(name, model, prompt, args.backends, clock, seconds)
                save()
        if "tpot" not in args.skip:
            for batch in batches:
                rows += tpot_rows(name, model, batch, decode_prompt, new_tokens, args.backends, clock, bandwidth)
                save()
        del model
        release()
    rows = merged(previous, rows)
    print()
    table = markdown_table(rows, [b for b in BACKENDS if any(r["backend"] == b for r in rows)])
    print(table)
    if args.table:
        args.table.parent.mkdir(parents=True, exist_ok=True)
        args.table.write_text(table + "\n")
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
