"""Graphs with ops luminal does not support: luminal compiles the rest, the unsupported ops run in
eager, one warning names them; strict=True raises instead."""

from __future__ import annotations

import warnings

import pytest
import torch

import luminal
from helpers import Mixed, assert_same, rand, wiggle
from luminal.fallback import LuminalFallbackWarning


def _compile_warns_once(model, *inputs, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        output = torch.compile(model, backend="luminal", options=options or None)(*inputs)
    fallback = [w for w in caught if issubclass(w.category, LuminalFallbackWarning)]
    assert len(fallback) == 1, [str(w.message) for w in fallback]
    return output, str(fallback[0].message)


def test_unsupported_op_runs_in_eager_with_one_warning(device: str) -> None:
    model = Mixed().to(device)
    x = rand(5, 7, device=device)
    with torch.no_grad():
        output, message = _compile_warns_once(model, x)
        assert_same(output, model(x))
    assert "luminal_test.wiggle.default" in message
    assert "2 partition(s) compiled by luminal" in message
    assert luminal.compile_count() == 1


def test_fallback_stats_name_partitions_and_eager_ops() -> None:
    captured = {}

    def backend(gm, example_inputs):
        captured["compiled"] = luminal.luminal_backend(gm, example_inputs)
        return captured["compiled"]

    model = Mixed()
    x = rand(4, 7)
    with torch.no_grad(), pytest.warns(LuminalFallbackWarning):
        assert_same(torch.compile(model, backend=backend)(x), model(x))
    stats = captured["compiled"].stats()
    assert stats["fallback"] is True
    assert list(stats["unsupported"]) == ["torch.ops.luminal_test.wiggle.default"]
    assert len(stats["partitions"]) == 2
    assert all(s["kernels"] + s["matmuls"] >= 1 for s in stats["partitions"].values())


def test_strict_raises_naming_the_op() -> None:
    with pytest.raises(Exception, match=r"luminal_test\.wiggle\.default"):
        torch.compile(Mixed(), backend="luminal", options={"strict": True})(rand(2, 7))


def test_min_partition_size_keeps_small_partitions_in_eager() -> None:
    model = Mixed()
    x = rand(3, 7)
    with torch.no_grad():
        output, message = _compile_warns_once(model, x, min_partition_size=100)
        assert_same(output, model(x))
    assert "0 partition(s) compiled by luminal" in message
    assert message.count("smaller than min_partition_size=100") == 2  # each eager partition, with its ops
    assert "aten.addmm.default" in message and "luminal_test.wiggle.default (wiggle)" in message


def test_fallback_writes_back_input_mutations(device: str) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x.mul_(2.0)
        z = wiggle(x + y)
        return z * y, z.sum(0)

    x, y = rand(4, 5, device=device), rand(4, 5, device=device)
    x_eager = x.clone()
    expected = fn(x_eager, y)
    output, _ = _compile_warns_once(fn, x, y)
    assert_same(output, expected)
    assert_same(x, x_eager)


def test_fallback_keeps_dynamic_batch(device: str) -> None:
    model = Mixed().to(device)
    compiled = torch.compile(model, backend="luminal", dynamic=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", LuminalFallbackWarning)
        for batch in (3, 8, 5, 2):  # not 1: Dynamo specializes size-1 dimensions
            x = rand(batch, 7, device=device)
            assert_same(compiled(x), model(x))
    assert luminal.compile_count() == 1


def test_a_partition_runs_in_eager_for_a_call_outside_its_compiled_range(device: str) -> None:
    """A partition's graph takes a dynamic integer argument as a size (range [0, inf) after
    Dynamo's second value); a negative one cannot bind. That call runs the partition in eager with
    a warning naming why: it used to raise the binding error out of the user's call."""

    def fn(x: torch.Tensor, k: int) -> torch.Tensor:
        return wiggle(x * k) * k + 1

    compiled = torch.compile(fn, backend="luminal")
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in (2, 3, -1, 5):
            x = rand(5, device=device)
            assert_same(compiled(x, k), fn(x, k))
    messages = [str(w.message) for w in caught if issubclass(w.category, LuminalFallbackWarning)]
    assert any("a call runs in eager" in m and "outside the range" in m for m in messages), messages


def test_fallback_with_integer_outputs_and_structure(device: str) -> None:
    def fn(x: torch.Tensor, index: torch.Tensor) -> dict[str, torch.Tensor]:
        picked = wiggle(x)[index]
        return {"picked": picked, "count": (picked > 0).sum(), "argmax": x.argmax(-1)}

    x = rand(6, 4, device=device)
    index = torch.randint(0, 6, (9,), device=device)
    output, _ = _compile_warns_once(fn, x, index)
    expected = fn(x, index)
    assert set(output) == set(expected)
    for key in expected:
        assert_same(output[key], expected[key])


def test_explain_names_unsupported_ops_before_running() -> None:
    explanation = luminal.explain(Mixed(), rand(3, 7))
    assert len(explanation.graphs) == 1
    assert list(explanation.unsupported) == ["torch.ops.luminal_test.wiggle.default"]
    assert explanation.graphs[0].ops["torch.ops.aten.addmm.default"] == 2
    assert "runs partly in eager: luminal_test.wiggle.default" in str(explanation)
    assert luminal.compile_count() == 0  # explaining compiles nothing


def test_explain_reports_the_megakernel_decision() -> None:
    row_local = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    explanation = luminal.explain(row_local, rand(6, 5))
    assert explanation.graphs[0].fully_supported
    assert explanation.graphs[0].megakernel is True
    assert "one megakernel per call" in str(explanation)

    def not_row_local(x: torch.Tensor) -> torch.Tensor:
        return x - x.mean(0)  # a column mean mixes rows

    explanation = luminal.explain(not_row_local, rand(6, 5))
    assert explanation.graphs[0].megakernel is False
    assert "batch dimension" in explanation.graphs[0].megakernel_reason


def test_coverage_report_is_consistent() -> None:
    import json
    import subprocess
    import sys

    from luminal import _C

    result = subprocess.run(
        [sys.executable, "-m", "luminal.coverage", "--json"], check=True, capture_output=True, text=True
    )
    report = json.loads(result.stdout)
    assert set(report["supported"]) == set(_C.supported_targets()) | set(_C.passthrough_targets())
    assert "torch.ops.aten.addmm.default" in report["core_supported"]
    parts = set(report["core_supported"]) | set(report["core_missing"]) | set(report["core_excluded"])
    assert parts == set(report["core"])
    assert len(report["core_supported"]) + len(report["core_missing"]) + len(report["core_excluded"]) == len(
        report["core"]
    )
    assert all(reason for reason in report["core_excluded"].values())
    assert not set(report["core_excluded"]) & set(report["supported"])


def test_node_a_translator_refuses_runs_in_eager(device: str) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x + 1) ** y * 3  # integer pow with a tensor exponent: translated only for constants

    x = rand(10, dtype=torch.int64, device=device, low=1, high=5)
    y = rand(10, dtype=torch.int64, device=device, low=0, high=4)
    output, message = _compile_warns_once(fn, x, y)
    assert_same(output, fn(x, y))
    assert "aten.pow.Tensor_Tensor" in message


@pytest.mark.parametrize(
    ("dtype", "name"),
    [
        (torch.uint16, "UINT16"),
        (torch.uint32, "UINT32"),
        (torch.uint64, "UINT64"),
        (torch.float8_e4m3fn, "FLOAT8E4M3FN"),
    ],
    ids=str,
)
def test_input_of_an_unsupported_dtype_runs_in_eager_naming_it(dtype: torch.dtype, name: str) -> None:
    x = torch.tensor([0, 1, 7, 100]).to(dtype)
    output, message = _compile_warns_once(lambda t: t.to(torch.float32) * 2 + 1, x)
    assert torch.equal(output, x.to(torch.float32) * 2 + 1)
    # torch 2.11's export serializer (the GPU machine's) has no uint32/uint64 and fails first.
    assert f"unsupported dtype {name}" in message or "SerializeError: Failed serializing node args_0" in message
