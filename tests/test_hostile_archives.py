"""Hostile .pt2 archives: an archive is data that users download and share, so whatever it declares
(sizes, strides, zip directory entries, text) must end in a clean LuminalError naming what is wrong,
never in a crash, a hang, a UnicodeDecodeError or an allocation beyond the reader's limits."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import luminal
from helpers import assert_same, rand, set_env

GiB = 1 << 30


class ExpandSum(torch.nn.Module):
    """An intermediate [n, 4] (expand, then mul by a weight) reduced over its rows."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.expand(3, 4) * self.w).sum(0)


@pytest.fixture(scope="module")
def base_archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.nn.Module]:
    model = ExpandSum().eval()
    path = tmp_path_factory.mktemp("base") / "base.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(1, 4),)), path)
    if not any(name.endswith("/archive_format") for name in zipfile.ZipFile(path).namelist()):
        pytest.skip("torch < 2.7 saves the legacy layout, which luminal.load refuses (tested in test_backend)")
    return path, model


def rewrite(source: Path, target: Path, edit: Callable[[str, bytes], bytes]) -> Path:
    """Copies an archive entry by entry, passing each entry's (name, bytes) through ``edit``."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            zout.writestr(info, edit(info.filename, zin.read(info.filename)))
    return target


def edit_json(suffix: str, change: Callable[[Any], None]) -> Callable[[str, bytes], bytes]:
    def edit(name: str, data: bytes) -> bytes:
        if not name.endswith(suffix):
            return data
        document = json.loads(data)
        change(document)
        return json.dumps(document).encode()

    return edit


def with_rows(rows: int) -> Callable[[Any], None]:
    """The intermediate declares [rows, 4]: the expand's size argument and both tensors' metadata."""

    def change(program: Any) -> None:
        graph = program["graph_module"]["graph"]
        for node in graph["nodes"]:
            if node["target"] == "torch.ops.aten.expand.default":
                node["inputs"][1]["arg"]["as_ints"] = [rows, 4]
        for name in ("expand", "mul"):
            graph["tensor_values"][name]["sizes"] = [{"as_int": rows}, {"as_int": 4}]
        graph["tensor_values"]["mul"]["strides"] = [{"as_int": 4}, {"as_int": 1}]

    return change


def test_self_consistent_archive_with_small_rows_matches_eager(base_archive, tmp_path, device: str) -> None:
    source, model = base_archive
    path = rewrite(source, tmp_path / "rows5.pt2", edit_json("models/model.json", with_rows(5)))
    x = rand(1, 4, device=device)
    (out,) = luminal.load(path)(x)
    assert_same(out, (x.expand(5, 4) * model.w.detach().to(device)).sum(0))


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (2**62, "does not fit in int64"),  # [2**62, 4]: the element count wraps to 0
        (2**61, "does not fit in int64"),
        (2**63 - 1, "does not fit in int64"),
        (2**59, "needs more than 2\\*\\*63 bytes"),  # 2**61 elements: only the byte count overflows
        (2**40, "more than any device can hold"),  # honest, but eager could not allocate it either
    ],
)
def test_declared_intermediate_too_large_raises(base_archive, tmp_path, rows: int, message: str) -> None:
    source, _ = base_archive
    path = rewrite(source, tmp_path / "big.pt2", edit_json("models/model.json", with_rows(rows)))
    with pytest.raises(luminal.LuminalError, match=message) as error:
        luminal.load(path)(torch.randn(1, 4))
    assert "expand" in str(error.value) and str(rows) in str(error.value)  # names the node and its shape


def test_declared_intermediate_larger_than_this_machine_refused_on_cpu(base_archive, tmp_path) -> None:
    # 256 GiB: an accelerator could hold it, so loading succeeds; the CPU engine refuses to run it
    # (eager could not allocate it, and computing it fused would take hours).
    source, _ = base_archive
    path = rewrite(source, tmp_path / "256gib.pt2", edit_json("models/model.json", with_rows(2**34)))
    program = luminal.load(path)
    with pytest.raises(
        luminal.LuminalError, match="node 'expand.*needs 274877906944 bytes, more than this machine's memory"
    ):
        program(torch.randn(1, 4))


def test_declared_negative_size_raises(base_archive, tmp_path) -> None:
    source, _ = base_archive
    path = rewrite(source, tmp_path / "negative.pt2", edit_json("models/model.json", with_rows(-1)))
    with pytest.raises(luminal.LuminalError, match="expand"):
        luminal.load(path)(torch.randn(1, 4))


class OuterSum(torch.nn.Module):
    """An [n, n] intermediate, reduced to a scalar (all) or to its columns (rows)."""

    def __init__(self, rows: bool) -> None:
        super().__init__()
        self.rows = rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outer = x[:, None] * x[None, :]
        return outer.sum(0) if self.rows else outer.sum()


@pytest.mark.parametrize("rows", [False, True])
def test_call_time_sizes_whose_products_overflow_raise(tmp_path, device: str, rows: bool) -> None:
    model = OuterSum(rows)
    path = tmp_path / "outer.pt2"
    dynamic = {"x": {0: torch.export.Dim("n")}}
    torch.export.save(torch.export.export(model, (torch.randn(8),), dynamic_shapes=dynamic), path)
    program = luminal.load(path)
    x = rand(5, device=device)
    assert_same(program(x)[0], model(x))
    if rows:
        # An [n] output of 2**62 floats: the byte count overflows before anything is allocated.
        with pytest.raises(luminal.LuminalError, match="output #0 'sum_1'.*needs more than 2\\*\\*63 bytes"):
            program(torch.ones(1, device=device).expand(2**62))
    else:
        # Expanded inputs have huge sizes and no memory: the [n, n] intermediate overflows int64.
        with pytest.raises(luminal.LuminalError, match="4294967296.*does not fit in int64"):
            program(torch.ones(1, device=device).expand(2**32))


def weight_meta(**fields: Any) -> Callable[[Any], None]:
    def change(config: Any) -> None:
        (meta,) = config["config"].values()
        for key, value in fields.items():
            meta["tensor_meta"][key] = value

    return change


def ints(*values: int) -> list[dict[str, int]]:
    return [{"as_int": v} for v in values]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"storage_offset": {"as_int": 2**62}}, "fit in a 64-bit byte count"),
        ({"storage_offset": {"as_int": 1}}, "needs at least 20 bytes"),  # one element past the payload
        ({"storage_offset": {"as_int": -1}}, "negative storage offset"),
        ({"strides": ints(2**62)}, "reaches past|needs at least"),
        ({"strides": ints(2)}, "needs at least 28 bytes"),
        ({"strides": ints(-1)}, "negative size or stride"),
        ({"sizes": ints(5)}, "needs at least 20 bytes"),
        ({"sizes": ints(2**62), "strides": ints(0)}, r"needs more than 2\*\*63 bytes"),  # a broadcast view
        ({"sizes": ints(2**40), "strides": ints(0)}, "more than any device can hold"),
        ({"sizes": ints(-4)}, "negative"),
    ],
)
def test_weight_view_outside_its_payload_is_refused(base_archive, tmp_path, fields, message) -> None:
    source, _ = base_archive
    path = rewrite(source, tmp_path / "weight.pt2", edit_json("_weights_config.json", weight_meta(**fields)))
    with pytest.raises(luminal.LuminalError, match=message) as error:
        luminal.load(path)(torch.randn(1, 4))
    assert "'w'" in str(error.value) or "'p_w'" in str(error.value)  # names the weight (or its graph input)


# ------------------------------------------------------------------------------------------------
# The zip container: declared sizes, limits, memory
# ------------------------------------------------------------------------------------------------
def patch_central_directory_size(data: bytes, name_suffix: str, size: int) -> bytes:
    """Sets the uncompressed size that the central directory records for one entry."""
    out = bytearray(data)
    position = out.find(b"PK\x01\x02")
    while position >= 0:
        name_length = struct.unpack_from("<H", out, position + 28)[0]
        name = bytes(out[position + 46 : position + 46 + name_length])
        if name.endswith(name_suffix.encode()):
            struct.pack_into("<I", out, position + 24, size)
            return bytes(out)
        position = out.find(b"PK\x01\x02", position + 4)
    raise AssertionError(f"no central directory entry ends with {name_suffix}")


def run_load(path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """luminal.load(path) in a fresh process: the exception, the seconds it took and the growth of
    its peak RSS (VmHWM) during the call."""
    script = textwrap.dedent(
        f"""
        import json, time
        import luminal

        def peak_kib():
            with open("/proc/self/status") as status:
                return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

        before, start = peak_kib(), time.perf_counter()
        try:
            luminal.load({str(path)!r})
            error = None
        except Exception as e:
            error = [type(e).__name__, str(e)]
        seconds = time.perf_counter() - start
        print(json.dumps({{"error": error, "seconds": seconds, "rss_growth_mib": (peak_kib() - before) / 1024}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_central_directory_size_of_4_gib_fails_fast(base_archive, tmp_path) -> None:
    source, _ = base_archive
    path = tmp_path / "declares_4gib.pt2"
    path.write_bytes(patch_central_directory_size(source.read_bytes(), "models/model.json", 0xFFFFFFFE))
    assert path.stat().st_size < 64 * 1024
    outcome = run_load(path)
    assert outcome["error"][0] == "LuminalError"
    assert "models/model.json" in outcome["error"][1] and "4294967294" in outcome["error"][1]
    assert outcome["seconds"] < 1.0
    assert outcome["rss_growth_mib"] < 64
    # With the JSON limit raised past it, the size is still refused: a stored entry holds what it stores.
    raised = run_load(path, {"LUMINAL_MAX_ARCHIVE_JSON_BYTES": str(8 * GiB)})
    assert raised["error"][0] == "LuminalError"
    assert "corrupt zip archive" in raised["error"][1] and "stored uncompressed" in raised["error"][1]
    assert raised["seconds"] < 1.0 and raised["rss_growth_mib"] < 64


def test_zip64_entries_and_a_comment_with_a_fake_end_signature_load(base_archive, tmp_path) -> None:
    """Stored entries as Python's zipfile writes them with ZIP64 (sizes in the local header's ZIP64
    field, no data descriptor: torch writes descriptors), and an archive comment that holds the
    end record's signature: the reader takes them, and the program matches eager."""
    source, model = base_archive
    path = tmp_path / "zip64.pt2"
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            with zout.open(info.filename, "w", force_zip64=True) as out:
                out.write(zin.read(info))
        zout.comment = b"PK\x05\x06 not the end record"
    x = torch.randn(1, 4)
    (out,) = luminal.load(path)(x)
    torch.testing.assert_close(out, model(x))


def deflate_bomb(path: Path, entry: str, inflated_bytes: int) -> Path:
    """A PT2-looking zip whose ``entry`` is ``inflated_bytes`` zeros, deflated (about 1 MB per GiB)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("archive/models/model.json", "{}")
        with z.open(f"archive/{entry}", "w", force_zip64=True) as out:
            block = bytes(16 << 20)
            for _ in range(inflated_bytes // len(block)):
                out.write(block)
    return path


def test_deflate_bomb_is_refused_before_inflating(tmp_path) -> None:
    """torch.export.save stores every entry: the reader inflates nothing, so a small entry that would
    inflate to 1 GiB is refused by its method, at once and without memory."""
    bomb = deflate_bomb(tmp_path / "bomb.pt2", "archive_format", GiB)
    assert bomb.stat().st_size < 2 << 20
    outcome = run_load(bomb)
    assert outcome["error"][0] == "LuminalError"
    assert "compressed zip entries are not supported: " in outcome["error"][1]
    assert "archive_format uses method 8 (deflate)" in outcome["error"][1]
    assert outcome["seconds"] < 1.0 and outcome["rss_growth_mib"] < 64


@pytest.mark.parametrize(
    ("method", "number"), [(zipfile.ZIP_DEFLATED, 8), (zipfile.ZIP_BZIP2, 12), (zipfile.ZIP_LZMA, 14)]
)
def test_compressed_entries_are_refused_naming_entry_and_method(tmp_path, method: int, number: int) -> None:
    path = tmp_path / f"method_{number}.pt2"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/archive_format", "pt2", compress_type=method)
        z.writestr("archive/models/model.json", "{}")
    with pytest.raises(
        luminal.LuminalError, match=f"compressed zip entries are not supported: .*archive_format uses method {number}"
    ):
        luminal.load(path)
    # A compressed entry that is never read stops nothing: the load goes on to the model's own error.
    unread = tmp_path / f"unread_{number}.pt2"
    with zipfile.ZipFile(unread, "w") as z:
        z.writestr("archive/archive_format", "pt2")
        z.writestr("archive/models/model.json", "{}")
        z.writestr("archive/extra/unused.bin", b"x" * 100, compress_type=method)
    with pytest.raises(luminal.LuminalError, match="models/model.json") as error:
        luminal.load(unread)
    assert "compressed zip entries" not in str(error.value)


def test_json_with_too_many_values_stops_at_the_limit(tmp_path) -> None:
    path = tmp_path / "values.pt2"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/archive_format", "pt2")
        z.writestr("archive/models/model.json", "[" + "{}," * (1 << 21) + "{}]")  # 6 MiB of text
    start = time.perf_counter()
    with pytest.raises(luminal.LuminalError, match=r"models/model.json: the JSON document holds more than \d+ values"):
        luminal.load(path)
    assert time.perf_counter() - start < 5


def test_max_archive_bytes_option_and_environment(base_archive, monkeypatch) -> None:
    source, _ = base_archive
    with pytest.raises(luminal.LuminalError, match="limit of 100 bytes"):
        luminal.load(source, max_archive_bytes=100)
    luminal.load(source, max_archive_bytes=1 << 20)  # enough for this archive
    for bad in (0, -1, True, "1", 2**63):
        with pytest.raises(luminal.LuminalError, match="max_archive_bytes"):
            luminal.load(source, max_archive_bytes=bad)  # type: ignore[arg-type]
    set_env(monkeypatch, "LUMINAL_MAX_ARCHIVE_BYTES", "100")
    with pytest.raises(luminal.LuminalError, match="limit of 100"):
        luminal.load(source)
    for bad in ("abc", "0", "-5", "1e9", "12 MiB"):
        set_env(monkeypatch, "LUMINAL_MAX_ARCHIVE_BYTES", bad)
        with pytest.raises(luminal.LuminalError, match="LUMINAL_MAX_ARCHIVE_BYTES"):
            luminal.load(source)
    set_env(monkeypatch, "LUMINAL_MAX_ARCHIVE_BYTES", "1048576")
    luminal.load(source)


def test_payload_over_the_archive_budget_is_refused_before_reading(base_archive, tmp_path) -> None:
    source, _ = base_archive
    # 64 MiB of weight bytes declared for a 16-byte payload: refused by its size alone.
    path = tmp_path / "payload.pt2"
    path.write_bytes(patch_central_directory_size(source.read_bytes(), "data/weights/weight_0", 64 << 20))
    with pytest.raises(luminal.LuminalError, match="weight_0"):
        luminal.load(path, max_archive_bytes=1 << 20)
    with pytest.raises(luminal.LuminalError, match="corrupt zip archive.*weight_0"):
        luminal.load(path)


def test_entries_sharing_one_stored_file_are_refused(base_archive, tmp_path) -> None:
    """Directory records of many payloads pointing at one large stored file: each read is legal on its
    own, together they would multiply the archive's size in memory."""
    source, _ = base_archive
    copies, payload = 8, bytes(1 << 20)

    def add_aliases(config: Any) -> None:
        (meta,) = config["config"].values()
        for k in range(copies):
            alias = json.loads(json.dumps(meta))
            alias["path_name"] = f"alias_{k}"
            alias["tensor_meta"]["sizes"] = ints(len(payload) // 4)
            config["config"][f"alias_{k}"] = alias

    staged = rewrite(source, tmp_path / "staged.pt2", edit_json("_weights_config.json", add_aliases))
    with zipfile.ZipFile(staged, "a", zipfile.ZIP_STORED) as z:
        root = z.namelist()[0].split("/")[0]
        for k in range(copies):
            z.writestr(f"{root}/data/weights/alias_{k}", payload if k == 0 else b"")
    # Every alias's directory record now points at alias_0's local header and size.
    data = bytearray(staged.read_bytes())
    with zipfile.ZipFile(staged) as z:
        first = z.getinfo(f"{root}/data/weights/alias_0")
    position = data.find(b"PK\x01\x02")
    while position >= 0:
        name_length = struct.unpack_from("<H", data, position + 28)[0]
        if bytes(data[position + 46 : position + 46 + name_length]).startswith(f"{root}/data/weights/alias_".encode()):
            struct.pack_into("<III", data, position + 16, first.CRC, first.compress_size, first.file_size)
            struct.pack_into("<I", data, position + 42, first.header_offset)
        position = data.find(b"PK\x01\x02", position + 4)
    path = tmp_path / "overlap.pt2"
    path.write_bytes(bytes(data))
    with pytest.raises(luminal.LuminalError, match="corrupt zip archive .*entries overlap"):
        luminal.load(path)


# ------------------------------------------------------------------------------------------------
# Messages: invalid UTF-8, missing vs corrupt, what is not a regular file
# ------------------------------------------------------------------------------------------------
def test_invalid_utf8_in_json_is_a_luminal_error(base_archive, tmp_path) -> None:
    source, _ = base_archive

    def edit(name: str, data: bytes) -> bytes:
        return data.replace(b'"name": "expand"', b'"name": "exp\xff\xfeand"') if name.endswith("model.json") else data

    path = rewrite(source, tmp_path / "utf8.pt2", edit)
    with pytest.raises(luminal.LuminalError, match="models/model.json: invalid JSON") as error:
        luminal.load(path)
    assert "\ufffd" in str(error.value)  # the bytes, replaced


def test_invalid_utf8_in_archive_format_is_a_luminal_error(base_archive, tmp_path) -> None:
    source, _ = base_archive
    path = rewrite(source, tmp_path / "format.pt2", lambda n, d: b"pt\xff\xc3" if n.endswith("archive_format") else d)
    with pytest.raises(luminal.LuminalError, match="archive_format is"):
        luminal.load(path)


def test_invalid_utf8_in_an_entry_name_is_a_luminal_error(base_archive, tmp_path) -> None:
    source, _ = base_archive
    renamed = rewrite(
        source,
        tmp_path / "renamed.pt2",
        lambda n, d: b"{" if n.endswith("models/model.json") else d,  # and its JSON broken, to get a message
    )
    data = renamed.read_bytes().replace(b"models/model.json", b"models/m\xffdel.json")
    (tmp_path / "name.pt2").write_bytes(data)
    with pytest.raises(luminal.LuminalError, match="invalid JSON") as error:
        luminal.load(tmp_path / "name.pt2")
    assert "m\ufffddel.json" in str(error.value)


def test_missing_file_directory_fifo_and_device_are_named(tmp_path) -> None:
    with pytest.raises(luminal.LuminalError, match="no such file"):
        luminal.load(tmp_path / "absent.pt2")
    with pytest.raises(luminal.LuminalError, match="no such file"):
        luminal.load(tmp_path / "absent" / "model.pt2")
    with pytest.raises(luminal.LuminalError, match="is a directory"):
        luminal.load(tmp_path)
    with pytest.raises(luminal.LuminalError, match="not a regular file"):
        luminal.load("/dev/zero")
    fifo = tmp_path / "fifo.pt2"
    os.mkfifo(fifo)
    # In a subprocess: a reader that blocked on the FIFO (no writer ever comes) would hang the test run.
    code = f"import luminal\ntry:\n    luminal.load({str(fifo)!r})\nexcept luminal.LuminalError as e:\n    print(e)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "not a regular file" in result.stdout, result.stderr[-2000:]


def test_broken_zip_directory_is_corrupt_not_missing(base_archive, tmp_path) -> None:
    source, _ = base_archive
    data = source.read_bytes()
    truncated = tmp_path / "truncated.pt2"
    truncated.write_bytes(data[: len(data) - 30])  # the end-of-central-directory record cut off
    with pytest.raises(luminal.LuminalError, match=f"corrupt zip archive {truncated}"):
        luminal.load(truncated)
    garbage = tmp_path / "garbage.pt2"
    garbage.write_bytes(os.urandom(4096))
    with pytest.raises(luminal.LuminalError, match="corrupt zip archive"):
        luminal.load(garbage)
    empty = tmp_path / "empty.pt2"
    empty.write_bytes(b"")
    with pytest.raises(luminal.LuminalError, match="corrupt zip archive|empty"):
        luminal.load(empty)


def test_crc_mismatch_is_reported_with_the_entry(base_archive, tmp_path) -> None:
    source, _ = base_archive
    data = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as z:
        info = next(i for i in z.infolist() if i.filename.endswith("models/model.json"))
    name_length, extra_length = struct.unpack_from("<HH", data, info.header_offset + 26)  # the local header's
    payload_start = info.header_offset + 30 + name_length + extra_length
    data[payload_start + 10] ^= 0x01
    path = tmp_path / "crc.pt2"
    path.write_bytes(bytes(data))
    with pytest.raises(luminal.LuminalError, match="models/model.json"):
        luminal.load(path)
