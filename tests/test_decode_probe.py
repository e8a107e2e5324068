"""benchmarks/decode_probe.py runs: its --tiny mode on the CPU compiles the decode step once per
variant (a set of environment settings) and reports finite times, the fast call's host parts and a
small error against eager for each; a malformed variant is refused before anything is built."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import luminal

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "decode_probe.py"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    # The luminal this process imported (see test_llm_bench.py), on the CPU even where a GPU is.
    package_parent = str(Path(luminal.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([package_parent, os.environ.get("PYTHONPATH", "")])}
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.pop("LUMINAL_KERNEL_GROUP", None)
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_tiny_run_reports_each_variant(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    out = tmp_path / "probe.json"
    variants = ["base", "LUMINAL_KERNEL_GROUP=0,LUMINAL_PDL=0"]
    result = run_script(
        "--tiny", "--prompt", "8", "--steps", "6", "--rounds", "2", "--variants", *variants, "--json", str(out)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["meta"]["device"] == "cpu"
    assert [row["variant"] for row in report["rows"]] == variants
    for row in report["rows"]:
        assert math.isfinite(row["sync_ms"]) and row["sync_ms"] > 0, row
        assert len(row["sync_rounds"]) == 2, row
        assert row["pipelined_ms"] is None, row  # queued steps are timed on a GPU only
        assert row["max_error_relative"] < 1e-4, row  # float32 on the CPU
        assert row["host_us"]["bind"] > 0 and row["host_wall_us"] > 0, row
    assert report["traces"] == []


def test_malformed_variant_is_refused() -> None:
    result = run_script("--tiny", "--variants", "base", "LUMINAL_PDL")
    assert result.returncode != 0
    assert "expected base or NAME=VALUE" in result.stdout + result.stderr
