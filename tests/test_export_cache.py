"""Hostile and corrupt on-disk caches: a bad export or kernel cache entry (truncated, flipped,
another format, forged metadata, a FIFO, a link to /dev/zero, a directory) never fails, blocks or
misleads a compile. The entry is rebuilt and one LuminalCacheWarning names its path; the next
compile hits the rebuilt entry silently. Racing writers never pair one's metadata with another's
archive. Unusable cache and dump directories warn once and the compile goes on."""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import luminal
from helpers import assert_same, rand, set_env, unset_env
from luminal import _C, export_cache, policy

# The graphs compiled here: two tensor inputs of different shapes, so that swapped positions matter.


def two_inputs(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.relu(x * 2.0 + y) - y.sum()


def _inputs(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    return rand(3, 5, device=device), rand(5, device=device)


def _compile_in_thread(device: str, timeout: float = 120.0) -> list[warnings.WarningMessage]:
    """Compiles and runs `two_inputs` against eager in a thread that must finish within `timeout`
    (a compile blocked on a FIFO fails the test instead of hanging it); returns the warnings. The
    in-memory kernel cache is emptied first, so that the disk cache is read (or written)."""
    luminal.clear_kernel_cache()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            with warnings.catch_warnings(record=True) as caught, torch.no_grad():
                warnings.simplefilter("always")
                x, y = _inputs(device)
                compiled = torch.compile(two_inputs, backend="luminal", dynamic=False)
                assert_same(compiled(x, y), two_inputs(x, y))
            outcome["warnings"] = caught
        except BaseException as error:  # noqa: BLE001  (re-raised in the test's thread)
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"the compile did not finish within {timeout} s (blocked on a cache file?)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["warnings"]


def _luminal_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, luminal.LuminalWarning)]


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", str(tmp_path))
    unset_env(monkeypatch, "LUMINAL_CACHE_MAX_BYTES")
    return tmp_path


def _only_entry(cache_dir: Path) -> Path:
    entries = list((cache_dir / "graphs").glob("*.graph"))
    assert len(entries) == 1, entries
    return entries[0]


def _no_export(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("torch.export ran although the export cache holds this graph")


def _rewrite_metadata(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    """A forged entry: metadata changed, checksum recomputed (so only validation can catch it)."""

    def corrupt(entry: Path) -> None:
        meta, archive = export_cache.unpack_entry(entry.read_bytes())
        change(meta)
        entry.write_bytes(export_cache.pack_entry(meta, archive))

    return corrupt


def _truncate(entry: Path) -> None:
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2])


def _flip_archive_byte(entry: Path) -> None:
    data = bytearray(entry.read_bytes())
    data[-100] ^= 0x20
    entry.write_bytes(bytes(data))


def _other_format(entry: Path) -> None:
    data = bytearray(entry.read_bytes())
    data[8] = 99  # the format field, after the 8-byte magic
    entry.write_bytes(bytes(data))


def _sparse_huge(entry: Path) -> None:
    os.truncate(entry, 3 << 30)  # over the default 2 GiB limit: refused without being read


def _fifo(entry: Path) -> None:
    entry.unlink()
    os.mkfifo(entry)


def _link_to_dev_zero(entry: Path) -> None:
    entry.unlink()
    entry.symlink_to("/dev/zero")


def _empty_directory(entry: Path) -> None:
    entry.unlink()
    entry.mkdir()


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda meta: meta.__setitem__(field, value)


CORRUPTIONS = [
    ("truncated", _truncate, "is .* bytes, but its header declares"),
    ("flipped byte", _flip_archive_byte, "does not match its checksum"),
    ("other format", _other_format, "has format version 99, expected"),
    ("permuted positions", _rewrite_metadata(_set("tensor_positions", [1, 0])), r"tensor positions \[1, 0\]"),
    ("repeated positions", _rewrite_metadata(_set("tensor_positions", [0, 0])), "out of order or repeated"),
    ("out-of-range position", _rewrite_metadata(_set("tensor_positions", [0, 7])), r"tensor positions \[0, 7\]"),
    ("negative position", _rewrite_metadata(_set("tensor_positions", [-1, 1])), "not a list of input positions"),
    ("bool position", _rewrite_metadata(_set("tensor_positions", [False, True])), "not a list of input positions"),
    ("size position", _rewrite_metadata(_set("size_positions", [1])), r"size positions \[1\]"),
    ("roles", _rewrite_metadata(_set("input_roles", ["user", "weights"])), "input roles"),
    ("output structure", _rewrite_metadata(_set("out_spec", "[1, {")), "unreadable output structure"),
    ("other key", _rewrite_metadata(_set("key", "0" * 64)), "was written for another key"),
    ("missing field", _rewrite_metadata(lambda meta: meta.pop("input_roles")), "metadata fields"),
    ("huge sparse file", _sparse_huge, "over the cache limit"),
    ("FIFO", _fifo, "is a FIFO, not a regular file"),
    ("symlink to /dev/zero", _link_to_dev_zero, "is a symbolic link"),
    ("directory", _empty_directory, "is a directory, not a regular file"),
]


@pytest.mark.parametrize("corrupt,match", [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS])
def test_bad_export_entry_is_rebuilt_and_reported_once(
    corrupt: Callable[[Path], None], match: str, device: str, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _luminal_warnings(_compile_in_thread(device)) == []
    entry = _only_entry(cache_dir)
    corrupt(entry)

    torch._dynamo.reset()
    reported = _luminal_warnings(_compile_in_thread(device))
    assert len(reported) == 1, reported
    assert re.search(re.escape(f"export cache entry {entry} ") + ".*" + match, reported[0]), reported[0]
    assert entry.is_file() and not entry.is_symlink()  # rebuilt in place
    assert Path("/dev/zero").exists()

    torch._dynamo.reset()
    monkeypatch.setattr(luminal.export_cache, "export_graph", _no_export)
    assert _luminal_warnings(_compile_in_thread(device)) == []  # a hit on the rebuilt entry


def test_directory_in_the_way_is_left_and_bypassed(device: str, cache_dir: Path) -> None:
    _compile_in_thread(device)
    entry = _only_entry(cache_dir)
    entry.unlink()
    entry.mkdir()
    (entry / "user file").write_text("not the cache's")
    torch._dynamo.reset()
    reported = _luminal_warnings(_compile_in_thread(device))
    assert len(reported) == 1 and str(entry) in reported[0] and "left in place" in reported[0], reported
    assert (entry / "user file").read_text() == "not the cache's"
    torch._dynamo.reset()
    assert _luminal_warnings(_compile_in_thread(device)) == []  # once per path; no failed write reported


def test_entry_over_a_lowered_limit_is_refused(device: str, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _compile_in_thread(device)
    entry = _only_entry(cache_dir)
    set_env(monkeypatch, "LUMINAL_CACHE_MAX_BYTES", "100")
    torch._dynamo.reset()
    reported = _luminal_warnings(_compile_in_thread(device))
    assert len(reported) == 1 and "over the cache limit of 100 bytes" in reported[0], reported
    assert not entry.exists()  # and not stored again: it would not fit


def test_entry_whose_export_dropped_baked_in_tensors_is_hit(
    device: str, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dynamic DLRM passes each embedding's 0-dim ``norm_type`` buffer, read with ``.item()``:
    the export bakes the value in (it is part of the key) and drops the input, so the entry binds
    fewer tensors than the graph has. The next compile must take it, not evict it every time."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "dlrm"))
    from model import DLRM, MINI, make_inputs

    model = DLRM(MINI).to(device).eval()
    inputs = make_inputs(MINI, 9, 2, device=device)

    def compile_once() -> list[str]:
        torch._dynamo.reset()
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            assert_same(torch.compile(model, backend="luminal", dynamic=True)(*inputs), model(*inputs))
        return _luminal_warnings(caught)

    assert compile_once() == []
    layout = export_cache.unpack_entry(_only_entry(cache_dir).read_bytes())[0]["tensor_positions"]
    monkeypatch.setattr(luminal.export_cache, "export_graph", _no_export)
    assert compile_once() == []  # a hit: no export, no eviction
    assert export_cache.unpack_entry(_only_entry(cache_dir).read_bytes())[0]["tensor_positions"] == layout


# ------------------------------------------------------------------------------------------------
# Racing writers
# ------------------------------------------------------------------------------------------------
_RACE_KEY = "f" * 64
_RACE_EXPECTED = export_cache.ExpectedLayout(tensors=(0, 1), roles=("user", "user"), integers=frozenset({2, 3}))


def _race_graph(writer: int) -> Any:
    """Writer-specific archive and metadata: a reader can tell whether they belong together."""
    from luminal.export import CallLayout, ExportedGraph

    sizes = (2,) if writer == 0 else (2, 3)
    return ExportedGraph(
        archive=bytes([writer + 1]) * (5000 + 3000 * writer),
        layout=CallLayout((0, 1), sizes),
        input_roles=("user", "user", *("user",) * len(sizes)),
        out_spec=None,
    )


def _race_worker(writer: int, iterations: int) -> None:
    warnings.simplefilter("error")  # a reader that meets a bad entry fails
    mine = _race_graph(writer)
    for _ in range(iterations):
        export_cache.store(_RACE_KEY, mine)
        loaded = export_cache.load(_RACE_KEY, _RACE_EXPECTED)
        assert loaded is not None
        owner = loaded.archive[0] - 1
        assert owner in (0, 1)
        theirs = _race_graph(owner)
        assert loaded.archive == theirs.archive and loaded.layout == theirs.layout
        assert loaded.input_roles == theirs.input_roles


def test_racing_processes_never_pair_one_archive_with_another_metadata(cache_dir: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_race_worker, args=(writer, 300)) for writer in (0, 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    assert [worker.exitcode for worker in workers] == [0, 0]
    assert len(list((cache_dir / "graphs").iterdir())) == 1  # one entry, no temporaries left


# ------------------------------------------------------------------------------------------------
# Kernel cache (the generated CUDA is compiled with NVRTC also without a GPU: conftest.py)
# ------------------------------------------------------------------------------------------------
def _only_kernel_entry(cache_dir: Path) -> Path:
    entries = list(cache_dir.glob("*.cubin"))
    assert len(entries) == 1, entries
    return entries[0]


def _flip_last_byte(entry: Path) -> None:
    data = bytearray(entry.read_bytes())
    data[-1] ^= 0x01
    entry.write_bytes(bytes(data))


KERNEL_CORRUPTIONS = [
    ("truncated", _truncate, "is .* bytes, but its header declares"),
    ("flipped byte", _flip_last_byte, "does not match its checksum"),
    ("other format", _other_format, "has format version 99, expected 1"),
    ("FIFO", _fifo, "is a FIFO, not a regular file"),
    ("symlink to /dev/zero", _link_to_dev_zero, "is a symbolic link"),
    ("directory", _empty_directory, "is a directory, not a regular file"),
]


@pytest.mark.skipif(not _C.has_cuda_engine(), reason="built without the CUDA engine")
@pytest.mark.skipif(not os.environ.get("LUMINAL_CHECK_CUDA_CODEGEN"), reason="kernels are compiled on a GPU only")
@pytest.mark.parametrize("corrupt,match", [c[1:] for c in KERNEL_CORRUPTIONS], ids=[c[0] for c in KERNEL_CORRUPTIONS])
def test_bad_kernel_entry_is_recompiled_and_reported_once(
    corrupt: Callable[[Path], None], match: str, cache_dir: Path
) -> None:
    _compile_in_thread("cpu")
    entry = _only_kernel_entry(cache_dir)
    assert entry.read_bytes().startswith(b"LMKCACHE")
    corrupt(entry)

    torch._dynamo.reset()
    reported = _luminal_warnings(_compile_in_thread("cpu"))
    assert len(reported) == 1, reported
    assert re.search(re.escape(f"kernel cache entry {entry} ") + ".*" + match, reported[0]), reported[0]
    assert entry.is_file() and not entry.is_symlink()

    torch._dynamo.reset()
    assert _luminal_warnings(_compile_in_thread("cpu")) == []
    assert _only_kernel_entry(cache_dir) == entry


@pytest.mark.skipif(not _C.has_cuda_engine(), reason="built without the CUDA engine")
@pytest.mark.skipif(not os.environ.get("LUMINAL_CHECK_CUDA_CODEGEN"), reason="kernels are compiled on a GPU only")
def test_kernel_entry_path_held_by_a_directory_is_bypassed(cache_dir: Path) -> None:
    _compile_in_thread("cpu")
    entry = _only_kernel_entry(cache_dir)
    entry.unlink()
    entry.mkdir()
    (entry / "user file").write_text("kept")
    torch._dynamo.reset()
    reported = _luminal_warnings(_compile_in_thread("cpu"))
    assert len(reported) == 1 and "left in place" in reported[0] and str(entry) in reported[0], reported
    assert (entry / "user file").read_text() == "kept"


def test_graphs_directory_replaced_by_a_fifo_turns_the_export_cache_off(device: str, cache_dir: Path) -> None:
    os.mkfifo(cache_dir / "graphs")
    reported = _luminal_warnings(_compile_in_thread(device))
    assert reported == [f"luminal: exported graphs are not cached: {cache_dir / 'graphs'} is not a directory"]
    torch._dynamo.reset()
    assert _luminal_warnings(_compile_in_thread(device)) == []


def test_prune_removes_temporaries_left_by_dead_writers(cache_dir: Path) -> None:
    (cache_dir / "graphs").mkdir()
    (cache_dir / "choices").mkdir()
    stale = [
        cache_dir / ".sm_90-1.cubin.tmp.99.1.0",
        cache_dir / "graphs" / ".abc.graph.tmp.x1",
        cache_dir / "choices" / ".1f2e.choice.tmp.99.1.0",
    ]
    fresh = cache_dir / "graphs" / ".def.graph.tmp.x2"
    for path in [*stale, fresh]:
        path.write_bytes(b"partial")
    for path in stale:
        os.utime(path, (1_000, 1_000))
    export_cache.prune(cache_dir, 1 << 30)
    assert not any(path.exists() for path in stale) and fresh.exists()


def test_prune_counts_measured_choices_least_recently_used_first(cache_dir: Path) -> None:
    """Choice entries (csrc/common/choice_cache.h) share the cache's size limit with the rest."""
    (cache_dir / "choices").mkdir()
    old_choice, new_choice = cache_dir / "choices" / "a1.choice", cache_dir / "choices" / "b2.choice"
    kernel = cache_dir / "sm_90-1.cubin"
    for path, size, used in ((old_choice, 300, 1_000), (kernel, 500, 2_000), (new_choice, 200, 3_000)):
        path.write_bytes(b"c" * size)
        os.utime(path, (used, used))
    assert export_cache.prune(cache_dir, 750) == 300
    assert not old_choice.exists() and kernel.exists() and new_choice.exists()
    assert export_cache.prune(cache_dir, 0) == 700
    assert list(cache_dir.rglob("*.c*")) == []


# ------------------------------------------------------------------------------------------------
# Environment values
# ------------------------------------------------------------------------------------------------
def _cached_files(root: Path) -> tuple[list[Path], list[Path]]:
    return list((root / "graphs").glob("*.graph")), list(root.glob("*.cubin"))


@pytest.mark.parametrize("value,under_home", [("~", ""), ("~/nested/cache", "nested/cache")])
def test_cache_dir_expands_home(
    value: str, under_home: str, device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, work = tmp_path / f"home-{device}", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    set_env(monkeypatch, "HOME", str(home))
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", value)
    monkeypatch.chdir(work)
    assert _luminal_warnings(_compile_in_thread(device)) == []
    root = home / under_home
    assert export_cache.cache_directory() == root / "graphs"
    graphs, kernels = _cached_files(root)
    assert len(graphs) == 1
    # The codegen check's unoptimized entry (CPU and CUDA), and on CUDA the entry that runs.
    checked = bool(os.environ.get("LUMINAL_CHECK_CUDA_CODEGEN")) and _C.has_cuda_engine()
    assert len(kernels) == int(checked) + int(device == "cuda")
    assert list(work.iterdir()) == []  # no literal ./~


def test_relative_cache_dir_is_made_absolute_once(device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", f"relative-{device}")
    assert _luminal_warnings(_compile_in_thread(device)) == []
    root = tmp_path / f"relative-{device}"
    assert _C.cache_directory() == str(root)
    assert len(_cached_files(root)[0]) == 1
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the directory stays where it pointed at first use
    assert export_cache.cache_directory() == root / "graphs"


def test_unusable_cache_dir_warns_once_and_compiles(
    device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_file = tmp_path / f"a-file-{device}"
    a_file.write_text("not a directory")
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", str(a_file / "cache"))
    reported = _luminal_warnings(_compile_in_thread(device))
    assert len(reported) == 1 and "caching is off" in reported[0] and str(a_file) in reported[0], reported
    torch._dynamo.reset()
    assert _luminal_warnings(_compile_in_thread(device)) == []
    assert a_file.read_text() == "not a directory"


def test_unusable_dump_directories_warn_and_compile(
    device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(policy, "_warned_once", set())
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", "")
    set_env(monkeypatch, "LUMINAL_DUMP_PT2", "/dev/null")
    # The core's notices are once per process: a value of its own per parametrization.
    set_env(monkeypatch, "LUMINAL_DUMP_KERNELS", f"/dev/null/{device}")
    reported = _luminal_warnings(_compile_in_thread(device))
    assert any("LUMINAL_DUMP_PT2='/dev/null' is not usable" in m for m in reported), reported
    kernels_dumped = bool(os.environ.get("LUMINAL_CHECK_CUDA_CODEGEN")) and _C.has_cuda_engine()
    assert any(f"LUMINAL_DUMP_KERNELS='/dev/null/{device}' is not usable" in m for m in reported) == kernels_dumped
    torch._dynamo.reset()
    assert _luminal_warnings(_compile_in_thread(device)) == []


def test_dump_pt2_expands_home(device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, "HOME", str(tmp_path))
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", "")
    set_env(monkeypatch, "LUMINAL_DUMP_PT2", "~/dumps")
    monkeypatch.chdir(tmp_path)
    assert _luminal_warnings(_compile_in_thread(device)) == []
    assert sorted(p.name for p in (tmp_path / "dumps").iterdir()) == ["graph_0000.pt2", "graph_0000.pt2.roles"]
    loaded = luminal.load(tmp_path / "dumps" / "graph_0000.pt2")
    x, y = _inputs(device)
    assert_same(loaded(x, y)[0], two_inputs(x, y))
