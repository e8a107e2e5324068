"""Run by tools/check_wheel.sh inside the fresh venv, with libzip hidden: the installed wheel's extension
loads without it, and a torch.compile and a luminal.load of a saved .pt2 match eager."""

import os
import subprocess
import tempfile

import torch

import luminal
import luminal._C

extension = luminal._C.__file__
assert "site-packages" in extension, f"luminal imported from {extension}, not the installed wheel"
ldd = subprocess.run(["ldd", extension], capture_output=True, text=True, check=True).stdout
print("ldd", os.path.basename(extension))
print("".join("  " + line.strip() + "\n" for line in ldd.splitlines()), end="")
assert "zip" not in ldd and "not found" not in ldd, ldd

torch.manual_seed(0)
model = torch.nn.Linear(4, 4).eval()
x = torch.randn(2, 4)
with torch.no_grad():
    compiled = torch.compile(model, backend="luminal")
    out = compiled(x)
    torch.testing.assert_close(out, model(x))
    print('torch.compile(backend="luminal") matches eager:', out.shape)

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "linear.pt2")
        torch.export.save(torch.export.export(model, (x,)).run_decompositions(), path)  # Core ATen
        program = luminal.load(path)
        y = torch.randn(2, 4)
        (loaded,) = program(y)
        torch.testing.assert_close(loaded, model(y))
        print("luminal.load of a saved .pt2 matches eager:", loaded.shape)

with open("/proc/self/maps") as maps:
    mapped = maps.read()
assert "libzip" not in mapped
print("no libzip mapped in the process; wheel check passed")
