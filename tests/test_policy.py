"""The failure policy and eager semantics around a compiled graph: without strict nothing luminal does
stops a model (what fails runs in eager with one LuminalFallbackWarning; strict raises the same as a
LuminalError), options are validated, every refused node is found in one pass, autograd and
returned views behave as in eager, and stats()/explain() report the share luminal runs."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import luminal
from helpers import assert_raises_when_run, assert_same, capturing_backend, opaque, rand, set_env
from luminal import _C
from luminal.policy import LuminalFallbackWarning


def _compile_and_run(
    fn: Callable[..., Any], *args: Any, options: dict[str, Any] | None = None, **compile_kwargs: Any
) -> tuple[Any, list[str], list[Any]]:
    """Compiles fn with a capturing luminal backend and calls it once; returns the output, the
    fallback warnings' messages and the captured compiled functions."""
    captured: list[Any] = []
    compiled = torch.compile(fn, backend=capturing_backend(captured, options=options), **compile_kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        output = compiled(*args)
    messages = [str(w.message) for w in caught if issubclass(w.category, LuminalFallbackWarning)]
    return output, messages, captured


# ------------------------------------------------------------------------------------------------
# Options
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options, match",
    [
        ({"strict": "no"}, "'strict' must be a bool, got str"),
        ({"strict": 1}, "'strict' must be a bool, got int"),
        ({"megakernel": None}, "'megakernel' must be a bool"),
        ({"min_partition_size": 0}, "'min_partition_size' must be an int >= 1"),
        ({"min_partition_size": True}, "'min_partition_size' must be an int >= 1, got bool"),
        ({"min_partition_size": 2.0}, "'min_partition_size' must be an int >= 1, got float"),
        ({"no_such_option": 1}, r"unknown luminal option\(s\) \['no_such_option'\]"),
    ],
)
def test_options_are_validated(options: dict[str, Any], match: str) -> None:
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    with pytest.raises(luminal.LuminalError, match=match) as raised:
        luminal.luminal_backend(gm, [rand(3)], options)
    assert "known options: strict (bool), megakernel (bool), min_partition_size (int >= 1)" in str(raised.value)
    # Through torch.compile, Dynamo's error carries the same LuminalError.
    with pytest.raises(Exception, match=match) as raised:
        torch.compile(torch.relu, backend="luminal", options=options)(rand(3))
    assert isinstance(getattr(raised.value, "inner_exception", raised.value), luminal.LuminalError)


def test_valid_options_compile() -> None:
    x = rand(4, 3)
    output, messages, _ = _compile_and_run(
        torch.sigmoid, x, options={"strict": True, "megakernel": False, "min_partition_size": 3}
    )
    assert_same(output, torch.sigmoid(x))
    assert messages == []


# ------------------------------------------------------------------------------------------------
# Refusals: typed, all found in one pass, only they run in eager
# ------------------------------------------------------------------------------------------------
def _two_refusals(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # Integer pow with a tensor exponent is refused (translated for constant exponents only); the
    # ops around and between the two refused nodes are supported.
    first = (x + 1) ** y
    second = (first * 3 - 2) ** y
    return second + first.sum()


def test_refused_nodes_are_typed_and_found_in_one_pass() -> None:
    from luminal.export import export_graph

    x, y = rand(7, dtype=torch.int64, low=1, high=3), rand(7, dtype=torch.int64, low=0, high=3)
    gm = torch.fx.symbolic_trace(_two_refusals)
    exported = export_graph(gm, [x, y])
    refused = _C.refused_nodes(exported.archive, list(exported.input_roles))
    assert [(target, "tensor exponent" in reason) for _, target, reason in refused] == [
        ("torch.ops.aten.pow.Tensor_Tensor", True)
    ] * 2
    with pytest.raises(luminal.LuminalUnsupportedError) as raised:
        _C.compile(exported.archive, list(exported.input_roles))
    error = raised.value
    assert isinstance(error, luminal.LuminalError)
    assert (error.node, error.target) == (refused[0][0], "torch.ops.aten.pow.Tensor_Tensor")
    assert "tensor exponent" in error.reason and f"cannot translate node {error.node}" in str(error)


def test_every_refused_node_runs_in_eager_and_only_they(device: str) -> None:
    x, y = (
        rand(9, dtype=torch.int64, low=1, high=3, device=device),
        rand(9, dtype=torch.int64, low=0, high=3, device=device),
    )
    output, messages, captured = _compile_and_run(_two_refusals, x, y)
    assert_same(output, _two_refusals(x, y))
    assert len(messages) == 1
    stats = captured[0].stats()
    assert sorted(n["target"] for n in stats["eager_nodes"].values()) == ["torch.ops.aten.pow.Tensor_Tensor"] * 2
    assert stats["eager_partitions"] == []
    assert len(stats["partitions"]) == 3  # before, between and after the refused nodes
    assert 0.0 < stats["luminal_node_share"] < 1.0
    assert messages[0].count("aten.pow.Tensor_Tensor") == 1  # both nodes, one line with their reason
    assert "tensor exponent" in messages[0] and "3 partition(s) compiled by luminal" in messages[0]


def test_strict_raises_the_refusal() -> None:
    x, y = rand(5, dtype=torch.int64, low=1, high=3), rand(5, dtype=torch.int64, low=0, high=3)
    with pytest.raises(Exception, match="tensor exponent"):
        torch.compile(_two_refusals, backend="luminal", options={"strict": True})(x, y)


def test_partition_refused_alone_is_partitioned_again(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    """A refusal the whole-graph pass missed shows when its partition compiles: that node is taken
    out and the graph partitioned again, so only it runs in eager."""
    real = _C.refused_nodes
    calls = []

    def misses_pow_on_the_whole_graph(archive: bytes, roles: list[str]) -> list[tuple[str, str, str]]:
        calls.append(len(calls))
        found = real(archive, roles)
        return [r for r in found if "pow" not in r[1]] if len(calls) == 1 else found

    monkeypatch.setattr(_C, "refused_nodes", misses_pow_on_the_whole_graph)

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = opaque(x.float())
        return (z + 1).sum() + ((x * 2) ** y).sum()

    x, y = (
        rand(6, dtype=torch.int64, low=1, high=3, device=device),
        rand(6, dtype=torch.int64, low=0, high=3, device=device),
    )
    output, messages, captured = _compile_and_run(fn, x, y)
    assert_same(output, fn(x, y))
    stats = captured[0].stats()
    assert sorted(n["target"] for n in stats["eager_nodes"].values()) == [
        "torch.ops.aten.pow.Tensor_Tensor",
        "torch.ops.luminal_test.opaque.default",
    ]
    assert stats["eager_partitions"] == [] and len(stats["partitions"]) >= 2
    assert len(messages) == 1 and len(calls) >= 2


@pytest.mark.parametrize("stage", ["compile", "first call"])
def test_failing_partition_runs_in_eager_with_its_reason(
    stage: str, monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """A partition that fails for a reason no node is to blame for (a pass or code generation
    error, or a planning error in its first call) runs in eager; the other partitions stay compiled."""
    from luminal import fallback

    set_env(monkeypatch, "LUMINAL_CACHE_DIR", "")  # every export in process: the program is at hand
    real = fallback.compile_exported

    def fails_at_first_call(*args: Any) -> Any:
        raise luminal.LuminalError("code generation failed (simulated)")

    def fails_for_tanh(exported: Any, megakernel: bool = True, eager: Any = None) -> Any:
        if any(node.target == torch.ops.aten.tanh.default for node in exported.program.graph.nodes):
            if stage == "first call":
                real(exported, megakernel, eager)  # compiles fine
                return fails_at_first_call
            raise luminal.LuminalError("code generation failed (simulated)")
        return real(exported, megakernel, eager)

    monkeypatch.setattr(fallback, "compile_exported", fails_for_tanh)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(opaque(torch.relu(x) * 2)) + 1

    x = rand(4, 5, device=device)
    output, messages, captured = _compile_and_run(fn, x)
    assert_same(output, fn(x))
    stats = captured[0].stats()
    assert len(stats["partitions"]) == 1
    (failed,) = stats["eager_partitions"]
    assert "code generation failed (simulated)" in failed["reason"]
    assert "torch.ops.aten.tanh.default" in failed["ops"]
    assert len(messages) == 1 and "code generation failed (simulated)" in messages[0]
    assert "aten.tanh.default" in messages[0] and "luminal_test.opaque.default (opaque)" in messages[0]


# ------------------------------------------------------------------------------------------------
# Whole-graph failures: export, core, first call
# ------------------------------------------------------------------------------------------------
def test_export_failure_runs_the_graph_in_eager(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", "")

    def broken_export(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated export failure")

    monkeypatch.setattr(luminal.export_cache, "export_graph", broken_export)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU()).to(device)
    x = rand(3, 5, device=device)
    output, messages, captured = _compile_and_run(model, x)
    assert_same(output, model(x))
    assert messages == [
        "luminal: this graph runs in eager: torch.export failed: RuntimeError: simulated export failure"
    ]
    assert captured[0].stats()["luminal_node_share"] == 0.0
    assert luminal.compile_count() == 0
    torch._dynamo.reset()
    with pytest.raises(Exception, match="simulated export failure"):
        torch.compile(model, backend="luminal", options={"strict": True})(x)


def test_core_failure_without_a_node_runs_the_graph_in_eager(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    def broken_compile(*args: Any, **kwargs: Any) -> Any:
        raise luminal.LuminalError("simulated planning failure")

    monkeypatch.setattr(_C, "compile", broken_compile)
    x = rand(6, device=device)
    output, messages, _ = _compile_and_run(lambda t: torch.exp(t) * 2, x)
    assert_same(output, torch.exp(x) * 2)
    assert messages == ["luminal: this graph runs in eager: simulated planning failure"]


def test_non_luminal_exception_in_the_core_is_a_fallback_too(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_compile(*args: Any, **kwargs: Any) -> Any:
        raise IndexError("simulated bug")

    monkeypatch.setattr(_C, "compile", broken_compile)
    x = rand(6)
    output, messages, _ = _compile_and_run(torch.cos, x)
    assert_same(output, torch.cos(x))
    assert messages == ["luminal: this graph runs in eager: IndexError: simulated bug"]
    torch._dynamo.reset()
    with pytest.raises(Exception, match="IndexError: simulated bug") as raised:
        torch.compile(torch.cos, backend="luminal", options={"strict": True})(x)
    assert isinstance(getattr(raised.value, "inner_exception", raised.value), luminal.LuminalError)


def test_unexpected_failure_in_luminals_python_runs_in_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("simulated bug in a graph check")

    monkeypatch.setattr(luminal.backend, "alias_plan", broken)
    x = rand(5)
    output, messages, _ = _compile_and_run(torch.tanh, x)
    assert_same(output, torch.tanh(x))
    assert messages == ["luminal: this graph runs in eager: luminal failed: ValueError: simulated bug in a graph check"]
    torch._dynamo.reset()
    with pytest.raises(Exception, match="simulated bug") as raised:
        torch.compile(torch.tanh, backend="luminal", options={"strict": True})(x)
    assert isinstance(getattr(raised.value, "inner_exception", raised.value), luminal.LuminalError)


def test_first_call_failure_runs_in_eager_for_good() -> None:
    """An out-of-range index in the first call: luminal raises, so the graph switches to eager,
    which raises eager's own error; later valid calls run in eager too. CPU only: the CUDA engine
    reports an error its kernels detect in the next call (the first one has then succeeded)."""
    x = rand(5, 3)
    compiled = torch.compile(lambda t, i: t[i] * 2, backend="luminal")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(IndexError, match="out of bounds"):
            compiled(x, torch.tensor([0, 5]))
        good = torch.tensor([4, 1])
        assert_same(compiled(x, good), x[good] * 2)
    messages = [str(w.message) for w in caught if issubclass(w.category, LuminalFallbackWarning)]
    assert len(messages) == 1
    assert messages[0].startswith("luminal: this graph runs in eager: its first call failed: LuminalError")
    assert "out of bounds" in messages[0]


def test_first_call_failure_raises_in_strict_mode() -> None:
    compiled = torch.compile(lambda t, i: t[i] * 2, backend="luminal", options={"strict": True})
    with pytest.raises(luminal.LuminalError, match="out of bounds"):
        compiled(rand(5, 3), torch.tensor([0, 5]))


def test_error_after_a_successful_call_is_raised(device: str) -> None:
    compiled = torch.compile(lambda t, i: t[i] * 2, backend="luminal")
    x = rand(5, 3, device=device)
    good, bad = torch.tensor([1], device=device), torch.tensor([7], device=device)
    assert_same(compiled(x, good), x[good] * 2)
    assert_raises_when_run(compiled, x, bad, match="out of bounds", valid=(x, good))


# ------------------------------------------------------------------------------------------------
# Autograd
# ------------------------------------------------------------------------------------------------
@pytest.mark.grad_mode
def test_grad_mode_runs_in_eager_and_backward_works(device: str) -> None:
    model = torch.nn.Linear(3, 2).to(device)
    reference = torch.nn.Linear(3, 2).to(device)
    reference.load_state_dict(model.state_dict())
    x = rand(4, 3, device=device)
    output, messages, captured = _compile_and_run(model, x)
    assert output.requires_grad
    assert len(messages) == 1 and "requires grad" in messages[0] and "inference-only" in messages[0]
    assert captured[0].stats()["luminal_flop_share"] == 0.0
    output.sum().backward()
    reference(x).sum().backward()
    assert_same(model.weight.grad, reference.weight.grad)
    assert_same(model.bias.grad, reference.bias.grad)


@pytest.mark.grad_mode
def test_input_requiring_grad_runs_in_eager(device: str) -> None:
    x = rand(5, device=device).requires_grad_()
    output, messages, _ = _compile_and_run(lambda t: (t * t).sum(), x)
    assert len(messages) == 1
    output.backward()
    assert_same(x.grad, 2 * x.detach())


@pytest.mark.grad_mode
def test_no_grad_runs_in_luminal_without_warning(device: str) -> None:
    model = torch.nn.Linear(3, 2).to(device)
    x = rand(4, 3, device=device)
    with torch.no_grad():
        output, messages, captured = _compile_and_run(model, x)
        assert_same(output, model(x))
    assert messages == [] and not output.requires_grad
    stats = captured[0].stats()
    assert stats["luminal_node_share"] == 1.0 and stats["luminal_flop_share"] == 1.0


@pytest.mark.grad_mode
def test_grad_mode_raises_in_strict_mode() -> None:
    with pytest.raises(Exception, match="requires grad"):
        torch.compile(torch.nn.Linear(3, 2), backend="luminal", options={"strict": True})(rand(2, 3))


# ------------------------------------------------------------------------------------------------
# Returned views alias the inputs, as in eager
# ------------------------------------------------------------------------------------------------
def test_returned_view_aliases_the_input(device: str) -> None:
    x = rand(3, 4, device=device)
    expected = x.clone()
    output, messages, _ = _compile_and_run(lambda t: t.view(-1), x)
    assert messages == []
    output.add_(1)
    expected.view(-1).add_(1)
    assert_same(x, expected)  # the update through the returned view reached the input


@pytest.mark.parametrize("offset", [0, 2])
def test_strided_view_of_a_non_contiguous_input(offset: int, device: str) -> None:
    base = rand(6, 9, device=device)
    x = base[offset:, 1:].transpose(0, 1)  # non-contiguous, offset into its storage

    def fn(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return t[1:, ::2], t * 2

    output, messages, _ = _compile_and_run(fn, x)
    assert messages == []
    view, doubled = output
    assert_same(view, fn(x)[0])
    assert view.stride() == fn(x)[0].stride() and view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert_same(doubled, x * 2)
    view.mul_(0)
    assert_same(x[1:, ::2], torch.zeros_like(view))
    # A later call with another input of the same layout aliases that input.
    other = rand(6, 9, device=device)
    y = other[offset:, 1:].transpose(0, 1)
    again = torch.compile(fn, backend="luminal")(y)[0]
    assert again.untyped_storage().data_ptr() == other.untyped_storage().data_ptr()
    assert_same(again, y[1:, ::2])


def test_mutated_input_returned_is_the_input(device: str) -> None:
    x = rand(4, 2, device=device)
    expected = x + 1
    output, messages, _ = _compile_and_run(lambda t: t.add_(1), x)
    assert messages == [] and output is x
    assert_same(x, expected)


def test_view_of_a_fresh_output_aliases_it(device: str) -> None:
    def fn(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = t + 1
        return u, u.view(-1)

    x = rand(3, 5, device=device)
    (base, view), messages, _ = _compile_and_run(fn, x)
    assert messages == []
    base.add_(1)
    assert_same(view, (x + 2).view(-1))


def test_dynamic_view_aliases_the_input(device: str) -> None:
    compiled = torch.compile(lambda t: t[1:].transpose(0, 1), backend="luminal", dynamic=True)
    for rows in (4, 7, 3):
        x = rand(rows, 5, device=device)
        output = compiled(x)
        assert_same(output, x[1:].transpose(0, 1))
        assert output.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        assert output.stride() == x[1:].transpose(0, 1).stride()
    assert luminal.compile_count() == 1


def _assert_aliases(output: torch.Tensor, expected: torch.Tensor) -> None:
    """The same dtype, layout and memory as eager's view, and the same bits."""
    assert (output.dtype, output.shape, output.stride()) == (expected.dtype, expected.shape, expected.stride())
    assert output.data_ptr() == expected.data_ptr()
    assert torch.equal(output.contiguous().view(torch.uint8), expected.contiguous().view(torch.uint8))


@pytest.mark.parametrize("offset", [0, 1])
def test_a_view_as_another_dtype_aliases_the_input(offset: int, device: str) -> None:
    """x.view(int32) / x[1:].view(int16) keep the input's memory under a new dtype (as_strided,
    which keeps the source's dtype, had returned float32 values or raised)."""

    def fn(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return t.view(torch.int32), t[1:].view(torch.int16), t * 2

    x = rand(5, 8, device=device)[offset:]
    compiled = torch.compile(fn, backend="luminal")
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LuminalFallbackWarning)  # where view(dtype) runs is not the point
            words, halves, doubled = compiled(x)
        expected = fn(x)
        _assert_aliases(words, expected[0])
        _assert_aliases(halves, expected[1])
        assert_same(doubled, expected[2])
        words.bitwise_xor_(1)  # a write through the returned view reaches the input
        assert torch.equal(x.view(torch.int32), words)


def test_view_as_real_of_a_complex_input_aliases_it(device: str) -> None:
    def fn(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.view_as_real(z), torch.view_as_real(z[1:]) * 2

    z = torch.polar(rand(4, 3, device=device, low=0.5), rand(4, 3, device=device))
    (pairs, doubled), messages, _ = _compile_and_run(fn, z, options={"strict": True})
    assert messages == []
    _assert_aliases(pairs, torch.view_as_real(z))
    assert_same(doubled, fn(z)[1])
    pairs.mul_(-1)
    assert torch.equal(torch.view_as_real(z), pairs)


def test_fresh_outputs_do_not_fall_back(device: str) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.GELU()).to(device)
    x = rand(2, 6, device=device)
    output, messages, captured = _compile_and_run(model, x)
    assert messages == [] and type(captured[0]).__name__ == "CompiledFunction"
    assert_same(output, model(x))


# ------------------------------------------------------------------------------------------------
# Repros: BatchNorm with dynamic shapes, overlapping mutated views
# ------------------------------------------------------------------------------------------------
def test_batchnorm_dynamic_with_scalar_attributes(device: str) -> None:
    model = torch.nn.BatchNorm1d(4).eval().to(device)
    model.running_mean.copy_(rand(4, device=device))
    model.running_var.copy_(rand(4, low=0.5, high=2.0, device=device))
    compiled = torch.compile(model, backend="luminal", dynamic=True)
    for batch in (8, 5, 3):
        x = rand(batch, 4, device=device)
        assert_same(compiled(x), model(x))
    assert luminal.compile_count() == 1


def test_specialized_scalar_is_checked_per_call() -> None:
    """Dynamo passes BatchNorm's eps as a 0-d tensor; luminal compiles its value in, so a call
    with another value must run in eager (and say so) rather than use the old one."""
    captured: list[Any] = []
    model = torch.nn.BatchNorm1d(3).eval()
    arguments: list[Any] = []

    def backend(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        arguments.extend(inputs)
        return capturing_backend(captured)(gm, inputs)

    torch.compile(model, backend=backend, dynamic=True)(rand(6, 3))
    scalars = [k for k, a in enumerate(arguments) if isinstance(a, torch.Tensor) and a.dim() == 0]
    (eps,) = [k for k in scalars if arguments[k].item() == model.eps]
    (data,) = [k for k, a in enumerate(arguments) if isinstance(a, torch.Tensor) and a.shape == (6, 3)]
    arguments[eps] = torch.tensor(0.5, dtype=torch.float64)
    x = rand(6, 3)
    arguments[data] = x
    with pytest.warns(LuminalFallbackWarning, match=r"compiled for scalar argument \d+ = 1e-05.*passes 0.5"):
        (output,) = captured[0](*arguments)
    model.eps = 0.5
    assert_same(output, model(x))


def test_overlapping_mutated_inputs_run_in_eager(device: str) -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a.mul_(2)
        b.add_(1)
        return a.sum() + b.sum()

    base = rand(10, device=device)
    expected_base = base.clone()
    expected = fn(expected_base[:6], expected_base[2:])
    output, messages, _ = _compile_and_run(fn, base[:6], base[2:])
    assert_same(output, expected)
    assert_same(base, expected_base)
    assert len(messages) == 1 and "share memory" in messages[0]


def test_inputs_that_overlap_only_in_a_later_call_run_that_call_in_eager(device: str) -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a.mul_(2)
        return a + b

    compiled = torch.compile(fn, backend="luminal")
    a, b = rand(6, device=device), rand(6, device=device)
    expected_a = a * 2
    assert_same(compiled(a, b), expected_a + b)
    assert_same(a, expected_a)
    base = rand(8, device=device)
    reference = base.clone()
    expected = fn(reference[:6], reference[2:])
    with pytest.warns(LuminalFallbackWarning, match="updated in place and shares memory"):
        output = compiled(base[:6], base[2:])
    assert_same(output, expected)
    assert_same(base, reference)


def test_an_input_written_in_place_whose_elements_share_memory_runs_in_eager(device: str) -> None:
    """An expanded input written in place: eager refuses it ("more than one element of the
    written-to tensor refers to a single memory location"); the compiled graph used to write it
    and return values. A view whose strides overlap (as_strided) runs in eager too: eager writes it
    in its own order."""

    def fn(a: torch.Tensor) -> torch.Tensor:
        a.mul_(2)
        return a.sum(-1)

    compiled = torch.compile(fn, backend="luminal")
    plain = rand(4, 3, device=device)
    assert_same(compiled(plain.clone()), fn(plain.clone()))
    expanded = rand(4, 1, device=device).expand(4, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        fn(expanded)
    with pytest.warns(LuminalFallbackWarning, match="its elements may share memory"):
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            compiled(expanded)
    base = rand(10, device=device)
    reference = base.clone()
    expected = fn(reference.as_strided((4, 3), (2, 1)))
    with pytest.warns(LuminalFallbackWarning, match="its elements may share memory"):
        output = compiled(base.as_strided((4, 3), (2, 1)))
    assert_same(output, expected)
    assert_same(base, reference)


def test_overlapping_inputs_that_are_only_read_compile(device: str) -> None:
    base = rand(10, device=device)
    output, messages, _ = _compile_and_run(lambda a, b: a * b.sum(), base[:6], base[2:])
    assert messages == []
    assert_same(output, base[:6] * base[2:].sum())


# ------------------------------------------------------------------------------------------------
# Shares of nodes and FLOPs
# ------------------------------------------------------------------------------------------------
def test_flop_share_weighs_matmuls(device: str) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)).to(device)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return opaque(model(x))

    x = rand(32, 64, device=device)
    output, messages, captured = _compile_and_run(fn, x)
    assert_same(output, fn(x))
    stats = captured[0].stats()
    # The two matmuls (2 * 32 * 64 * 64 FLOPs each) dominate the one eager op.
    assert stats["luminal_flop_share"] > 0.95 > stats["luminal_node_share"]
    assert f"{stats['luminal_flop_share']:.1%}" in messages[0]


def test_explain_reports_shares_and_reasons() -> None:
    x, y = rand(5, dtype=torch.int64, low=1, high=3), rand(5, dtype=torch.int64, low=0, high=3)
    explanation = luminal.explain(_two_refusals, x, y)
    (graph,) = explanation.graphs
    assert graph.unsupported == {"torch.ops.aten.pow.Tensor_Tensor": list(graph.reasons)}
    assert len(graph.reasons) == 2 and all("tensor exponent" in r for r in graph.reasons.values())
    assert 0.0 < graph.luminal_node_share < 1.0
    text = str(explanation)
    assert f"luminal runs {graph.luminal_node_share:.0%} of the ops" in text and "tensor exponent" in text


@pytest.mark.grad_mode
def test_explain_reports_graphs_that_would_run_in_eager() -> None:
    explanation = luminal.explain(torch.nn.Linear(3, 2), rand(2, 3))
    assert "requires grad" in explanation.graphs[0].eager_reason
    assert not explanation.graphs[0].fully_supported
    assert "runs in eager: grad mode is on" in str(explanation)


def test_overlap_detection_by_byte_extent() -> None:
    from luminal.guards import overlapping_inputs

    base = rand(20)
    disjoint = [base[:5], base[5:10], base[10:]]
    assert overlapping_inputs(disjoint) is None
    assert overlapping_inputs([base[:6], base[5:10]]) == (1, 0)
    assert overlapping_inputs([base[:6], rand(3), base[5:10]], candidates=[1]) is None  # only 1 matters
    assert overlapping_inputs([base[:6], rand(3), base[5:10]], candidates=[2]) == (2, 0)
    # Interleaved views share no element but count as overlapping (conservative: eager runs).
    assert overlapping_inputs([base[0::2], base[1::2]]) is not None
    assert overlapping_inputs([base[:0], base]) is None  # empty tensors touch nothing
    assert overlapping_inputs([base, 3, None]) is None
