"""The hand-written mini-DLRM kernel of benchmarks/reference_kernels.py (the reference row luminal's
megakernel is measured against) and the private binding that launches it (_C._ReferenceKernel).

On the CPU: its source compiles with NVRTC and holds its entry point, and it refuses models it was
not written for. On CUDA: its output equals eager's on fresh random inputs (bags of one, of three,
ragged and empty; int64 and int32 indices; several batch sizes), an index outside its table gives
NaN, and the binding checks the arguments against the kernel's parameters.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

import luminal
from helpers import assert_same
from luminal import _C

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


reference = _load("luminal_reference_kernels", ROOT / "benchmarks" / "reference_kernels.py")
dlrm = _load("luminal_dlrm_example_model", ROOT / "examples" / "dlrm" / "model.py")

needs_cuda_engine = pytest.mark.skipif(not _C.has_cuda_engine(), reason="luminal was built without the CUDA engine")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@needs_cuda_engine
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_source_compiles_with_nvrtc(index_dtype: torch.dtype, arch: str) -> None:
    source = reference.mini_dlrm_source(index_dtype)
    assert _C._ReferenceKernel.check_compiles(source, reference.KERNEL_NAME, arch) > 0


@needs_cuda_engine
def test_compile_check_names_a_missing_entry_point_and_compiler_errors() -> None:
    source = reference.mini_dlrm_source(torch.int64)
    with pytest.raises(luminal.LuminalError, match="no symbol 'mini_dlrm'"):
        _C._ReferenceKernel.check_compiles(source, "mini_dlrm", "sm_90")
    with pytest.raises(luminal.LuminalError, match="NVRTC failed"):
        _C._ReferenceKernel.check_compiles(source.replace("fmaf(", "fmaf_missing("), reference.KERNEL_NAME, "sm_90")


def test_other_index_dtypes_are_refused() -> None:
    with pytest.raises(ValueError, match="int64 or int32"):
        reference.mini_dlrm_source(torch.int16)


@pytest.mark.parametrize(
    "config",
    [
        dlrm.DLRMConfig(tables=(10, 20)),
        dlrm.DLRMConfig(bottom=(8, 8), top=(8, 1)),
        dlrm.DLRMConfig(final_sigmoid=False),
        dlrm.DLRMConfig(mode="mean"),
    ],
    ids=["two-tables", "dim-8", "no-sigmoid", "mean-bags"],
)
def test_other_models_are_refused(config: Any) -> None:
    with pytest.raises(ValueError, match="written for"):
        reference.MiniDLRMReference(dlrm.DLRM(config).eval())


def test_parameters_on_the_cpu_are_refused() -> None:
    with pytest.raises(ValueError, match="CUDA parameters"):
        reference.MiniDLRMReference(dlrm.DLRM(dlrm.MINI).eval())


def _ragged_inputs(batch: int, index_dtype: torch.dtype, longest: int) -> tuple[Any, ...]:
    """Random bags of 0..longest indices per sample (empty bags included)."""
    dense = torch.randn(batch, reference.DENSE, device="cuda")
    indices, offsets = [], []
    for rows in dlrm.MINI.tables:
        lengths = [random.randint(0, longest) for _ in range(batch)]
        starts = [0]
        for n in lengths[:-1]:
            starts.append(starts[-1] + n)
        indices.append(torch.randint(0, rows, (sum(lengths),), dtype=index_dtype, device="cuda"))
        offsets.append(torch.tensor(starts, dtype=index_dtype, device="cuda"))
    return dense, indices, offsets


@needs_gpu
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("bags", ["one", "three", "ragged"])
def test_matches_eager(index_dtype: torch.dtype, bags: str) -> None:
    random.seed(7)
    model = dlrm.DLRM(dlrm.MINI).cuda().eval()
    kernel = reference.MiniDLRMReference(model)
    for batch in (1, 2, 129, 2048, 3001):
        if bags == "ragged":
            inputs = _ragged_inputs(batch, index_dtype, longest=4)
        else:
            inputs = dlrm.make_inputs(dlrm.MINI, batch, 1 if bags == "one" else 3, "cuda", index_dtype)
        kernel.validate(*inputs)
        assert_same(kernel(*inputs), model(*inputs))


@needs_gpu
def test_index_outside_its_table_gives_nan() -> None:
    model = dlrm.DLRM(dlrm.MINI).cuda().eval()
    kernel = reference.MiniDLRMReference(model)
    dense, indices, offsets = dlrm.make_inputs(dlrm.MINI, 64, 1, "cuda")
    indices[2][17] = dlrm.MINI.tables[2]  # one past the end of table 2
    out = kernel(dense, indices, offsets).cpu()
    assert torch.isnan(out[17]).all()
    assert torch.isfinite(torch.cat([out[:17], out[18:]])).all()


@needs_gpu
def test_binding_checks_the_arguments() -> None:
    kernel = _C._ReferenceKernel(reference.mini_dlrm_source(torch.int64), reference.KERNEL_NAME)
    out = torch.empty(4, device="cuda")
    with pytest.raises(luminal.LuminalError, match="not a CUDA tensor"):
        kernel.launch(1, 32, 0, [torch.zeros(4)])
    with pytest.raises(luminal.LuminalError, match="positive"):
        kernel.launch(0, 32, 0, [out])
    if torch.version.cuda and tuple(int(p) for p in torch.version.cuda.split(".")[:2]) >= (12, 4):
        # cuFuncGetParamInfo (drivers for CUDA 12.4 and newer) says what the kernel takes.
        with pytest.raises(luminal.LuminalError, match="takes 26 parameters, given 1"):
            kernel.launch(1, 32, 0, [out])
    missing = _C._ReferenceKernel(reference.mini_dlrm_source(torch.int64), "no_such_kernel")
    with pytest.raises(luminal.LuminalError, match="no entry point 'no_such_kernel'"):
        missing.launch(1, 32, 0, [out])
