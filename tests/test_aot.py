"""luminal.compile: modules compiled ahead of time, called with no Dynamo, saved and loaded again.
Every result is compared with eager on fresh random inputs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from torch.export import Dim

import luminal
from helpers import Mixed, assert_same, needs_new_pt2_save, non_contiguous, rand, set_env
from luminal.policy import LuminalFallbackWarning

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "dlrm"))
sys.path.insert(0, str(ROOT / "tests" / "models"))
from model import DLRM, MINI, make_inputs  # noqa: E402
from zoo import ZOO, available  # noqa: E402


def mlp(device: str) -> torch.nn.Module:
    layers = [torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)]
    return torch.nn.Sequential(*layers).to(device).eval()


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(6)
        self.head = torch.nn.Linear(6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.norm(self.conv(x)))
        return self.head(y.mean(dim=(2, 3)))


def randomize(model: torch.nn.Module) -> torch.nn.Module:
    """BatchNorm statistics that are not the identity."""
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-1, 1)
            module.running_var.uniform_(0.5, 2)
    return model


# ------------------------------------------------------------------------------------------------
# Equivalence
# ------------------------------------------------------------------------------------------------
def test_mlp_matches_eager(device: str) -> None:
    model = mlp(device)
    compiled = luminal.compile(model, (rand(5, 8, device=device),), options={"strict": True})
    for _ in range(2):  # the first call and the fast path
        x = rand(5, 8, device=device)
        assert_same(compiled(x), model(x))
    aot = compiled.stats()["aot"]
    assert (aot["loaded"], aot["exports"], aot["fast_path"]) == (False, 1, True)


def test_non_contiguous_and_size_one_inputs(device: str) -> None:
    model = mlp(device)
    compiled = luminal.compile(model, (rand(1, 8, device=device),), options={"strict": True})
    x = rand(1, 8, device=device)
    assert_same(compiled(x), model(x))
    wide = luminal.compile(model, (rand(6, 8, device=device),), options={"strict": True})
    for _ in range(2):
        y = non_contiguous(rand(6, 8, device=device))
        assert not y.is_contiguous()
        assert_same(wide(y), model(y))


def test_conv_net_matches_eager(device: str) -> None:
    model = randomize(ConvNet()).to(device).eval()
    compiled = luminal.compile(model, (rand(2, 3, 9, 7, device=device),), options={"strict": True})
    for _ in range(2):
        x = rand(2, 3, 9, 7, device=device)
        assert_same(compiled(x), model(x), tolerance_scale=8)


def test_mini_dlrm_matches_eager(device: str) -> None:
    model = DLRM(MINI).to(device).eval()
    compiled = luminal.compile(model, make_inputs(MINI, 16, device=device), options={"strict": True})
    for seed in range(2):
        inputs = make_inputs(MINI, 16, device=device, generator=torch.Generator().manual_seed(seed))
        assert_same(compiled(*inputs), model(*inputs), tolerance_scale=4)
    assert compiled.stats()["aot"]["fast_path"]  # nested lists of tensors stay on the one C++ call


class Logits(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, attention_mask=mask, use_cache=False).logits


@pytest.mark.skipif(not available("transformers"), reason="transformers is not installed")
def test_tiny_hf_model_matches_eager(device: str) -> None:
    zoo = next(entry for entry in ZOO if entry.name == "llama")
    model, forward, inputs = zoo.build(device, torch.float32)
    compiled = luminal.compile(Logits(model), inputs, options={"strict": True})
    assert_same(compiled(*inputs), forward(*inputs), tolerance_scale=zoo.tolerance_scale)
    assert compiled.stats()["aot"]["exports"] == 1


def test_structured_outputs_and_arguments(device: str) -> None:
    def function(pair: tuple[torch.Tensor, torch.Tensor], named: dict[str, torch.Tensor]) -> dict[str, object]:
        return {"sum": pair[0] + named["w"], "list": [pair[1] * 2, pair[0].sum()]}

    example = ((rand(3, 4, device=device), rand(2, device=device)), {"w": rand(3, 4, device=device)})
    compiled = luminal.compile(function, example, options={"strict": True})
    for _ in range(2):
        args = ((rand(3, 4, device=device), rand(2, device=device)), {"w": rand(3, 4, device=device)})
        assert_same(compiled(*args)["list"], function(*args)["list"])
        assert_same(compiled(*args)["sum"], function(*args)["sum"])


def test_buffers_updated_in_place_behave_like_eager(device: str) -> None:
    class Counter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("total", torch.zeros(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.total.add_(x.sum(0))
            return x * self.total

    model, reference = Counter().to(device), Counter().to(device)
    compiled = luminal.compile(model, (rand(3, 4, device=device),), options={"strict": True})
    assert torch.equal(model.total, torch.zeros(4, device=device))  # compiling ran nothing
    for _ in range(3):
        x = rand(3, 4, device=device)
        assert_same(compiled(x), reference(x))
        assert_same(model.total, reference.total)


def test_inputs_updated_in_place_behave_like_eager(device: str) -> None:
    def step(cache: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        cache.mul_(0.5).add_(update)
        return cache.sum(0)

    compiled = luminal.compile(step, (rand(4, 3, device=device), rand(4, 3, device=device)), options={"strict": True})
    cache, update = rand(4, 3, device=device), rand(4, 3, device=device)
    reference = cache.clone()
    for _ in range(3):
        expected = step(reference, update)
        assert_same(compiled(cache, update), expected)
        assert_same(cache, reference)
    with pytest.raises(luminal.LuminalError, match="shares memory"):  # strict: no eager run
        compiled(cache, cache)
    lenient = luminal.compile(step, (rand(4, 3, device=device), rand(4, 3, device=device)))
    lenient(rand(4, 3, device=device), rand(4, 3, device=device))
    reference = cache.clone()
    with pytest.warns(LuminalFallbackWarning, match="shares memory"):
        assert_same(lenient(cache, cache), step(reference, reference))
    assert_same(cache, reference)


def test_repeated_calls_see_inputs_changed_since_the_last(device: str) -> None:
    """A repeated call re-checks only the inputs that changed since the last one (module.cpp's
    BoundCall): a tensor transposed in place (the same memory, other strides), a tensor given other
    memory (`.data =`), and inputs moved onto the memory of one updated in place are all seen."""

    def step(cache: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        cache.mul_(0.5).add_(update)
        return cache.sum(0) * update[0]

    compiled = luminal.compile(step, (rand(4, 4, device=device), rand(4, 4, device=device)), options={"strict": True})
    cache, update = rand(4, 4, device=device), rand(4, 4, device=device)
    reference = cache.clone()

    def check() -> None:
        expected = step(reference, update)
        assert_same(compiled(cache, update), expected)
        assert_same(cache, reference)

    check()
    check()  # the fast path's repeated call
    update.t_()
    check()
    update.data = rand(4, 4, device=device)
    check()
    cache.data = rand(4, 4, device=device)
    reference = cache.clone()
    check()
    with pytest.raises(luminal.LuminalError, match="shares memory"):
        compiled(cache, cache[0:4])  # the input only read moved onto the one updated in place
    check()
    with pytest.raises(luminal.LuminalError, match="shares memory"):
        compiled(update, update)  # the input updated in place moved onto the one only read
    assert_same(cache, reference)
    check()


# ------------------------------------------------------------------------------------------------
# Guards: clear errors, dynamic shapes
# ------------------------------------------------------------------------------------------------
def test_wrong_dtype_shape_or_structure_raises_clearly(device: str) -> None:
    compiled = luminal.compile(mlp(device), (rand(5, 8, device=device),), options={"strict": True})
    compiled(rand(5, 8, device=device))
    with pytest.raises(luminal.LuminalError, match=r"argument \[0\] must have dtype torch.float32, got float64"):
        compiled(rand(5, 8, device=device, dtype=torch.float64))
    with pytest.raises(luminal.LuminalError, match=r"argument \[0\] dimension 0 must be 5, got float32\[7, 8\]"):
        compiled(rand(7, 8, device=device))
    with pytest.raises(luminal.LuminalError, match=r"argument \[0\] must have 2 dimensions"):
        compiled(rand(5, 8, 1, device=device))
    with pytest.raises(luminal.LuminalError, match="structure"):
        compiled(rand(5, 8, device=device), rand(5, 8, device=device))
    with pytest.raises(luminal.LuminalError, match=r"arguments have the structure.*list"):
        compiled([rand(5, 8, device=device)])
    other = "meta" if device == "cpu" else "cpu"
    with pytest.raises(
        luminal.LuminalError, match=rf"argument \[0\] must be on {device}.*got float32\[5, 8\] on {other}"
    ):
        compiled(torch.randn(5, 8, device=other))


def test_wrong_input_on_first_call_raises_not_eager(device: str) -> None:
    model = mlp(device)
    compiled = luminal.compile(model, (rand(5, 8, device=device),))
    with pytest.raises(luminal.LuminalError, match=r"dimension 1 must be 8"):
        compiled(rand(5, 9, device=device))
    x = rand(5, 8, device=device)
    assert_same(compiled(x), model(x))
    assert compiled.stats()["aot"]["fast_path"]


def test_dynamic_batch(device: str) -> None:
    model = DLRM(MINI).to(device).eval()
    batch = Dim("batch", min=2, max=1024)
    example = make_inputs(MINI, 8, device=device)
    tables = len(MINI.tables)
    shapes = ({0: batch}, [{0: batch}] * tables, [{0: batch}] * tables)
    compiled = luminal.compile(model, example, dynamic_shapes=shapes, options={"strict": True})
    for size in (8, 3, 33):
        inputs = make_inputs(MINI, size, device=device)
        assert_same(compiled(*inputs), model(*inputs), tolerance_scale=4)
    with pytest.raises(luminal.LuminalError, match=r"= 1 is outside the range \[2, 1024\]"):
        compiled(*make_inputs(MINI, 1, device=device))
    small = mlp(device)
    by_name = luminal.compile(
        small, (rand(4, 8, device=device),), dynamic_shapes={"input": {0: Dim("n")}}, options={"strict": True}
    )
    y = rand(9, 8, device=device)
    assert_same(by_name(y), small(y))
    with pytest.raises(luminal.LuminalError, match=r"dimension 1 must be 8"):
        by_name(rand(9, 3, device=device))


# ------------------------------------------------------------------------------------------------
# Parameters bound by pointer
# ------------------------------------------------------------------------------------------------
def test_replaced_parameters_are_seen(device: str) -> None:
    model = mlp(device)
    compiled = luminal.compile(model, (rand(5, 8, device=device),), options={"strict": True})
    x = rand(5, 8, device=device)
    assert_same(compiled(x), model(x))
    model[0].weight = torch.nn.Parameter(rand(16, 8, device=device))  # a new Parameter object
    assert_same(compiled(x), model(x))
    model[2].bias.data = rand(4, device=device)  # .data swapped: a new pointer, same object
    assert_same(compiled(x), model(x))
    with torch.no_grad():
        model[2].weight.copy_(rand(4, 16, device=device))  # in place: the same pointer
    assert_same(compiled(x), model(x))
    model[0] = torch.nn.Linear(8, 16).to(device).eval()  # a new submodule (in the mode compiled for)
    assert_same(compiled(x), model(x))
    model[0].weight = torch.nn.Parameter(rand(16, 9, device=device))
    with pytest.raises(luminal.LuminalError, match=r"parameter '0.weight' dimension 1 must be 8.*compile again"):
        compiled(x)


def test_parameter_changed_in_dtype_is_refused(device: str) -> None:
    model = mlp(device)
    compiled = luminal.compile(model, (rand(5, 8, device=device),), options={"strict": True})
    x = rand(5, 8, device=device)
    compiled(x)
    model[0].weight.data = model[0].weight.data.double()
    with pytest.raises(luminal.LuminalError, match=r"parameter '0.weight'.*float32.*float64"):
        compiled(x)


_OFFSETS = [torch.zeros(4)]  # a tensor the forward reads from a list: export lifts it as a constant


class PlainTensors(torch.nn.Module):
    """Tensors that are neither parameters nor buffers: export lifts them as constants."""

    def __init__(self, device: str) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.scale = rand(4, device=device)  # a plain attribute
        self.inner = torch.nn.Module()
        self.inner.shift = rand(4, device=device)  # a submodule's plain attribute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale + self.inner.shift + _OFFSETS[0]


def test_plain_tensors_the_model_reads_are_bound_by_pointer(device: str) -> None:
    """Updated in place or assigned anew between calls, they are what the next call reads, as in
    eager. They used to be baked into the program at compile time: silent wrong output."""
    _OFFSETS[0] = torch.zeros(4, device=device)
    model = PlainTensors(device).to(device).eval()
    compiled = luminal.compile(model, (rand(3, 4, device=device),), options={"strict": True})
    x = rand(3, 4, device=device)
    assert_same(compiled(x), model(x))
    updates = [
        lambda: model.scale.mul_(3),
        lambda: model.inner.shift.add_(1),
        lambda: _OFFSETS[0].add_(2),
        lambda: setattr(model, "scale", rand(4, device=device)),
        lambda: setattr(model.inner, "shift", rand(4, device=device)),
    ]
    try:
        for update in updates:
            update()
            assert_same(compiled(x), model(x))
        model.scale = rand(5, device=device)
        with pytest.raises(luminal.LuminalError, match=r"constant 'scale'.*\[4\].*compile again"):
            compiled(x)
    finally:
        _OFFSETS[0] = torch.zeros(4)


def test_a_package_carries_the_plain_tensors(device: str, tmp_path: Path) -> None:
    _OFFSETS[0] = torch.zeros(4, device=device)
    model = PlainTensors(device).to(device).eval()
    compiled = luminal.compile(model, (rand(3, 4, device=device),), options={"strict": True})
    x = rand(3, 4, device=device)
    expected = compiled(x)
    compiled.save(tmp_path / "plain.luminal")
    model.scale.mul_(2)  # the package holds the values at saving
    _OFFSETS[0] = torch.zeros(4)
    assert_same(luminal.load(tmp_path / "plain.luminal")(x), expected)


def test_a_call_under_another_autocast_state_runs_in_eager(device: str) -> None:
    """Under autocast eager computes the linear layers in bfloat16; the graph keeps the dtypes it
    was exported with. It used to return float32 silently where eager returns bfloat16."""
    model = mlp(device)
    compiled = luminal.compile(model, (rand(5, 8, device=device),))
    x = rand(5, 8, device=device)
    assert_same(compiled(x), model(x))
    with torch.autocast(device, dtype=torch.bfloat16):
        with pytest.warns(LuminalFallbackWarning, match=r"autocast \(\w+\) was off when the module was compiled"):
            output = compiled(x)
        assert_same(output, model(x))
        assert output.dtype == torch.bfloat16
        under = luminal.compile(model, (rand(5, 8, device=device),))  # compiled under autocast: runs there
        assert_same(under(x), model(x), tolerance_scale=2)
    with pytest.warns(LuminalFallbackWarning, match="was on when the module was compiled"):
        assert_same(under(x), model(x))
    strict = luminal.compile(model, (rand(5, 8, device=device),), options={"strict": True})
    with torch.autocast(device, dtype=torch.bfloat16), pytest.raises(luminal.LuminalError, match="compile it again"):
        strict(x)


@pytest.mark.grad_mode
def test_grad_mode_with_trainable_parameters_runs_in_eager() -> None:
    model = mlp("cpu")
    with torch.no_grad():
        compiled = luminal.compile(model, (rand(5, 8),))
    x = rand(5, 8)
    with pytest.warns(LuminalFallbackWarning, match="inference-only"):
        out = compiled(x)
    assert out.requires_grad
    out.sum().backward()
    assert model[0].weight.grad is not None


# ------------------------------------------------------------------------------------------------
# Unsupported ops: the backend's policy
# ------------------------------------------------------------------------------------------------


def test_unsupported_op_runs_in_eager_with_one_warning(device: str) -> None:
    model = Mixed().to(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = luminal.compile(model, (rand(5, 7, device=device),))
        for _ in range(2):
            x = rand(5, 7, device=device)
            assert_same(compiled(x), model(x))
    fallback = [str(w.message) for w in caught if issubclass(w.category, LuminalFallbackWarning)]
    assert len(fallback) == 1 and "luminal_test.wiggle.default" in fallback[0], fallback
    assert compiled.stats()["luminal_node_share"] < 1.0
    with pytest.raises(luminal.LuminalError, match="only a module luminal runs whole can be saved"):
        compiled.save("unused.luminal")


def test_unsupported_op_strict_raises(device: str) -> None:
    with pytest.raises(luminal.LuminalError, match="wiggle"):
        luminal.compile(Mixed().to(device), (rand(5, 7, device=device),), options={"strict": True})


def test_unknown_option_raises() -> None:
    with pytest.raises(luminal.LuminalError, match="unknown luminal option"):
        luminal.compile(mlp("cpu"), (rand(5, 8),), options={"fast": True})


# ------------------------------------------------------------------------------------------------
# Packages
# ------------------------------------------------------------------------------------------------
LOAD_AND_RUN = """
import sys, torch
import luminal

def no_export(*args, **kwargs):
    raise AssertionError("a loaded package must not export")

torch.export.export = no_export
package, inputs, outputs = sys.argv[1:4]
# The saving process's TF32 settings (conftest turns cuDNN's off): tuned choices are keyed by them.
torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = (flag == "1" for flag in sys.argv[5:7])
module = luminal.load(package)
args = torch.load(inputs, weights_only=True)
with torch.no_grad():
    results = [module(*args) for _ in range(2)]
torch.save(results, outputs)
stats = module.stats()
aot = stats["aot"]
assert (aot["loaded"], aot["exports"], aot["fast_path"]) == (True, 0, True), stats
assert luminal.aot.export_count() == 0
# The package's kernels (and, on CUDA, tuned choices) were installed into the fresh cache: read, none built.
written = [name for name, was_written in luminal._C.cache_journal_since(0) if was_written]
assert aot["cache_entries_written"] == 0, (aot, written)
read = [name for name, was_written in luminal._C.cache_journal_since(0) if not was_written]
# Read from the package, not necessarily all of it: on an H200 the saving process's package held a
# fourth module that a fresh process taking the cached choices never loads (2 of 4 full-suite runs,
# with 15 test processes sharing the GPU). What matters is above: nothing built, nothing measured.
# (A failure lists what was read: the package's entries are listed by the test's own message.)
assert 1 <= aot["cache_entries_read"] <= int(sys.argv[4]), (aot, read)
if "cuda" in stats:
    # The package carried the tuned choices: nothing is measured again.
    assert stats["cuda"]["choice_cache_misses"] == 0, stats["cuda"]
print("ok", stats["engine"])
"""


def _cache_entry_names(package: Path) -> list[str]:
    import zipfile

    with zipfile.ZipFile(package) as archive:
        return [name for name in archive.namelist() if name.startswith("luminal_module/cache/")]


def _cache_entries(package: Path) -> int:
    return len(_cache_entry_names(package))


def _run_fresh(tmp_path: Path, package: Path, inputs: object) -> list[object]:
    torch.save(inputs, tmp_path / "inputs.pt")
    script = tmp_path / "load_and_run.py"
    script.write_text(textwrap.dedent(LOAD_AND_RUN))
    env = {**__import__("os").environ, "LUMINAL_CACHE_DIR": str(tmp_path / "fresh-cache")}
    result = subprocess.run(
        [sys.executable, str(script), str(package), str(tmp_path / "inputs.pt"), str(tmp_path / "outputs.pt")]
        + [str(_cache_entries(package))]
        + [str(int(torch.backends.cuda.matmul.allow_tf32)), str(int(torch.backends.cudnn.allow_tf32))],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    entries = _cache_entry_names(package)
    assert result.returncode == 0, f"{result.stdout}{result.stderr}\nthe package's cache entries: {entries}"
    assert result.stdout.startswith("ok")
    return torch.load(tmp_path / "outputs.pt", weights_only=True)


def _assert_identical(actual: object, expected: object) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        assert torch.equal(actual.cpu().view(-1).view(torch.uint8), expected.cpu().reshape(-1).view(torch.uint8))
        return
    assert type(actual) is type(expected)
    assert len(actual) == len(expected)  # type: ignore[arg-type]
    for a, e in zip(actual, expected, strict=True):  # type: ignore[call-overload]
        _assert_identical(a, e)


def test_save_and_load_in_a_fresh_process_is_bit_identical(device: str, tmp_path: Path) -> None:
    model = DLRM(MINI).to(device).eval()
    compiled = luminal.compile(model, make_inputs(MINI, 16, device=device), options={"strict": True})
    inputs = make_inputs(MINI, 16, device=device)
    expected = [compiled(*inputs) for _ in range(2)]
    assert_same(expected[0], model(*inputs), tolerance_scale=4)
    package = tmp_path / "dlrm.luminal"
    compiled.save(package)
    if luminal._C.has_cuda_engine():  # LUMINAL_CHECK_CUDA_CODEGEN (conftest) compiles kernels even on the CPU
        assert _cache_entries(package) >= 1
    del model, compiled  # the package stands alone
    _assert_identical(_run_fresh(tmp_path, package, inputs), expected)


def test_loaded_package_checks_inputs_and_keeps_structure(device: str, tmp_path: Path) -> None:
    def function(x: torch.Tensor, pair: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return x @ pair[0], pair[1].relu()

    example = (rand(3, 4, device=device), [rand(4, 2, device=device), rand(5, device=device)])
    compiled = luminal.compile(function, example, dynamic_shapes=({0: Dim("rows")}, None), options={"strict": True})
    compiled.save(tmp_path / "f.luminal")
    loaded = luminal.load(tmp_path / "f.luminal")
    assert isinstance(loaded, luminal.LuminalModule)
    args = (rand(6, 4, device=device), [rand(4, 2, device=device), rand(5, device=device)])
    assert_same(loaded(*args), function(*args))
    with pytest.raises(luminal.LuminalError, match=r"argument \[1\]\[1\] dimension 0 must be 5"):
        loaded(args[0], [args[1][0], rand(6, device=device)])
    assert loaded.stats()["aot"]["loaded"]


@needs_new_pt2_save
def test_load_still_compiles_pt2_files(tmp_path: Path) -> None:
    model = mlp("cpu")
    x = rand(3, 8)
    torch.export.save(torch.export.export(model, (x,)).run_decompositions(), tmp_path / "mlp.pt2")
    program = luminal.load(tmp_path / "mlp.pt2")
    assert not isinstance(program, luminal.LuminalModule)
    assert_same(program(x)[0], model(x))


def test_saving_writes_one_zip_with_program_state_and_meta(tmp_path: Path) -> None:
    import json
    import zipfile

    compiled = luminal.compile(mlp("cpu"), (rand(5, 8),), options={"strict": True, "megakernel": False})
    compiled.save(tmp_path / "m.luminal")
    with zipfile.ZipFile(tmp_path / "m.luminal") as package:
        names = set(package.namelist())
        meta = json.loads(package.read("luminal_module/meta.json"))
    state = {"luminal_module/state.json", *(f"luminal_module/state/{k}.bin" for k in range(4))}
    assert {"luminal_module/format", "luminal_module/program.pt2", *state} <= names
    assert "luminal_module/state.pt" not in names  # torch-free: the C++ runner reads packages
    assert meta["format"] == "luminal-module 2"
    assert meta["state_names"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert meta["options"] == {"strict": True, "megakernel": False, "min_partition_size": 1}
    assert meta["input_specs"][0]["shape"] == [5, 8]


def _rewrite_meta(source: Path, target: Path, change: dict[str, object]) -> None:
    import json
    import zipfile

    with zipfile.ZipFile(source) as package, zipfile.ZipFile(target, "w") as out:
        for name in package.namelist():
            data = package.read(name)
            if name == "luminal_module/meta.json":
                data = json.dumps({**json.loads(data), **change}).encode()
            out.writestr(name, data)


def _rewrite_entries(source: Path, target: Path, change: dict[str, bytes | None]) -> None:
    """A copy of the package with entries replaced (bytes), removed (None) or added."""
    import zipfile

    with zipfile.ZipFile(source) as package, zipfile.ZipFile(target, "w") as out:
        for name in package.namelist():
            if name not in change:
                out.writestr(name, package.read(name))
        for name, data in change.items():
            if data is not None:
                out.writestr(name, data)


def test_packages_of_format_1_with_a_torch_state_still_load(tmp_path: Path) -> None:
    import io
    import json
    import zipfile

    model = mlp("cpu")
    compiled = luminal.compile(model, (rand(5, 8),), options={"strict": True})
    compiled.save(tmp_path / "m.luminal")
    state = io.BytesIO()
    torch.save({name: t.detach() for name, t in model.state_dict().items()}, state)
    with zipfile.ZipFile(tmp_path / "m.luminal") as package:
        meta = json.loads(package.read("luminal_module/meta.json"))
        removed: dict[str, bytes | None] = {n: None for n in package.namelist() if n.startswith("luminal_module/state")}
    meta["format"] = "luminal-module 1"
    _rewrite_entries(
        tmp_path / "m.luminal",
        tmp_path / "old.luminal",
        {**removed, "luminal_module/state.pt": state.getvalue(), "luminal_module/meta.json": json.dumps(meta).encode()},
    )
    x = rand(5, 8)
    assert torch.equal(luminal.load(tmp_path / "old.luminal")(x), compiled(x))


class TransposedWeight(torch.nn.Module):
    """A parameter whose strides are not row-major: the package keeps them."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(6, 4).t())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


def test_package_state_keeps_strides_and_refuses_bad_entries(tmp_path: Path) -> None:
    import json
    import zipfile

    model = TransposedWeight()
    compiled = luminal.compile(model, (rand(3, 4),), options={"strict": True})
    compiled.save(tmp_path / "m.luminal")
    loaded = luminal.load(tmp_path / "m.luminal")
    assert isinstance(loaded, luminal.LuminalModule)
    assert loaded._state[0].stride() == model.weight.stride() == (1, 4)
    x = rand(3, 4)
    assert torch.equal(loaded(x), compiled(x))
    with zipfile.ZipFile(tmp_path / "m.luminal") as package:
        index = json.loads(package.read("luminal_module/state.json"))
    short = {"luminal_module/state/0.bin": bytes(12)}
    _rewrite_entries(tmp_path / "m.luminal", tmp_path / "short.luminal", short)
    with pytest.raises(luminal.LuminalError, match="needs 96 bytes, its entry holds 12"):
        luminal.load(tmp_path / "short.luminal")
    index["tensors"][0]["dtype"] = "float64"
    wrong = {"luminal_module/state.json": json.dumps(index).encode()}
    _rewrite_entries(tmp_path / "m.luminal", tmp_path / "dtype.luminal", wrong)
    with pytest.raises(luminal.LuminalError, match="does not match float32"):
        luminal.load(tmp_path / "dtype.luminal")


def test_package_cache_entries_stay_inside_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", str(tmp_path / "cache"))
    compiled = luminal.compile(mlp("cpu"), (rand(5, 8),), options={"strict": True})
    compiled.save(tmp_path / "m.luminal")
    for hostile in ("../outside", "/etc/passwd", "a/../../outside", "name with space"):
        _rewrite_meta(tmp_path / "m.luminal", tmp_path / "bad.luminal", {"cache_entries": [hostile]})
        with pytest.raises(luminal.LuminalError, match="outside the cache"):
            luminal.load(tmp_path / "bad.luminal")
    assert not (tmp_path / "outside").exists()


def test_load_without_installing_cache_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", str(tmp_path / "first"))
    model = mlp("cpu")
    compiled = luminal.compile(model, (rand(5, 8),), options={"strict": True})
    x = rand(5, 8)
    expected = compiled(x)
    compiled.save(tmp_path / "m.luminal")
    entries = _cache_entries(tmp_path / "m.luminal")
    # The checked CUDA modules' cubins: the general path's, and the megakernel's where there is one
    # (either may run: whichever measures faster).
    checked = 2 if compiled.stats()["megakernel"] else 1
    assert entries == (checked if luminal._C.has_cuda_engine() else 0)
    for install in (False, True):
        fresh = tmp_path / f"fresh-{install}"
        set_env(monkeypatch, "LUMINAL_CACHE_DIR", str(fresh))
        luminal.clear_kernel_cache()  # as in a fresh process: nothing compiled in memory
        loaded = luminal.load(tmp_path / "m.luminal", install_cache_entries=install)
        assert_same(loaded(x), expected)
        aot = loaded.stats()["aot"]
        # Installed: read from the cache; not installed: built (compiled by NVRTC) and written again.
        assert (aot["cache_entries_read"], aot["cache_entries_written"]) == ((entries, 0) if install else (0, entries))


def test_general_path_after_the_fast_path(device: str) -> None:
    """Calls that leave the fast path (grad mode on with nothing requiring grad, a rebind) give
    the same structured outputs."""

    class Pair(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
            y = self.linear(x)
            return y, [y.relu(), x.sum(1)]

    model = Pair().to(device).requires_grad_(False)
    compiled = luminal.compile(model, (rand(2, 4, device=device),), options={"strict": True})
    x = rand(2, 4, device=device)
    assert_same(compiled(x), model(x))
    assert compiled.stats()["aot"]["fast_path"] is False  # a nested output: rebuilt in Python
    flat = luminal.compile(lambda a, b: (a + b, a * b), (x, x), options={"strict": True})
    flat(x, x)
    assert flat.stats()["aot"]["fast_path"]
    with torch.enable_grad():
        assert_same(compiled(x), model(x))
        assert_same(flat(x, 2 * x), (3 * x, 2 * x * x))
    model.linear.weight = torch.nn.Parameter(rand(3, 4, device=device), requires_grad=False)
    assert_same(compiled(x), model(x))


def test_example_inputs_sharing_memory_compile_for_distinct_inputs(device: str) -> None:
    x = rand(3, 4, device=device)
    compiled = luminal.compile(lambda a, b: a + 2 * b, (x, x), options={"strict": True})
    y = rand(3, 4, device=device)
    assert_same(compiled(x, y), x + 2 * y)
    views = luminal.compile(lambda a, b: a * b, (x[0], x[1]), options={"strict": True})
    assert_same(views(y[0], x[2]), y[0] * x[2])


def test_training_mode_change_is_not_ignored(device: str) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Dropout(0.5)).to(device).eval()
    compiled = luminal.compile(model, (rand(4, 6, device=device),), options={"strict": True})
    x = rand(4, 6, device=device)
    assert_same(compiled(x), model(x))
    model.train()
    with pytest.raises(luminal.LuminalError, match="training mode changed"):
        compiled(x)
    model[1].eval()  # a submodule's flag differs too: checked off the fast path
    with pytest.raises(luminal.LuminalError, match="training mode changed"):
        compiled(x)
    model.eval()
    assert_same(compiled(x), model(x))
    lenient = luminal.compile(model, (x,))
    lenient(x)
    model.train()
    with pytest.warns(LuminalFallbackWarning, match="training mode changed"):
        y = lenient(x)
    assert ((y == 0) | torch.isclose(y, 2 * model[0](x))).all()  # eager's dropout ran


def test_constant_arguments_are_checked(device: str) -> None:
    def scaled(x: torch.Tensor, scale: float, flag: bool) -> torch.Tensor:
        return x * scale if flag else x

    compiled = luminal.compile(scaled, (rand(3, device=device), 2.5, True), options={"strict": True})
    y = rand(3, device=device)
    assert_same(compiled(y, 2.5, True), y * 2.5)
    with pytest.raises(luminal.LuminalError, match=r"argument leaf 1 is 3.0, but the module was compiled for 2.5"):
        compiled(y, 3.0, True)
    with pytest.raises(luminal.LuminalError, match="compiled for True"):
        compiled(y, 2.5, 1)  # an int is not the bool it was compiled for
    assert not compiled.stats()["aot"]["fast_path"]  # constants are checked in Python


def test_saving_before_the_first_call(device: str, tmp_path: Path) -> None:
    model = mlp(device)
    compiled = luminal.compile(model, (rand(5, 8, device=device),), options={"strict": True})
    if device == "cuda":  # kernels and choices are built at the first call: the package has none yet
        with pytest.warns(luminal.LuminalWarning, match="before its first call"):
            compiled.save(tmp_path / "m.luminal")
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            compiled.save(tmp_path / "m.luminal")
    x = rand(5, 8, device=device)
    assert_same(luminal.load(tmp_path / "m.luminal")(x), model(x))


def test_model_export_cannot_capture_runs_in_eager_or_raises(device: str) -> None:
    def branchy(x: torch.Tensor) -> torch.Tensor:
        return x * 2 if x.sum() > 0 else x - 1  # data-dependent control flow: torch.export refuses it

    x = rand(4, device=device)
    with pytest.raises(luminal.LuminalError, match="torch.export failed"):
        luminal.compile(branchy, (x,), options={"strict": True})
    with pytest.warns(LuminalFallbackWarning, match="torch.export failed"):
        compiled = luminal.compile(branchy, (x,))
    for value in (x.abs() + 1, -x.abs() - 1):
        assert_same(compiled(value), branchy(value))
    assert compiled.stats()["aot"]["exports"] == 0
    with pytest.raises(luminal.LuminalError, match="can be saved"):
        compiled.save("unused.luminal")
