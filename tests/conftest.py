"""Shared fixtures: every test compares luminal against eager with fresh random inputs."""

from __future__ import annotations

import os
from collections.abc import Iterator

# Poison outputs and intermediates so that elements a kernel fails to write cannot hide.
os.environ.setdefault("LUMINAL_POISON_OUTPUTS", "1")
# Compile every graph's generated CUDA with NVRTC too (no GPU needed): codegen errors fail the tests.
os.environ.setdefault("LUMINAL_CHECK_CUDA_CODEGEN", "sm_90")

import pytest  # noqa: E402
import torch  # noqa: E402

import luminal  # noqa: E402

# Under pytest-xdist (make test runs a worker per core), each worker takes its share of the cores,
# so that torch's CPU kernels do not oversubscribe the machine.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(autouse=True)
def settings_read_again_after_the_test() -> Iterator[None]:
    """luminal reads the environment once; a test that changes it calls helpers.set_env, which
    reloads. Autouse fixtures are set up before `monkeypatch`, so this teardown runs after the
    monkeypatch is undone and luminal reads the restored environment."""
    yield
    luminal.settings.reload()


@pytest.fixture(autouse=True)
def fresh_dynamo() -> None:
    torch._dynamo.reset()
    luminal.reset_compile_count()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def exact_eager_convolutions() -> Iterator[None]:
    """Eager's cuDNN convolutions use TF32 by default (about 1e-3 relative error); luminal computes in
    float32, so references are taken in full float32 too."""
    previous = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = previous


@pytest.fixture(autouse=True)
def no_grad_unless_marked(request: pytest.FixtureRequest) -> None:
    """luminal is inference-only: with grad mode on, a graph whose outputs require grad (a module's
    parameters do) runs in eager with a LuminalFallbackWarning. Tests check inference, so they run
    under torch.no_grad(); tests of the grad-mode policy are marked ``grad_mode``."""
    if request.node.get_closest_marker("grad_mode"):
        yield
        return
    with torch.no_grad():
        yield
