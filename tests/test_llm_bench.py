"""benchmarks/llm_bench.py runs: its --tiny mode on the CPU, eager and luminal side by side, gives a
JSON row per workload and backend with finite times, small errors and no fallback; without a GPU the
full-size run says it needs one."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import luminal

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "llm_bench.py"
MODELS = ["llama_1b", "qwen3_1_7b", "gemma3_1b", "qwen3_moe"]


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    # The luminal this process imported (an installed package, or the source tree in an editable
    # install): the source tree alone has no built extension where luminal is installed normally.
    package_parent = str(Path(luminal.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([package_parent, os.environ.get("PYTHONPATH", "")])}
    env["PYTHONWARNINGS"] = "default"  # the script counts luminal's fallback warnings itself
    # The CPU run these tests describe (float32, tight tolerances) also on a machine with a GPU,
    # where --tiny would otherwise run in bfloat16 on CUDA.
    env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_tiny_run_writes_finite_rows(tmp_path: Path) -> None:
    """--tiny's defaults on the CPU: every model, TTFT and TPOT, eager, luminal and luminal.compile
    (whose decode step updates the cache tensors it takes in place, and must not freeze Gemma 3's
    sliding-layer lengths into wrong positions: the last step is checked against eager's)."""
    pytest.importorskip("transformers")
    out = tmp_path / "llm.json"
    table = tmp_path / "llm.md"
    result = run_script("--tiny", "--json", str(out), "--table", str(table))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["meta"]["tiny"] is True
    assert report["meta"]["copy_bandwidth_GBps"] > 0
    assert set(report["meta"]["models"]) == set(MODELS)
    rows = report["rows"]
    backends = ("eager", "luminal", "luminal-aot")
    expected = {(kind, model, backend) for kind in ("ttft", "tpot") for model in MODELS for backend in backends}
    assert {(r["kind"], r["model"], r["backend"]) for r in rows} == expected
    assert len(rows) == len(expected)
    for row in rows:
        assert "error" not in row, row
        for key in ("median_ms", "p90_ms", "first_call_s", "max_error_relative"):
            assert math.isfinite(row[key]) and row[key] >= 0, (key, row)
        assert row["median_ms"] > 0 and row["calls"] >= 3, row
        assert row["max_error_relative"] < 1e-4, row  # float32 on the CPU
        assert row["fallbacks"] == 0, row
        if row["kind"] == "tpot":
            assert row["batch"] == 2
            assert row["max_error_relative_last"] < 1e-4, row  # the cache writes were right
            assert row["weight_bytes"] > 0 and row["kv_bytes"] > 0
            assert math.isfinite(row["roofline_ms"]) and row["roofline_ms"] > 0
        if row["backend"] == "luminal":
            assert row["graphs"] >= 1, row
    assert "| TPOT gemma3_1b batch 2 (ms/token) |" in table.read_text()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the full-size run only refuses on a machine without CUDA")
def test_full_size_run_needs_a_gpu() -> None:
    result = run_script("--models", "llama_1b")
    assert result.returncode == 2
    assert "needs a CUDA device" in result.stdout


def test_append_replaces_rows_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """--append (a run split over several calls): a workload and backend measured again replaces its
    old row in place; rows of other workloads stay, new ones come last."""
    spec = importlib.util.spec_from_file_location("llm_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "llm_bench", bench)  # its dataclasses look their module up
    spec.loader.exec_module(bench)

    def row(model: str, backend: str, ms: float) -> dict[str, object]:
        return {"kind": "tpot", "model": model, "prompt": 128, "batch": 1, "backend": backend, "median_ms": ms}

    previous = [row("llama_1b", "eager", 1.0), row("llama_1b", "luminal", 2.0), row("gemma3_1b", "eager", 3.0)]
    new = [row("llama_1b", "luminal", 4.0), row("qwen3_moe", "eager", 5.0)]
    assert bench.merged(previous, new) == [previous[0], new[0], previous[2], new[1]]
