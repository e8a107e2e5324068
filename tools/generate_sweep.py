#!/usr/bin/env python
"""generate() of the sweep's tiny Hugging Face models through luminal, against eager.

For every model of tools/sweep_models.py that can generate (causal and sequence-to-sequence LMs),
greedy generate() runs eagerly, then with ``model.forward`` compiled by
``torch.compile(backend="luminal")``, with warnings recorded. Generation exercises what a single
forward does not: the cache's growth, Dynamo's recompile with dynamic sizes after the first steps,
and the decode step's graphs. A row is ``same`` when the tokens equal eager's; a ``DIFFERENT`` row
says at which step they part and how far apart eager's two best scores were there (in bfloat16 a
gap of one rounding step is a near tie that either side may take, not a wrong result). Every row
lists its LuminalFallbackWarnings (a graph or op that ran in eager).

    python tools/generate_sweep.py                                  # CPU, float32, every model
    python tools/generate_sweep.py --only 'hf_(llama|gemma)' --device cuda --dtype bfloat16

All models run in this one process, one after another (each compiles a few graphs).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import warnings
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_models import registry


def _generation_inputs(inputs: tuple[Any, ...]) -> tuple[torch.Tensor, dict[str, Any]] | None:
    """The token ids (and attention mask) among a sweep entry's forward inputs."""
    ids = inputs[0] if inputs and isinstance(inputs[0], torch.Tensor) else None
    if ids is None or ids.dtype != torch.int64:
        return None
    extra: dict[str, Any] = {}
    if len(inputs) > 1 and isinstance(inputs[1], torch.Tensor) and inputs[1].shape == ids.shape:
        extra["attention_mask"] = inputs[1]
    return ids, extra


def run_one(model: Any, inputs: tuple[Any, ...], tokens: int) -> str:
    found = _generation_inputs(inputs)
    if found is None:
        return "skip: no token ids among its inputs"
    ids, extra = found
    settings = dict(
        max_new_tokens=tokens,
        min_new_tokens=tokens,
        do_sample=False,
        pad_token_id=0,
        output_scores=True,
        return_dict_in_generate=True,
    )
    with torch.no_grad():
        expected = model.generate(ids, **extra, **settings)
        torch._dynamo.reset()
        model.forward = torch.compile(model.forward, backend="luminal")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            actual = model.generate(ids, **extra, **settings)
            seconds = time.perf_counter() - start
    fallbacks = sorted({str(w.message).splitlines()[0][:200] for w in caught if "Fallback" in w.category.__name__})
    same = actual.sequences.shape == expected.sequences.shape and torch.equal(actual.sequences, expected.sequences)
    outcome = "same" if same else "DIFFERENT" + _first_difference(expected, actual)
    return f"{outcome} {seconds:5.1f}s fallbacks={fallbacks}"


def _first_difference(expected: Any, actual: Any) -> str:
    """Where the tokens first part, and how close eager's choice was there: a gap between eager's
    two best scores within a rounding step of the dtype is a near tie, not a wrong result."""
    for step, (mine, theirs) in enumerate(zip(actual.scores, expected.scores, strict=False)):
        parted = mine.argmax(-1) != theirs.argmax(-1)  # the batch rows whose token differs here
        if parted.any():
            best = theirs[parted].float().topk(2, -1).values
            gap = float((best[:, 0] - best[:, 1]).max())
            finite = theirs.isfinite() & mine.isfinite()
            differs = float((mine.float() - theirs.float())[finite].abs().max())
            return f" (step {step}: eager's top-2 gap {gap:.3g}, scores differ by up to {differs:.3g})"
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="^hf_", help="regex over the sweep's model names")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--tokens", type=int, default=6, help="new tokens per generate()")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    failures = 0
    for entry in registry():
        if not re.search(args.only, entry.name) or entry.decode or entry.library != "transformers":
            continue
        try:
            model, _, inputs = entry.build(args.device, dtype)
        except Exception as error:  # noqa: BLE001 - a model that cannot be built offline is skipped
            print(f"{entry.name:28s} skip: {type(error).__name__}", flush=True)
            continue
        if not callable(getattr(model, "can_generate", None)) or not model.can_generate():
            continue
        try:
            outcome = run_one(model, inputs, args.tokens)
        except Exception as error:  # noqa: BLE001 - reported per model; the sweep goes on
            outcome = f"ERROR {type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        clean = outcome.startswith("skip") or (outcome.startswith("same") and "fallbacks=[]" in outcome)
        failures += not clean
        print(f"{entry.name:28s} {outcome}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
