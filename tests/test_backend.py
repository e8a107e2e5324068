"""The backend's contract with Dynamo and users: registration by name, errors, mutation
write-back, integer outputs, parameters bound by pointer, the AOT loader."""

from __future__ import annotations

import io
import os
import warnings
import zipfile

import pytest
import torch

import luminal
from helpers import FunctionModule, assert_same, capturing_backend, rand, set_env
from luminal import _C


def test_backend_by_name_without_import() -> None:
    from torch._dynamo.backends.registry import lookup_backend

    assert lookup_backend("luminal") is luminal.luminal_backend


def test_backend_by_name_compiles(device: str) -> None:
    model = torch.nn.Linear(4, 3).to(device)
    x = rand(2, 4, device=device)
    assert_same(torch.compile(model, backend="luminal")(x), model(x))
    assert luminal.compile_count() == 1


def test_a_graph_that_touches_no_tensor_runs_as_it_is_without_a_warning() -> None:
    """torchvision's detection models hand Dynamo a graph that only calls
    torch._C._log_api_usage_once and returns nothing; torch.export's serializer fails on it, which
    made it a fallback with a warning, and an error under strict=True."""

    def only_logs() -> None:
        torch._C._log_api_usage_once("luminal_test.only_logs")
        torch.ones(3)  # made and dropped: nothing leaves the graph

    captured: list = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.compile(only_logs, backend=capturing_backend(captured, strict=True))() is None
    assert [w for w in caught if issubclass(w.category, luminal.LuminalFallbackWarning)] == []
    assert len(captured) == 1 and captured[0].stats()["eager_reason"].startswith("the graph reads, writes")
    assert luminal.compile_count() == 0


def test_corrupt_archive_raises() -> None:
    with pytest.raises(luminal.LuminalError):
        _C.compile(b"definitely not a zip archive")
    with pytest.raises(luminal.LuminalError, match="archive_format"):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as z:
            z.writestr("archive/models/model.json", "{}")
        _C.compile(buffer.getvalue())


def test_corrupt_json_raises() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("archive/archive_format", "pt2")
        z.writestr("archive/models/model.json", '{"graph_module": [1, 2')
    with pytest.raises(luminal.LuminalError, match="model.json"):
        _C.compile(buffer.getvalue())


@torch.library.custom_op("luminal_test_backend::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def test_unsupported_op_names_op_and_node() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return twice(x) + torch.relu(x)

    with pytest.raises(Exception, match=r"luminal_test_backend\.twice\.default \(node twice\)"):
        torch.compile(fn, backend="luminal", options={"strict": True})(rand(5))


def test_unknown_option_raises() -> None:
    with pytest.raises(Exception, match="unknown luminal option"):
        torch.compile(torch.relu, backend="luminal", options={"no_such_option": 1})(rand(3))


def test_input_mutation_is_written_back(device: str) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.add_(1.0)
        y.mul_(2.0)
        return x * y

    x, y = rand(3, 4, device=device), rand(3, 4, device=device)
    x_ref, y_ref = x.clone(), y.clone()
    expected = fn(x_ref, y_ref)
    actual = torch.compile(fn, backend="luminal")(x, y)
    assert_same(actual, expected)
    assert_same(x, x_ref)
    assert_same(y, y_ref)


def test_multiple_outputs_keep_order_and_structure(device: str) -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return torch.relu(x), x * 2, torch.sigmoid(x)

    x = rand(4, 5, device=device)
    assert_same(torch.compile(fn, backend="luminal")(x), fn(x))


def test_symbolic_integer_output(device: str) -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, int]:
        return x * 2, x.shape[0] * 3

    compiled = torch.compile(fn, backend="luminal", dynamic=True)
    for n in (4, 7):
        x = rand(n, 2, device=device)
        out, count = compiled(x)
        assert count == n * 3
        assert_same(out, x * 2)


def test_parameters_are_bound_by_pointer(device: str) -> None:
    model = torch.nn.Linear(5, 2).to(device)
    compiled = torch.compile(model, backend="luminal")
    x = rand(3, 5, device=device)
    with torch.no_grad():
        assert_same(compiled(x), model(x))
        model.weight.mul_(-3.0)  # in place: same tensor, new values, no recompile
        model.bias.add_(1.0)
        assert_same(compiled(x), model(x))
    assert luminal.compile_count() == 1


def test_parameters_are_not_serialized() -> None:
    from luminal.export import export_graph

    big = torch.nn.Linear(256, 256)
    captured: dict[str, bytes] = {}

    def backend(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]):
        exported = export_graph(gm, inputs)
        captured["archive"] = exported.archive
        assert exported.input_roles.count("parameter") == 2
        return gm.forward

    torch.compile(big, backend=backend)(rand(2, 256))
    # The weight alone is 256 KiB; the archive holds only the program.
    assert len(captured["archive"]) < 64 * 1024
    names = zipfile.ZipFile(io.BytesIO(captured["archive"])).namelist()
    assert not any(name.startswith("archive/data/weights/weight_") for name in names)


def test_ir_and_stats_are_exposed(device: str) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU())  # large enough for a library matmul
    captured = []

    backend = capturing_backend(captured)

    torch.compile(model, backend=backend)(rand(2, 64))
    text = captured[0].ir()
    assert "matmul" in text and "+ bias, relu" in text  # bias and ReLU run in the matmul's epilogue
    assert "aten.addmm.default" in captured[0].ir(optimized=False)
    stats = captured[0].stats()
    assert stats["matmuls"] == 1 and stats["kernels"] == 1


def test_wrong_input_dtype_raises() -> None:
    graph = _compile_graph(lambda x: x * 2, rand(3))
    with pytest.raises(luminal.LuminalError, match="float32"):
        graph.run([torch.ones(3, dtype=torch.float64)])


def _compile_graph(fn, *args):
    from luminal.export import _serialize

    exported = torch.export.export(FunctionModule(fn), args).run_decompositions()
    return _C.compile(_serialize(exported))  # the PT2 archive layout, on every torch version


def test_load_pt2_file_with_weights(tmp_path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    x = rand(3, 6)
    exported = torch.export.export(model, (x,)).run_decompositions()
    path = tmp_path / "mlp.pt2"
    torch.export.save(exported, path)
    if not any(name.endswith("/archive_format") for name in zipfile.ZipFile(path).namelist()):  # torch < 2.7
        with pytest.raises(luminal.LuminalError, match="torch < 2.7"):
            luminal.load(path)
        return
    program = luminal.load(path)
    for batch in (3,):
        inputs = rand(batch, 6)
        (out,) = program(inputs)
        assert_same(out, model(inputs))
    assert program.stats()["constants"] == 4  # the archive's weights


def test_guards_fn_is_disabled_only_for_luminal_exports() -> None:
    from torch.export import _unlift

    from luminal.export import _luminal_export

    if not hasattr(_unlift, "_ok_to_generate_guards_fn"):
        pytest.skip("this torch has no guards function")
    with _luminal_export():
        assert _unlift._ok_to_generate_guards_fn() is False
    assert _unlift._ok_to_generate_guards_fn() is True


def test_exports_choose_serializable_attention_kernels() -> None:
    """On CUDA inputs, luminal exports sdpa without the fused kernels whose nodes torch.export cannot
    serialize: flash always (uint64 RNG state), cuDNN under dynamic shapes (its longest query and
    key lengths are SymInt outputs). Fake CUDA tensors stand in for a GPU here; the CUDA case of
    test_attention.py's dynamic lengths runs the whole path."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from luminal.export import _luminal_export

    with FakeTensorMode():
        on_gpu = torch.empty(2, 3, device="cuda")
    before = torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled()
    with _luminal_export([on_gpu], dynamic=True):
        assert not torch.backends.cuda.cudnn_sdp_enabled() and not torch.backends.cuda.flash_sdp_enabled()
        assert torch.backends.cuda.mem_efficient_sdp_enabled()
    with _luminal_export([on_gpu], dynamic=False):
        assert torch.backends.cuda.cudnn_sdp_enabled() == before[0] and not torch.backends.cuda.flash_sdp_enabled()
    with _luminal_export([torch.empty(2, 3)], dynamic=True):  # CPU inputs: nothing changes
        assert (torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled()) == before
    assert (torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled()) == before


def test_dynamic_dims_of_several_inputs(device: str) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x.unsqueeze(1) * y.unsqueeze(0)).reshape(-1) + 1

    compiled = torch.compile(fn, backend="luminal", dynamic=True)
    for n, m in ((3, 4), (5, 2), (7, 7)):
        x, y = rand(n, device=device), rand(m, device=device)
        assert_same(compiled(x, y), fn(x, y))
    assert luminal.compile_count() == 1


def test_small_matmuls_fuse_into_one_kernel(device: str) -> None:
    # K = 8 and N = 1: both layers become reductions; the second is inlined as a fold together
    # with both biases and the ReLU, so the whole MLP needs two kernels.
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1), torch.nn.Sigmoid())
    captured = []

    backend = capturing_backend(captured)

    model = model.to(device)
    x = rand(5, 8, device=device)
    assert_same(torch.compile(model, backend=backend)(x), model(x))
    assert captured[0].stats()["matmuls"] == 0
    assert "sum(r" in captured[0].ir()


def _cached_archives(directory) -> list:
    return sorted((directory / "graphs").glob("*.graph"))


def test_warm_compile_skips_export(device: str, tmp_path, monkeypatch) -> None:
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", str(tmp_path))
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3)).to(device)
    with torch.no_grad():
        x = rand(4, 6, device=device)
        assert_same(torch.compile(model, backend="luminal")(x), model(x))
        assert len(_cached_archives(tmp_path)) == 1

        def no_export(*args, **kwargs):
            raise AssertionError("torch.export ran although the export cache holds this graph")

        torch._dynamo.reset()
        monkeypatch.setattr(luminal.export_cache, "export_graph", no_export)
        y = rand(4, 6, device=device)
        assert_same(torch.compile(model, backend="luminal")(y), model(y))
    assert luminal.compile_count() == 2


def test_export_cache_keys_on_shapes_and_ignores_corrupt_entries(tmp_path, monkeypatch) -> None:
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", str(tmp_path))
    model = torch.nn.Linear(6, 5)
    with torch.no_grad():
        torch.compile(model, backend="luminal", dynamic=False)(rand(4, 6))
        torch._dynamo.reset()
        torch.compile(model, backend="luminal", dynamic=False)(rand(3, 6))
        archives = _cached_archives(tmp_path)
        assert len(archives) == 2  # another shape, another export
        for archive in archives:
            archive.write_bytes(b"not a cache entry " * 8)
        torch._dynamo.reset()
        x = rand(4, 6)
        with pytest.warns(luminal.LuminalCacheWarning, match="is not a luminal export cache entry"):
            assert_same(torch.compile(model, backend="luminal", dynamic=False)(x), model(x))
    assert any(a.read_bytes().startswith(b"LMGRAPH") for a in archives)  # the bad entry was rewritten


def test_export_cache_can_be_disabled(tmp_path, monkeypatch) -> None:
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", "")
    model = torch.nn.Linear(3, 2)
    x = rand(2, 3)
    with torch.no_grad():
        assert_same(torch.compile(model, backend="luminal")(x), model(x))
    from luminal import export_cache

    assert export_cache.cache_directory() is None


def _cache_files(directory) -> list:
    return [*directory.glob("*.cubin"), *(directory / "graphs").glob("*")]


def test_cache_evicts_least_recently_used_files_over_its_limit(tmp_path, monkeypatch) -> None:
    """The kernel and export caches share one size limit; a hit makes an entry recently used."""
    from luminal import export_cache

    set_env(monkeypatch, "LUMINAL_CACHE_DIR", str(tmp_path))
    old_kernel = tmp_path / "sm_90-old.cubin"
    old_kernel.write_bytes(b"k" * 1000)
    unrelated = tmp_path / "notes.txt"  # not a cache file: never removed
    unrelated.write_bytes(b"n" * 5000)
    model = torch.nn.Linear(6, 5)
    with torch.no_grad():
        torch.compile(model, backend="luminal", dynamic=False)(rand(4, 6))
    entry = _cached_archives(tmp_path)[0]
    for path in [*_cache_files(tmp_path), unrelated]:
        os.utime(path, (1_000 if path == old_kernel else 2_000,) * 2)

    # A hit marks the entry as used now; over the limit, the oldest file goes first.
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend="luminal", dynamic=False)(rand(4, 6))
    assert entry.stat().st_mtime > 2_000
    rest = sum(p.stat().st_size for p in _cache_files(tmp_path) if p != old_kernel)
    assert export_cache.prune(tmp_path, rest + 10) == 1000
    assert not old_kernel.exists() and entry.exists() and unrelated.exists()

    # Storing a new entry over the limit evicts the least recently used files (the old entry first).
    for path in _cache_files(tmp_path):
        os.utime(path, (3_000 if path.parent.name == "graphs" else 4_000,) * 2)
    set_env(monkeypatch, "LUMINAL_CACHE_MAX_BYTES", str(rest + 10))
    monkeypatch.setattr(export_cache, "_measured", {})  # forget this process's last measurement
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend="luminal", dynamic=False)(rand(3, 6))
    assert not entry.exists() and len(_cached_archives(tmp_path)) == 1 and unrelated.exists()


SIZES = [("", 2 << 30), ("1000", 1000), ("3k", 3072), ("2 M", 2 << 20)]


@pytest.mark.parametrize("text,expected", SIZES)
def test_cache_limit_parses_sizes(text: str, expected: int, monkeypatch) -> None:
    from luminal import export_cache

    set_env(monkeypatch, "LUMINAL_CACHE_MAX_BYTES", text)
    assert export_cache.cache_limit_bytes() == expected


@pytest.mark.parametrize("text", ["x", "-1", "1.5G", "12T", "\u0663"])
def test_cache_limit_warns_once_on_invalid_sizes(text: str, monkeypatch) -> None:
    from luminal import export_cache

    set_env(monkeypatch, "LUMINAL_CACHE_MAX_BYTES", text)
    with pytest.warns(luminal.LuminalCacheWarning, match="LUMINAL_CACHE_MAX_BYTES=.* is not a size"):
        assert export_cache.cache_limit_bytes() == 2 << 30
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert export_cache.cache_limit_bytes() == 2 << 30


class _HostTable(torch.nn.Module):
    """VideoMAE's position embeddings: a plain CPU tensor attribute (no buffer, so `.to(device)`
    leaves it on the host) that forward casts and moves to the input's device."""

    def __init__(self, table: torch.Tensor, update_in_place: bool = False) -> None:
        super().__init__()
        self.table = table
        self.update_in_place = update_in_place
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.update_in_place:
            self.table.add_(1)
        return self.proj(x + self.table.type_as(x).to(device=x.device, copy=True))


def test_host_tensor_the_graph_moves_to_the_device(device: str) -> None:
    """A CUDA graph whose CPU input is only moved to the device runs whole on a copy made per call:
    a later change of the host tensor shows, as in eager."""
    table = rand(1, 8, 16)
    model = _HostTable(table).to(device).eval()
    compiled = torch.compile(model, backend="luminal")
    for step in range(3):
        if step == 2:
            table.mul_(-2)
        x = rand(2, 8, 16, device=device)
        assert_same(compiled(x), model(x), tolerance_scale=4)


def test_host_tensor_updated_in_place_is_not_moved() -> None:
    """An in-place update of the host tensor must reach host memory: the graph is not run on a
    device copy (on CUDA it falls back with a warning naming the devices)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device next to the host tensor")
    table = rand(1, 8, 16)
    model = _HostTable(table.clone(), update_in_place=True).cuda().eval()
    reference = _HostTable(table.clone(), update_in_place=True).cuda().eval()
    reference.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="luminal")
    x = rand(2, 8, 16, device="cuda")
    with pytest.warns(luminal.LuminalFallbackWarning, match="one device"):
        actual = compiled(x)
    assert_same(actual, reference(x), tolerance_scale=4)
    assert_same(model.table, reference.table)
