#!/usr/bin/env bash
# Checks a built wheel as a user gets it (issue 16, item 5): a fresh venv with only the wheel and the
# torch it requires (from PyPI: several GB the first time), then, with libzip made unloadable, the
# extension's dependencies are listed and a torch.compile and a luminal.load of a saved .pt2 run
# against eager (tools/wheel_smoke.py).
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

here=$(dirname "$(realpath "$0")")
cd /tmp  # not the source tree: `import luminal` must find the installed package
# shellcheck disable=SC2016  # $1, $2 and $lib belong to the inner shell
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
  "$1/bin/python" "$2"
' check "$venv" "$here/wheel_smoke.py"
