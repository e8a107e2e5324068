#!/usr/bin/env bash
# Checks a built wheel as a user gets it (issue 16, item 5): a fresh venv with only the wheel and the
# torch it requires (from PyPI: several GB the first time), then, with libzip made unloadable, the
# extension's dependencies are listed and a torch.compile and a luminal.load of a saved .pt2 run
# against eager.
#   tools/check_wheel.sh dist/luminal-*.whl [VENV]      (make wheel-check)
# libzip is hidden in a private mount namespace (`unshare -m`: root, or unprivileged user namespaces)
# that binds an empty file over every libzip in the loader's paths: only this check sees it gone. A
# negative control first loads libzip itself there, which must fail, so the hiding is proven.
set -euo pipefail
wheel=$(realpath "${1:?usage: tools/check_wheel.sh WHEEL [VENV]}")
venv=${2:-/tmp/luminal-wheel-check}
python=${PYTHON:-python3}

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade --force-reinstall --no-deps "$wheel"
"$venv/bin/python" -m pip install -q "$wheel"  # torch, as the wheel requires it (kept if installed)
echo "installed: $("$venv/bin/python" -m pip list 2>/dev/null | grep -E '^(luminal|torch) ' | tr -s ' ' | paste -sd ',')"

cd /tmp  # not the source tree: `import luminal` must find the installed package
unshare -m bash -euo pipefail -c '
  empty=$(mktemp)
  for lib in /lib/x86_64-linux-gnu/libzip.so* /usr/lib/x86_64-linux-gnu/libzip.so* /usr/lib64/libzip.so* \
             /usr/local/lib/libzip.so*; do
    [ -e "$lib" ] && [ ! -L "$lib" ] && mount --bind "$empty" "$lib"
  done
  if "$1/bin/python" -c "import ctypes; ctypes.CDLL(\"libzip.so.4\")" 2>/dev/null; then
    echo "negative control failed: libzip.so.4 still loads" >&2; exit 1
  fi
  echo "libzip hidden: ctypes.CDLL(\"libzip.so.4\") fails"
  "$1/bin/python" - <<"EOF"
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
    print("torch.compile(backend='luminal') matches eager:", out.shape)

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
EOF
' check "$venv"
