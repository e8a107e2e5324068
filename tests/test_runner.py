"""luminal-run, the C++ runner: .pt2 archives written by torch.export.save, inputs as .npy files,
run with no Python. Its outputs must be bit-identical to ``luminal.load(path)(*inputs)`` (the same
CPU engine, from Python) and close to eager.

The executable is LUMINAL_RUN when set (the Makefile sets it), else build/dev/luminal-run: the
build directory of ``make build`` and of the developer build. A missing executable fails the tests
(it is part of the build), it does not skip them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.export import Dim

import luminal
from helpers import assert_same, rand

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "dlrm"))
from model import DLRM, MINI, make_inputs  # noqa: E402


@pytest.fixture(scope="module")
def runner() -> Path:
    path = Path(os.environ.get("LUMINAL_RUN", ROOT / "build" / "dev" / "luminal-run"))
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"luminal-run not found at {path}: build it (make build) or set LUMINAL_RUN")
    return path


def to_npy(tensor: torch.Tensor, path: Path) -> None:
    """bfloat16 has no NumPy dtype: its bits are saved as 2-byte records ('|V2'), as luminal-run reads them."""
    tensor = tensor.detach().contiguous()
    if tensor.dtype == torch.bfloat16:
        np.save(path, tensor.view(torch.int16).numpy().view("V2"))
    else:
        np.save(path, tensor.numpy())


def from_npy(path: Path, dtype: torch.dtype) -> torch.Tensor:
    array = np.load(path)
    if dtype == torch.bfloat16:
        assert array.dtype == np.dtype("V2"), f"{path}: {array.dtype}"
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


def raw_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def export_to(path: Path, model: torch.nn.Module, args: tuple[object, ...], dynamic_shapes: object = None) -> Path:
    """torch.export.save of the Core ATen program (what luminal translates)."""
    torch.export.save(torch.export.export(model, args, dynamic_shapes=dynamic_shapes).run_decompositions(), path)
    return path


def run_cli(runner: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(runner), *map(str, args)], capture_output=True, text=True, timeout=300, check=False)


def run_runner(runner: Path, archive: Path, inputs: Sequence[torch.Tensor], work: Path) -> list[Path]:
    """Runs luminal-run on `inputs` (saved as .npy in `work`); returns the output files in order."""
    arguments: list[str | Path] = [archive]
    for k, tensor in enumerate(inputs):
        path = work / f"input_{k}.npy"
        to_npy(tensor, path)
        arguments += ["--input", path]
    out = work / "out"
    result = run_cli(runner, *arguments, "--output-dir", out)
    assert result.returncode == 0, f"luminal-run failed ({result.returncode}): {result.stderr}"
    written = sorted(out.glob("output_*.npy"), key=lambda p: int(p.stem.split("_")[1]))
    updated = list(out.glob("updated_input_*.npy"))
    assert len(result.stdout.splitlines()) == len(written) + len(updated), result.stdout
    return written


def check_against_python(
    runner: Path,
    archive: Path,
    inputs: Sequence[torch.Tensor],
    eager: Sequence[torch.Tensor],
    work: Path,
    tolerance_scale: float = 1.0,
) -> None:
    """luminal-run's outputs: the bytes of luminal.load's, and close to eager's."""
    python = luminal.load(archive)(*inputs)
    written = run_runner(runner, archive, inputs, work)
    assert len(written) == len(python) == len(eager)
    for k, (path, expected, reference) in enumerate(zip(written, python, eager, strict=True)):
        got = from_npy(path, expected.dtype)
        assert got.dtype == expected.dtype and got.shape == expected.shape, (k, got.dtype, got.shape, expected.shape)
        assert raw_bytes(got) == raw_bytes(expected), f"output {k} differs from luminal.load's"
        assert_same(got, reference, tolerance_scale)


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


@pytest.mark.parametrize("batch", [1, 7])
def test_mlp_matches_python_and_eager(runner: Path, tmp_path: Path, batch: int) -> None:
    model = MLP().eval()
    archive = export_to(tmp_path / "mlp.pt2", model, (rand(batch, 8),))
    for seed in range(2):
        torch.manual_seed(seed)
        x = rand(batch, 8)
        with torch.no_grad():
            eager = [model(x)]
        work = tmp_path / f"run{seed}"
        work.mkdir()
        check_against_python(runner, archive, [x], eager, work)


def test_mlp_with_a_dynamic_batch(runner: Path, tmp_path: Path) -> None:
    model = MLP().eval()
    dynamic = ({0: Dim("batch", min=1, max=64)},)
    archive = export_to(tmp_path / "mlp_dynamic.pt2", model, (rand(4, 8),), dynamic)
    listing = run_cli(runner, archive, "--list")
    assert listing.returncode == 0, listing.stderr
    assert "input 0 x: float32[" in listing.stdout and "symbol " in listing.stdout, listing.stdout
    for batch in [1, 5, 33]:
        x = rand(batch, 8)
        with torch.no_grad():
            eager = [model(x)]
        work = tmp_path / f"batch{batch}"
        work.mkdir()
        check_against_python(runner, archive, [x], eager, work)


def test_mini_dlrm_matches_python_and_eager(runner: Path, tmp_path: Path) -> None:
    model = DLRM(MINI).eval()
    archive = export_to(tmp_path / "dlrm.pt2", model, make_inputs(MINI, 16))
    for seed in range(2):
        dense, indices, offsets = make_inputs(MINI, 16, bag_size=1, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            eager = [model(dense, indices, offsets)]
        work = tmp_path / f"run{seed}"
        work.mkdir()
        check_against_python(runner, archive, [dense, *indices, *offsets], eager, work, tolerance_scale=4)


class EveryDtype(torch.nn.Module):
    """One output per dtype the .npy reader accepts, computed from inputs of that dtype."""

    def forward(
        self,
        f32: torch.Tensor, f64: torch.Tensor, f16: torch.Tensor, bf16: torch.Tensor,
        i64: torch.Tensor, i32: torch.Tensor, i16: torch.Tensor, i8: torch.Tensor, u8: torch.Tensor, b: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:  # fmt: skip
        return (
            f32 * 2 + 1, f64.sin(), f16 * f16, bf16 + 1, i64 * 3, i32 - 7, i16 * 2, i8 + 1, u8 + 1, ~b,
            (f32 > 0) & b, i64.sum(),
        )  # fmt: skip


def test_every_dtype_round_trips_through_npy(runner: Path, tmp_path: Path) -> None:
    model = EveryDtype()
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
              torch.int8, torch.uint8, torch.bool]  # fmt: skip
    inputs = [rand(3, 5, dtype=dtype) for dtype in dtypes]
    archive = export_to(tmp_path / "dtypes.pt2", model, tuple(inputs))
    inputs = [rand(3, 5, dtype=dtype) for dtype in dtypes]
    check_against_python(runner, archive, inputs, list(model(*inputs)), tmp_path)


class AddInPlace(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
        x.add_(y)
        return x * 2, x.shape[0]


def test_inputs_updated_in_place_and_integer_outputs(runner: Path, tmp_path: Path) -> None:
    dynamic = ({0: Dim("rows")}, {0: Dim("rows")})
    archive = export_to(tmp_path / "inplace.pt2", AddInPlace(), (rand(3, 4), rand(3, 4)), dynamic)
    x, y = rand(5, 4), rand(5, 4)
    updated = x.clone()
    python = luminal.load(archive)(updated, y)  # updates `updated` in place
    eager_x = x.clone()
    eager = AddInPlace()(eager_x, y)
    written = run_runner(runner, archive, [x, y], tmp_path)
    assert [p.name for p in written] == ["output_0.npy", "output_1.npy"]
    assert raw_bytes(from_npy(written[0], torch.float32)) == raw_bytes(python[0])
    assert_same(from_npy(written[0], torch.float32), eager[0])
    count = np.load(written[1])
    assert count.dtype == np.int64 and count.shape == () and int(count) == python[1] == eager[1] == 5
    new_x = from_npy(tmp_path / "out" / "updated_input_0.npy", torch.float32)
    assert raw_bytes(new_x) == raw_bytes(updated)
    assert_same(new_x, eager_x)
    assert not torch.equal(new_x, x)


def test_errors_are_one_line_with_a_nonzero_exit(runner: Path, tmp_path: Path) -> None:
    model = MLP().eval()
    archive = export_to(tmp_path / "mlp.pt2", model, (rand(2, 8),))
    good, wrong_dtype, wrong_shape = tmp_path / "good.npy", tmp_path / "f64.npy", tmp_path / "shape.npy"
    to_npy(rand(2, 8), good)
    to_npy(rand(2, 8, dtype=torch.float64), wrong_dtype)
    to_npy(rand(2, 9), wrong_shape)
    truncated = tmp_path / "truncated.npy"
    truncated.write_bytes(good.read_bytes()[:-3])
    big_endian = tmp_path / "big.npy"
    np.save(big_endian, rand(2, 8).numpy().astype(">f4"))
    not_an_archive = tmp_path / "junk.pt2"
    not_an_archive.write_bytes(b"not a zip file")
    out = tmp_path / "out"
    cases: list[tuple[list[str | Path], str]] = [
        ([archive, "--output-dir", out], "takes 1 inputs, 0 --input files given"),
        ([archive, "--input", good, "--input", good, "--output-dir", out], "takes 1 inputs, 2 --input files"),
        ([archive, "--input", wrong_dtype, "--output-dir", out], "must be float32"),
        ([archive, "--input", wrong_shape, "--output-dir", out], "input #0"),
        ([archive, "--input", truncated, "--output-dir", out], "but the file holds 61 bytes of data"),
        ([archive, "--input", big_endian, "--output-dir", out], "'>f4' is not supported"),
        ([archive, "--input", tmp_path / "missing.npy", "--output-dir", out], "cannot open"),
        ([not_an_archive, "--list"], "junk.pt2"),
        ([tmp_path / "missing.pt2", "--list"], "missing.pt2"),
    ]
    for arguments, message in cases:
        result = run_cli(runner, *arguments)
        assert result.returncode == 1, (arguments, result.returncode, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("luminal-run: error: "), result.stderr
        assert message in lines[0], (message, lines[0])
    assert not out.exists(), "a failed run writes nothing"
    usage = run_cli(runner, archive, "--bogus")
    assert usage.returncode == 2 and "unknown option --bogus" in usage.stderr
    assert run_cli(runner, archive).returncode == 2  # neither --output-dir nor --list
