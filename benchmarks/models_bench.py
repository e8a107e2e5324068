"""Realistic model sizes: luminal against eager and Inductor, all in one process on one GPU.

    python benchmarks/models_bench.py [--models resnet50 convnext_tiny vit_b_16 bert_base llama_1b
                                       dlrm_mini dlrm_kaggle] [--backends eager inductor luminal]
                                      [--dtypes float32 bfloat16] [--json out.json] [--plot out.png]

Models (random weights, no downloads): torchvision ResNet-50, ConvNeXt-T and ViT-B/16 at batch 32
(224x224), Hugging Face BERT-base at batch 8 x sequence 384, a Llama-style ~1B decoder (hidden
2048, 16 layers, GQA 32/8 heads) prefilling 512 tokens, and the DLRM example (mini and
Kaggle-shaped) at batch 2048. Backends: eager, inductor (torch.compile default), inductor-max
(max-autotune-no-cudagraphs; slow to compile) and luminal (torch.compile(backend="luminal")).

float32 runs with TF32 off; bfloat16 casts the model and its floating inputs. Every backend's
output is compared with eager's first (the error is reported, never hidden); a backend that fails
to compile or run gets its error in the row. Per-call times come from CUDA events around each call
after warm-up (median and p90); the number of calls adapts to the call's length (--seconds per row).
luminal's row also says how many of its graphs fell back to eager (LuminalFallbackWarning).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "dlrm"))
import luminal  # noqa: E402
from model import DLRM, KAGGLE, MINI, make_inputs  # noqa: E402

BACKENDS = ["eager", "inductor", "inductor-max", "luminal"]
Workload = tuple[Callable[..., Any], tuple[Any, ...]]


def _torchvision(name: str, batch: int) -> Callable[[torch.dtype], Workload]:
    def build(dtype: torch.dtype) -> Workload:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None).cuda().to(dtype).eval()
        randomize_batchnorm(model)
        return model, (torch.randn(batch, 3, 224, 224, device="cuda", dtype=dtype),)

    return build


def randomize_batchnorm(model: torch.nn.Module) -> None:
    """Running statistics of 0/1 and identity affines hide bugs (and are not what trained models have)."""
    generator = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            shape = module.running_mean.shape
            module.running_mean.copy_(torch.randn(shape, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(shape, generator=generator) * 0.5 + 0.75)


def _bert_base(dtype: torch.dtype) -> Workload:
    import transformers

    config = transformers.BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12)
    model = transformers.BertModel(config).cuda().to(dtype).eval()
    ids = torch.randint(0, config.vocab_size, (8, 384), device="cuda")
    mask = torch.ones_like(ids)
    return (lambda i, m: model(input_ids=i, attention_mask=m).last_hidden_state), (ids, mask)


def _llama_1b(dtype: torch.dtype) -> Workload:
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=32000,
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=4096,
    )
    model = transformers.LlamaForCausalLM(config).cuda().to(dtype).eval()
    ids = torch.randint(0, config.vocab_size, (1, 512), device="cuda")
    return (lambda i: model(input_ids=i, use_cache=False).logits), (ids,)


def _dlrm(config: Any) -> Callable[[torch.dtype], Workload]:
    def build(dtype: torch.dtype) -> Workload:
        model = DLRM(config).cuda().to(dtype).eval()
        dense, indices, offsets = make_inputs(config, 2048, 1, device="cuda")
        return model, (dense.to(dtype), indices, offsets)

    return build


MODELS: dict[str, Callable[[torch.dtype], Workload]] = {
    "resnet50": _torchvision("resnet50", 32),
    "convnext_tiny": _torchvision("convnext_tiny", 32),
    "vit_b_16": _torchvision("vit_b_16", 32),
    "bert_base": _bert_base,
    "llama_1b": _llama_1b,
    "dlrm_mini": _dlrm(MINI),
    "dlrm_kaggle": _dlrm(KAGGLE),
}


def compiled_for(backend: str, forward: Callable[..., Any]) -> Callable[..., Any]:
    if backend == "eager":
        return forward
    if backend == "inductor":
        return torch.compile(forward)
    if backend == "inductor-max":
        return torch.compile(forward, mode="max-autotune-no-cudagraphs")
    if backend == "luminal":
        return torch.compile(forward, backend="luminal")
    raise ValueError(backend)


def first_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        return first_tensor(value[0])
    raise TypeError(f"no tensor in {type(value).__name__}")


def time_calls(call: Callable[[], Any], seconds: float) -> dict[str, float]:
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    call()
    torch.cuda.synchronize()
    once = time.perf_counter() - start
    iterations = int(min(200, max(5, seconds / max(once, 1e-6))))
    times = []
    for _ in range(iterations):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        call()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    times.sort()
    return {"median_ms": statistics.median(times), "p90_ms": times[int(0.9 * (len(times) - 1))], "calls": iterations}


def run_row(name: str, dtype: torch.dtype, backends: list[str], seconds: float) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    forward, inputs = MODELS[name](dtype)
    rows = []
    with torch.no_grad():
        expected = first_tensor(forward(*inputs)).float()
        scale = expected.abs().max().item() or 1.0
        for backend in backends:
            row: dict[str, Any] = {"model": name, "dtype": str(dtype).removeprefix("torch."), "backend": backend}
            torch._dynamo.reset()
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", luminal.LuminalFallbackWarning)
                    compiled = compiled_for(backend, forward)
                    start = time.perf_counter()
                    actual = first_tensor(compiled(*inputs)).float()
                    torch.cuda.synchronize()
                    row["first_call_s"] = time.perf_counter() - start
                row["fallbacks"] = sum(issubclass(w.category, luminal.LuminalFallbackWarning) for w in caught)
                row["max_error_relative"] = (actual - expected).abs().max().item() / scale
                row.update(time_calls(lambda compiled=compiled: compiled(*inputs), seconds))
            except Exception as error:  # one backend's failure is a result, not the end of the run
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"
            rows.append(row)
            print(format_row(row), flush=True)
            gc.collect()
            torch.cuda.empty_cache()
    return rows


def format_row(row: dict[str, Any]) -> str:
    head = f"{row['model']:<14} {row['dtype']:<9} {row['backend']:<13}"
    if "error" in row:
        return f"{head} ERROR {row['error']}"
    return (
        f"{head} {row['median_ms']:9.3f} ms  p90 {row['p90_ms']:9.3f}  first call {row['first_call_s']:7.1f} s"
        f"  err {row['max_error_relative']:.1e}  fallbacks {row['fallbacks']}"
    )


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted({(r["model"], r["dtype"]) for r in rows}, key=lambda k: (k[1], k[0]))
    backends = [b for b in BACKENDS if any(r["backend"] == b for r in rows)]
    figure, axis = plt.subplots(figsize=(max(6, 1.6 * len(keys)), 4))
    width = 0.8 / max(len(backends), 1)
    for k, backend in enumerate(backends):
        ratios = []
        for model, dtype in keys:
            base = next((r for r in rows if (r["model"], r["dtype"], r["backend"]) == (model, dtype, "eager")), None)
            mine = next((r for r in rows if (r["model"], r["dtype"], r["backend"]) == (model, dtype, backend)), None)
            ok = base and mine and "median_ms" in base and "median_ms" in mine
            ratios.append(base["median_ms"] / mine["median_ms"] if ok else 0.0)
        axis.bar([i + k * width for i in range(len(keys))], ratios, width, label=backend)
    axis.set_xticks([i + width * (len(backends) - 1) / 2 for i in range(len(keys))])
    axis.set_xticklabels([f"{m}\n{d}" for m, d in keys], fontsize=8)
    axis.set_ylabel("speed-up over eager (median per call)")
    axis.axhline(1.0, color="gray", linewidth=0.8)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--backends", nargs="+", default=BACKENDS, choices=BACKENDS)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per row (5 to 200 calls)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("models_bench needs a CUDA device")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows: list[dict[str, Any]] = []
    meta = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "tf32": False,
    }
    for dtype_name in args.dtypes:
        for name in args.models:
            rows += run_row(name, getattr(torch, dtype_name), args.backends, args.seconds)
            if args.json:  # after every model: a run cut short keeps what it measured
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
