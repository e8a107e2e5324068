"""Measured kernel choices are stored on disk (csrc/common/choice_cache.h): a second process that
compiles the same model with the same cache directory takes every cuBLASLt algorithm and cuDNN /
generated-kernel winner from the cache and times nothing; LUMINAL_SEARCH=0 neither reads nor
writes the cache; caching off measures every time; a corrupted entry is reported, removed and
measured again. Each compile runs in its own process (the cache is for cold processes). Skipped
without a GPU (the store itself is unit-tested in tests/cpp/test_choice_cache.cpp).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from helpers import assert_same

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

# A convolution (cuDNN engines against the generated kernel) and a matmul (cuBLASLt algorithms),
# compiled and called once; prints the CUDA stats, the luminal warnings and both outputs' path.
_CHILD = r"""
import json, sys, warnings
import torch
import luminal

dtype, out_path = getattr(torch, sys.argv[1]), sys.argv[2]
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(16 * 12 * 12, 48)
).to(device="cuda", dtype=dtype)
x = torch.randn(4, 8, 12, 12, device="cuda", dtype=dtype)
captured = []

def backend(gm, inputs):
    compiled = luminal.luminal_backend(gm, inputs, megakernel=False, strict=True)
    captured.append(compiled)
    return compiled

with warnings.catch_warnings(record=True) as caught, torch.no_grad():
    warnings.simplefilter("always")
    result = torch.compile(model, backend=backend)(x)
    expected = model(x)
torch.cuda.synchronize()
torch.save({"result": result.cpu(), "expected": expected.cpu()}, out_path)
stats = captured[0].stats()["cuda"]
luminal_warnings = [str(w.message) for w in caught if issubclass(w.category, luminal.LuminalWarning)]
print(json.dumps({"stats": stats, "warnings": luminal_warnings}))
"""


def _run_process(tmp_path: Path, name: str, dtype: str, **env: str) -> tuple[dict[str, Any], torch.Tensor]:
    """Compiles and calls the model in a fresh process; returns its report and luminal's output."""
    out_path = tmp_path / f"{name}.pt"
    environment = {**os.environ, **env}
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD, dtype, str(out_path)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    outputs = torch.load(out_path)
    assert_same(outputs["result"], outputs["expected"], tolerance_scale=8)
    return report, outputs["result"]


def _choice_files(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "choices").glob("*.choice"))


def _measured(stats: dict[str, Any]) -> int:
    return stats["choice_cache_hits"] + stats["choice_cache_misses"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_second_process_takes_every_choice_from_the_cache(dtype: str, tmp_path: Path) -> None:
    cache = {"LUMINAL_CACHE_DIR": str(tmp_path / "cache")}
    first, first_result = _run_process(tmp_path, "first", dtype, **cache)
    stats = first["stats"]
    assert stats["choice_cache_hits"] == 0 and stats["choice_cache_misses"] >= 1, stats
    assert len(_choice_files(tmp_path / "cache")) == stats["choice_cache_misses"]
    if torch.backends.cudnn.is_available():
        convolution = [c for c in stats["choices"] if "convolution" in c]
        assert len(convolution) == 1 and "generated kernel" in convolution[0] and "ms" in convolution[0], stats

    second, second_result = _run_process(tmp_path, "second", dtype, **cache)
    warm = second["stats"]
    assert warm["choice_cache_misses"] == 0, warm
    assert warm["choice_cache_hits"] == stats["choice_cache_misses"], warm
    assert warm["host_syncs"] < stats["host_syncs"], (warm, stats)  # no timing runs to wait for
    # The same winners, each marked as cached, with the times the first process measured:
    # "<step>: <winner> (<times>)" then "<step>: <winner> (cached: <times>)".
    expected = []
    for choice in stats["choices"]:
        winner, times = choice.rsplit(" (", 1)
        expected.append(f"{winner} (cached: {times}")
    assert sorted(warm["choices"]) == sorted(expected), (warm["choices"], stats["choices"])
    assert first["warnings"] == second["warnings"] == []
    assert_same(second_result, first_result)


def test_rules_only_and_caching_off_neither_read_nor_write(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    cache = {"LUMINAL_CACHE_DIR": str(cache_dir)}
    rules, _ = _run_process(tmp_path, "rules", "float32", LUMINAL_SEARCH="0", **cache)
    assert _measured(rules["stats"]) == 0, rules["stats"]
    assert _choice_files(cache_dir) == []
    assert all("(cached" not in choice for choice in rules["stats"]["choices"]), rules["stats"]

    measured, _ = _run_process(tmp_path, "measured", "float32", **cache)
    stored = _choice_files(cache_dir)
    assert measured["stats"]["choice_cache_misses"] == len(stored) >= 1, measured["stats"]
    rules_again, _ = _run_process(tmp_path, "rules-again", "float32", LUMINAL_SEARCH="0", **cache)
    assert _measured(rules_again["stats"]) == 0, rules_again["stats"]
    assert all("(cached" not in choice for choice in rules_again["stats"]["choices"]), rules_again["stats"]

    for name in ("off-1", "off-2"):
        off, _ = _run_process(tmp_path, name, "float32", LUMINAL_CACHE_DIR="")
        assert off["stats"]["choice_cache_hits"] == 0, off["stats"]
        assert off["stats"]["choice_cache_misses"] == len(stored), off["stats"]
    assert _choice_files(cache_dir) == stored


def test_corrupted_entry_is_reported_removed_and_measured_again(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    cache = {"LUMINAL_CACHE_DIR": str(cache_dir)}
    first, _ = _run_process(tmp_path, "first", "float32", **cache)
    stored = _choice_files(cache_dir)
    assert len(stored) == first["stats"]["choice_cache_misses"] >= 1, first["stats"]
    corrupted = stored[0]
    data = bytearray(corrupted.read_bytes())
    data[-2] ^= 0x01
    corrupted.write_bytes(bytes(data))

    second, _ = _run_process(tmp_path, "second", "float32", **cache)
    assert second["stats"]["choice_cache_misses"] == 1, second["stats"]
    assert second["stats"]["choice_cache_hits"] == len(stored) - 1, second["stats"]
    assert len(second["warnings"]) == 1, second["warnings"]
    assert f"choice cache entry {corrupted} does not match its checksum" in second["warnings"][0], second["warnings"]
    assert _choice_files(cache_dir) == stored  # measured again and stored in its place

    third, _ = _run_process(tmp_path, "third", "float32", **cache)
    assert third["stats"]["choice_cache_misses"] == 0 and third["warnings"] == [], third


# The mini DLRM (examples/dlrm/model.py) through luminal.compile, called once: its megakernel or
# general path is measured (or taken from the cache). Prints the CUDA stats and whether the output
# matched eager's.
_DLRM_CHILD = r"""
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
import luminal
from model import DLRM, MINI, make_inputs

torch.manual_seed(0)
model = DLRM(MINI).cuda().eval()
inputs = make_inputs(MINI, 2048, device="cuda")
with torch.no_grad():
    compiled = luminal.compile(model, inputs, options={"strict": True})
    result, expected = compiled(*inputs), model(*inputs)
torch.testing.assert_close(result, expected, rtol=1e-5, atol=1e-5)
print(json.dumps(compiled.stats()["cuda"]))
"""

_ROW_CHOICE = "megakernel or general path: "


def _dlrm_process(**env: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-c", _DLRM_CHILD, str(Path(__file__).resolve().parents[1] / "examples" / "dlrm")],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_megakernel_or_general_path_is_measured_once_per_cache(tmp_path: Path) -> None:
    cache = {"LUMINAL_CACHE_DIR": str(tmp_path / "cache")}
    cold = _dlrm_process(**cache)
    measured = cold["choices"][0]
    assert measured.startswith(_ROW_CHOICE) and "timed" in measured and "(cached" not in measured, cold
    winner, times = measured.rsplit(" (", 1)
    warm = _dlrm_process(**cache)
    # The same winner with the first process's times, timed no more.
    assert warm["choices"][0] == f"{winner} (cached: {times}", (warm["choices"], cold["choices"])
    assert warm["megakernel"] == cold["megakernel"] == winner.endswith(": megakernel"), (warm, cold)
    assert warm["host_syncs"] < cold["host_syncs"], (warm, cold)

    rules = _dlrm_process(LUMINAL_SEARCH="0", **cache)
    assert rules["choices"][0] == _ROW_CHOICE + "megakernel (by rule: LUMINAL_SEARCH=0)", rules
    assert rules["megakernel"] and _measured(rules) == 0, rules
