#!/usr/bin/env bash
# The model sweep (tools/model_sweep.py) split round-robin over parallel processes, for a lent GPU
# machine whose device time is short (python3 there is torch's; here, activate .venv first):
#   SWEEP_ONLY='^hf_' tools/sweep_shards.sh SHARDS SECONDS GPUS [model_sweep.py ARGS...]
# e.g. `tools/sweep_shards.sh 28 300 2 --device cuda --dtype bfloat16 --dynamic --timeout 250` on a
# 2-GPU machine. Each shard runs its models under `timeout SECONDS` on GPU (shard mod GPUS). Prints
# the outcome counts and every model that is not ok, and writes all rows to $OUT/sweep_rows.json
# (default /tmp/out). Shards that ran out of time show their last lines: their models not reached.
set -uo pipefail
shards=$1; seconds=$2; gpus=$3; shift 3
OUT=${OUT:-/tmp/out}
work=$(mktemp -d)
mkdir -p "$OUT"
python3 tools/model_sweep.py --list 2>/dev/null | awk '{print $1}' | grep -E "${SWEEP_ONLY:-.}" > "$work/models.txt"
echo "$(wc -l < "$work/models.txt") models in $shards shards"
for s in $(seq 0 $((shards - 1))); do
  names=$(awk -v n="$shards" -v s="$s" '(NR - 1) % n == s' "$work/models.txt" | paste -sd'|')
  [ -z "$names" ] && continue
  ( CUDA_VISIBLE_DEVICES=$((s % gpus)) OMP_NUM_THREADS=1 timeout "$seconds" python3 tools/model_sweep.py "$@" \
      --only "^($names)\$" --json "$work/shard_$s.json" > "$work/shard_$s.log" 2>&1
    echo "exit $?" >> "$work/shard_$s.log" ) &
done
wait
python3 - "$work" "$OUT/sweep_rows.json" <<'PY'
import glob
import json
import sys
from collections import Counter

work, out = sys.argv[1], sys.argv[2]
rows = []
for name in sorted(glob.glob(f"{work}/shard_*.json")):
    with open(name) as f:
        rows += json.load(f)["results"]
with open(out, "w") as f:
    json.dump(rows, f, indent=1)
print(Counter((r["status"], r["dynamic"]) for r in rows))
for r in rows:
    if r["status"] not in ("ok", "skip") or r["dynamic"] not in ("ok", "", "n/a"):
        print(r["name"], r["status"], r["dynamic"], "|", r["error"][:300], "|", r["dynamic_detail"][:300])
PY
for log in "$work"/shard_*.log; do
  tail -1 "$log" | grep -qx "exit 0" || { echo "== $(basename "$log")"; tail -3 "$log"; }
done
