#!/usr/bin/env bash
# Build luminal on a lent GPU machine and run what is asked, logging under $OUT (see
# ../shared/gpu/README.md for the recipe; the Debian packages travel in .gpu-deps). The package build
# needs nlohmann/json from there, no longer libzip (the core reads zips itself; libzip is only for
# the unit tests and fuzzers, which this script does not build): the libzip .debs in .gpu-deps are
# unused and harmless.
#   tools/device_run.sh build          build only
#   tools/device_run.sh test [PATHS]   build, then every test that concerns CUDA (ids with `cuda`, and
#                                      those with no `cpu` parameter: the CUDA-only files have none;
#                                      `-k cuda` alone would skip them), in $SHARDS (default 15)
#                                      parallel pytest processes, each capped at $SHARD_SECONDS
#                                      (default 460; a cold cache makes the whole suite ~300 s per
#                                      shard on an H100 machine's 16 cores)
#   tools/device_run.sh bench [ARGS]   build, then benchmarks/dlrm_bench.py ARGS
# Wheels in .gpu-wheels (optional; fetch with `pip download transformers --python-version 3.12
# --only-binary=:all: --platform manylinux2014_x86_64 -d .gpu-wheels`, minus numpy) are installed first.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source .gpu-deps/env.sh
# The image's default CXX (/opt/gcc) links libstdc++ statically, which torch extensions must not.
export CC=/usr/bin/gcc CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c 'import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name())' >> "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
# Optional pure test dependencies (e.g. transformers) carried as wheels: the machine has no internet.
if compgen -G ".gpu-wheels/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/gpu-wheels .gpu-wheels/*.whl > "$OUT/wheels.log" 2>&1 \
    && export PYTHONPATH=/tmp/gpu-wheels${PYTHONPATH:+:$PYTHONPATH}
fi
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -q . -Cbuild-dir=build/gpu -Ccmake.build-type=Release \
  > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
# The package build also builds luminal-run (LUMINAL_BUILD_RUNNER): tests/test_runner.py finds it here.
[ -x build/gpu/luminal-run ] && export LUMINAL_RUN="$PWD/build/gpu/luminal-run"
what=${1:-build}
shift || true
case "$what" in
  build) ;;
  test)
    python3 -m pytest -q -p no:cacheprovider --collect-only -k "cuda or not cpu" "${@:-tests}" 2>/dev/null \
      | grep "::" > "$OUT/test_ids.txt"
    shards=${SHARDS:-15}
    rm -f "$OUT"/shard_*.ids
    awk -v n="$shards" -v out="$OUT" '{ print > sprintf("%s/shard_%02d.ids", out, (NR - 1) % n) }' "$OUT/test_ids.txt"
    echo "$(wc -l < "$OUT/test_ids.txt") tests in $shards shards"
    export OMP_NUM_THREADS=1  # the shards share the machine's cores
    for ids in "$OUT"/shard_*.ids; do
      # One id per line: parametrized ids may hold spaces.
      ( mapfile -t selected < "$ids"
        # A test past 200 s gets its threads' stacks in the log (pyproject's faulthandler_timeout);
        # -v names each test as it starts, so a shard stopped by `timeout` names the one it was in.
        timeout "${SHARD_SECONDS:-460}" python3 -m pytest -v -p no:cacheprovider -rfE -o faulthandler_timeout=200 "${selected[@]}" \
          > "${ids%.ids}.log" 2>&1
        echo "exit $?" >> "${ids%.ids}.log" ) &
    done
    wait
    status=0
    for log in "$OUT"/shard_*.log; do
      echo "$(basename "$log"): $(grep -E " passed| failed| error" "$log" | tail -1) ($(tail -1 "$log"))"
      tail -1 "$log" | grep -qx "exit 0" || status=1
    done
    grep -hE "^(FAILED|ERROR) " "$OUT"/shard_*.log | head -40
    # The device tool returns only a few files: show where a shard that ran out of time stopped.
    for log in "$OUT"/shard_*.log; do
      tail -1 "$log" | grep -qx "exit 124" || continue
      echo "== $(basename "$log") ran out of time; its last lines:"
      grep -vE "^(DEBUG|INFO) " "$log" | tail -15 | cut -c1-200
    done
    exit $status ;;
  bench)
    python3 benchmarks/dlrm_bench.py --json "$OUT/bench.json" "$@" 2>&1 | tee "$OUT/bench.log" | tail -40 ;;
  *) echo "unknown: $what"; exit 2 ;;
esac
