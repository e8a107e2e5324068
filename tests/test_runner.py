"""luminal-run, the C++ runner: luminal packages (luminal.compile(...).save) and .pt2 archives
written by torch.export.save, inputs as .npy files, run with no Python on the CPU or the CUDA
engine. Its outputs must be bit-identical to ``luminal.load(path)(*inputs)`` (the same engine, from
Python, on the same device) and close to eager.

On CUDA the bits match when the runner makes the choices the Python process made: the test runs
Python first with its own LUMINAL_CACHE_DIR, which the runner (a child process) inherits and reads
the measured choices from (a package also carries them: the package test gives the runner a fresh
cache directory), and it points the runner at the CUDA libraries this process loaded. It checks both:
the runner reports no choice measured anew and the same library files.

The executable is LUMINAL_RUN when set (the Makefile sets it), else build/dev/luminal-run: the
build directory of ``make build`` and of the developer build. A missing executable fails the tests
(it is part of the build), it does not skip them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.export import Dim

import luminal
from helpers import RotaryLinear, assert_same, rand, set_env
from luminal._cuda_libraries import _candidate_dirs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "dlrm"))
from model import DLRM, MINI, make_inputs  # noqa: E402


@pytest.fixture(scope="module")
def runner() -> Path:
    path = Path(os.environ.get("LUMINAL_RUN", ROOT / "build" / "dev" / "luminal-run"))
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"luminal-run not found at {path}: build it (make build) or set LUMINAL_RUN")
    return path


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache directory of this test's own, shared by Python and the runners it starts (the
    environment is inherited): the runner finds the choices Python measured."""
    cache = tmp_path / "cache"
    set_env(monkeypatch, "LUMINAL_CACHE_DIR", str(cache))
    yield cache


_CUDA_LIBRARIES = ("libnvrtc", "libcublasLt", "libcudnn")


def loaded_cuda_libraries() -> dict[str, str]:
    """The CUDA libraries this process has mapped (by the names luminal-run --verbose uses), their real paths."""
    found: dict[str, str] = {}
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split(maxsplit=5)[-1] if len(line.split()) >= 6 else ""
        name = os.path.basename(path)
        for library in _CUDA_LIBRARIES:
            if re.fullmatch(rf"{library}\.so(\.[0-9]+)*", name):
                found.setdefault(library, os.path.realpath(path))
    return found


def device_arguments(device: str) -> list[str]:
    """luminal-run's options for the choices this process makes on `device`: the CUDA libraries'
    directories (those this process loaded first, then luminal's search list; NVRTC also serves the
    CPU's LUMINAL_CHECK_CUDA_CODEGEN compile) and on CUDA, TF32 as torch has it."""
    arguments = []
    dirs = [os.path.dirname(path) for path in loaded_cuda_libraries().values()] + _candidate_dirs()
    for directory in dict.fromkeys(dirs):
        arguments += ["--cuda-lib-dir", directory]
    if device == "cpu":
        return arguments
    arguments += ["--device", "cuda"]
    if torch.backends.cuda.matmul.allow_tf32:
        arguments.append("--tf32-matmul")
    if torch.backends.cudnn.allow_tf32:
        arguments.append("--tf32-convolution")
    return arguments


def check_same_choices(device: str, report: str) -> None:
    """On CUDA: the runner measured no choice anew (it took Python's from the cache) and loaded the
    library files this process uses."""
    if device == "cpu":
        assert "engine: cpu" in report, report
        return
    assert "engine: cuda:0" in report, report
    counts = re.search(r"cuda choices: (\d+) from the cache, (\d+) measured", report)
    assert counts is not None and int(counts.group(2)) == 0, report
    used = dict(re.findall(r"^(lib\w+): (/\S+)$", report, re.MULTILINE))
    for library, path in loaded_cuda_libraries().items():
        assert os.path.realpath(used.get(library, "")) == path, (library, path, report)


def to_npy(tensor: torch.Tensor, path: Path) -> None:
    """bfloat16 has no NumPy dtype: its bits are saved as 2-byte records ('|V2'), as luminal-run reads them."""
    tensor = tensor.detach().cpu().contiguous()
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
    return tensor.cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def export_to(path: Path, model: torch.nn.Module, args: tuple[object, ...], dynamic_shapes: object = None) -> Path:
    """torch.export.save of the Core ATen program (what luminal translates)."""
    torch.export.save(torch.export.export(model, args, dynamic_shapes=dynamic_shapes).run_decompositions(), path)
    return path


def run_cli(runner: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(runner), *map(str, args)], capture_output=True, text=True, timeout=300, check=False)


def run_runner(
    runner: Path,
    archive: Path,
    inputs: Sequence[torch.Tensor],
    work: Path,
    device: str = "cpu",
    env: dict[str, str] | None = None,
) -> list[Path]:
    """Runs luminal-run on `inputs` (saved as .npy in `work`) on `device`, after this process ran
    the same program there; returns the output files in order."""
    arguments: list[str | Path] = [archive, *device_arguments(device), "--verbose"]
    for k, tensor in enumerate(inputs):
        path = work / f"input_{k}.npy"
        to_npy(tensor, path)
        arguments += ["--input", path]
    out = work / "out"
    result = subprocess.run(
        [str(runner), *map(str, arguments), "--output-dir", str(out)],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert result.returncode == 0, f"luminal-run failed ({result.returncode}): {result.stderr}"
    check_same_choices(device, result.stderr)
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
    device: str = "cpu",
    call: Any = None,
    env: dict[str, str] | None = None,
) -> None:
    """luminal-run's outputs on `device`: the bytes of luminal.load's there (`call`: how the loaded
    program takes the inputs), and close to eager's."""
    loaded = luminal.load(archive)
    on_device = [t.to(device) for t in inputs]
    python = list(call(loaded, on_device) if call is not None else loaded(*on_device))
    written = run_runner(runner, archive, inputs, work, device, env)
    eager = list(eager)
    assert len(written) == len(python) == len(eager)
    for k, (path, expected, reference) in enumerate(zip(written, python, eager, strict=True)):
        expected = expected.cpu()
        got = from_npy(path, expected.dtype)
        assert got.dtype == expected.dtype and got.shape == expected.shape, (k, got.dtype, got.shape, expected.shape)
        assert raw_bytes(got) == raw_bytes(expected), f"output {k} differs from luminal.load's"
        assert_same(got, reference.cpu(), tolerance_scale)


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def save_package(path: Path, model: torch.nn.Module, args: tuple[Any, ...]) -> Path:
    """luminal.compile(...).save after one call (on CUDA the call compiles the kernels and measures
    the choices the package then carries)."""
    compiled = luminal.compile(model, args, options={"strict": True})
    compiled(*args)
    compiled.save(path)
    return path


@pytest.mark.parametrize("batch", [1, 7])
def test_mlp_matches_python_and_eager(runner: Path, tmp_path: Path, device: str, batch: int) -> None:
    model = MLP().eval().to(device)
    pt2 = export_to(tmp_path / "mlp.pt2", model, (rand(batch, 8, device=device),))
    package = save_package(tmp_path / "mlp.luminal", model, (rand(batch, 8, device=device),))
    for seed in range(2):
        torch.manual_seed(seed)
        x = rand(batch, 8, device=device)
        with torch.no_grad():
            eager = [model(x)]
        for archive in (pt2, package):
            work = tmp_path / f"run{seed}_{archive.suffix[1:]}"
            work.mkdir()
            check_against_python(runner, archive, [x], eager, work, device=device, call=call_flat)
    assert luminal.load(package).stats()["aot"]["loaded"]


def call_flat(loaded: Any, inputs: list[torch.Tensor]) -> list[Any]:
    """A .pt2 program returns a list; a package's module returns the model's output structure."""
    if isinstance(loaded, luminal.LuminalModule):
        out = loaded(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]
    return list(loaded(*inputs))


def test_a_package_carries_its_measured_choices(
    runner: Path, tmp_path: Path, device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner, given a fresh cache directory, takes the package's cache entries: on CUDA it then
    measures nothing anew and reproduces the saving process's bits."""
    model = MLP().eval().to(device)
    package = save_package(tmp_path / "mlp.luminal", model, (rand(64, 8, device=device),))
    x = rand(64, 8, device=device)
    with torch.no_grad():
        eager = [model(x)]
    fresh = tmp_path / "fresh_cache"
    env = {**os.environ, "LUMINAL_CACHE_DIR": str(fresh)}
    check_against_python(runner, package, [x], eager, tmp_path, device=device, call=call_flat, env=env)
    with zipfile.ZipFile(package) as archive:
        carried = set(json.loads(archive.read("luminal_module/meta.json"))["cache_entries"])
    installed = {p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file()}
    assert installed == carried, "the runner built what the package carries anew (other CUDA libraries?)"
    assert carried or device == "cpu", "on CUDA a package carries its kernels and choices"


def test_mlp_with_a_dynamic_batch(runner: Path, tmp_path: Path, device: str) -> None:
    model = MLP().eval().to(device)
    dynamic = ({0: Dim("batch", min=1, max=64)},)
    archive = export_to(tmp_path / "mlp_dynamic.pt2", model, (rand(4, 8, device=device),), dynamic)
    listing = run_cli(runner, archive, "--list")
    assert listing.returncode == 0, listing.stderr
    assert "input 0 x: float32[" in listing.stdout and "symbol " in listing.stdout, listing.stdout
    for batch in [1, 5, 33]:
        x = rand(batch, 8, device=device)
        with torch.no_grad():
            eager = [model(x)]
        work = tmp_path / f"batch{batch}"
        work.mkdir()
        check_against_python(runner, archive, [x], eager, work, device=device)


def dlrm_call(loaded: Any, inputs: list[torch.Tensor]) -> list[Any]:
    """The DLRM's flat inputs (dense, the indices, the offsets) in its call structure for a package."""
    if not isinstance(loaded, luminal.LuminalModule):
        return list(loaded(*inputs))
    tables = (len(inputs) - 1) // 2
    return [loaded(inputs[0], inputs[1 : 1 + tables], inputs[1 + tables :])]


def test_mini_dlrm_matches_python_and_eager(runner: Path, tmp_path: Path, device: str) -> None:
    model = DLRM(MINI).eval().to(device)
    pt2 = export_to(tmp_path / "dlrm.pt2", model, make_inputs(MINI, 16, device=device))
    package = save_package(tmp_path / "dlrm.luminal", model, make_inputs(MINI, 16, device=device))
    for seed in range(2):
        generator = torch.Generator().manual_seed(seed)
        dense, indices, offsets = make_inputs(MINI, 16, bag_size=1, device=device, generator=generator)
        with torch.no_grad():
            eager = [model(dense, indices, offsets)]
        for archive in (pt2, package):
            work = tmp_path / f"run{seed}_{archive.suffix[1:]}"
            work.mkdir()
            inputs = [dense, *indices, *offsets]
            check_against_python(runner, archive, inputs, eager, work, 4, device=device, call=dlrm_call)


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


def test_every_dtype_round_trips_through_npy(runner: Path, tmp_path: Path, device: str) -> None:
    model = EveryDtype()
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
              torch.int8, torch.uint8, torch.bool]  # fmt: skip
    inputs = [rand(3, 5, dtype=dtype) for dtype in dtypes]
    archive = export_to(tmp_path / "dtypes.pt2", model, tuple(inputs))
    inputs = [rand(3, 5, dtype=dtype) for dtype in dtypes]
    check_against_python(runner, archive, inputs, list(model(*inputs)), tmp_path, device=device)


class AddInPlace(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
        x.add_(y)
        return x * 2, x.shape[0]


def test_inputs_updated_in_place_and_integer_outputs(runner: Path, tmp_path: Path, device: str) -> None:
    dynamic = ({0: Dim("rows")}, {0: Dim("rows")})
    archive = export_to(tmp_path / "inplace.pt2", AddInPlace(), (rand(3, 4), rand(3, 4)), dynamic)
    x, y = rand(5, 4), rand(5, 4)
    updated = x.clone().to(device)
    python = luminal.load(archive)(updated, y.to(device))  # updates `updated` in place
    eager_x = x.clone()
    eager = AddInPlace()(eager_x, y)
    written = run_runner(runner, archive, [x, y], tmp_path, device)
    assert [p.name for p in written] == ["output_0.npy", "output_1.npy"]
    assert raw_bytes(from_npy(written[0], torch.float32)) == raw_bytes(python[0])
    assert_same(from_npy(written[0], torch.float32), eager[0])
    count = np.load(written[1])
    assert count.dtype == np.int64 and count.shape == () and int(count) == python[1] == eager[1] == 5
    new_x = from_npy(tmp_path / "out" / "updated_input_0.npy", torch.float32)
    assert raw_bytes(new_x) == raw_bytes(updated)
    assert_same(new_x, eager_x)
    assert not torch.equal(new_x, x)


class CheckedCounts(torch.nn.Module):
    """A run-time assert kept by the export (a check output of the program, never written)."""

    def forward(self, classes: torch.Tensor) -> torch.Tensor:
        torch._assert_async((classes < 6).all(), "a class is 6 or more")
        return (classes.unsqueeze(-1) == torch.arange(6)).sum(0)


def test_run_time_asserts_are_checked_and_not_written(runner: Path, tmp_path: Path, device: str) -> None:
    model = CheckedCounts()
    archive = export_to(tmp_path / "counts.pt2", model, (torch.tensor([0, 5, 2]),))
    classes = torch.tensor([3, 1, 5])
    check_against_python(runner, archive, [classes], [model(classes)], tmp_path, device=device)
    out_of_range = tmp_path / "out_of_range.npy"
    to_npy(torch.tensor([1, 6, 2]), out_of_range)
    arguments = [archive, *device_arguments(device), "--input", out_of_range, "--output-dir", tmp_path / "bad"]
    expect_error(runner, arguments, "a class is 6 or more")


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


def expect_error(runner: Path, arguments: Sequence[str | Path], message: str) -> None:
    result = run_cli(runner, *arguments)
    assert result.returncode == 1, (arguments, result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("luminal-run: error: "), result.stderr
    assert message in lines[0], (message, lines[0])


def test_a_device_that_is_not_there_is_a_clear_error(runner: Path, tmp_path: Path) -> None:
    archive = export_to(tmp_path / "mlp.pt2", MLP().eval(), (rand(2, 8),))
    x = tmp_path / "x.npy"
    to_npy(rand(2, 8), x)
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        device, message = f"cuda:{count}", f"cuda:{count} is not available: this machine has {count} CUDA device"
    else:
        device, message = "cuda", "no CUDA device is available"
    expect_error(runner, [archive, "--device", device, "--input", x, "--output-dir", tmp_path / "out"], message)
    assert not (tmp_path / "out").exists()


def rewrite_package(source: Path, target: Path, change: dict[str, bytes | None]) -> Path:
    """A copy of the package with entries replaced (bytes) or removed (None)."""
    with zipfile.ZipFile(source) as package, zipfile.ZipFile(target, "w") as out:
        for name in package.namelist():
            if name in change:
                if change[name] is not None:
                    out.writestr(name, change[name])
            else:
                out.writestr(name, package.read(name))
    return target


def test_package_inputs_and_contents_are_checked(runner: Path, tmp_path: Path, device: str) -> None:
    model = MLP().eval().to(device)
    package = save_package(tmp_path / "mlp.luminal", model, (rand(4, 8, device=device),))
    listing = run_cli(runner, package, "--list")
    assert listing.returncode == 0 and "input 0 argument [0]: float32[4, 8]" in listing.stdout, listing
    files = {name: tmp_path / f"{name}.npy" for name in ("good", "f64", "shape")}
    to_npy(rand(4, 8), files["good"])
    to_npy(rand(4, 8, dtype=torch.float64), files["f64"])
    to_npy(rand(4, 9), files["shape"])
    out = tmp_path / "out"
    on = [*device_arguments(device), "--output-dir", out]
    expect_error(runner, [package, "--input", files["f64"], *on], "input #0 'argument [0]' must be float32")
    expect_error(runner, [package, "--input", files["shape"], *on], "input #0 'argument [0]'")
    expect_error(runner, [package, *on], "takes 1 inputs, 0 --input files given")

    with zipfile.ZipFile(package) as archive:
        meta = json.loads(archive.read("luminal_module/meta.json"))
        index = json.loads(archive.read("luminal_module/state.json"))
    old = rewrite_package(
        package,
        tmp_path / "old.luminal",
        {"luminal_module/meta.json": json.dumps({**meta, "format": "luminal-module 1"}).encode()},
    )
    expect_error(runner, [old, "--list"], "load it with luminal.load and save it again")
    short = rewrite_package(package, tmp_path / "short.luminal", {"luminal_module/state/0.bin": bytes(10)})
    expect_error(runner, [short, "--list"], "needs 1024 bytes, its entry holds 10")
    index["tensors"][1]["sizes"] = [31]
    resized = rewrite_package(
        package, tmp_path / "resized.luminal", {"luminal_module/state.json": json.dumps(index).encode()}
    )
    expect_error(runner, [resized, "--list"], "does not match its spec torch.float32[32]")
    outside = {"luminal_module/meta.json": json.dumps({**meta, "cache_entries": ["../outside"]}).encode()}
    expect_error(runner, [rewrite_package(package, tmp_path / "c.luminal", outside), "--list"], "outside the cache")
    missing = rewrite_package(package, tmp_path / "missing.luminal", {"luminal_module/state/2.bin": None})
    expect_error(runner, [missing, "--list"], "state/2.bin")
    assert not out.exists(), "a failed run writes nothing"


def test_a_complex_buffer_in_the_program_and_the_package(runner: Path, tmp_path: Path, device: str) -> None:
    """Meta's Llama layout (freqs_cis kept on the module as complex64): the .pt2 holds it as a constant,
    the package in its state; both bind it as pairs of floats."""
    torch.manual_seed(3)
    model = RotaryLinear(dim=16, heads=2, max_seq=12).eval().to(device)
    x = rand(2, 7, 16, device=device)
    pt2 = export_to(tmp_path / "rotary.pt2", model, (x,))
    with torch.no_grad():
        package = save_package(tmp_path / "rotary.luminal", model, (x,))
        eager = [model(x)]
    for archive in (pt2, package):
        work = tmp_path / f"run_{archive.suffix[1:]}"
        work.mkdir()
        check_against_python(runner, archive, [x], eager, work, device=device, call=call_flat)
