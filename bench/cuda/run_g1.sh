#!/usr/bin/env bash
# Runs the G1 operator table on a GPU machine: g1_operators first, then its peers (PyTorch eager,
# fla-core, cuBLAS via torch) merged into the bundle. Expects the binary built elsewhere (carried)
# and, optionally, the fla-core wheel in $WHEELS. Results land in $OUT (default ./g1-out).
#   bench/cuda/run_g1.sh [BINARY] [extra g1_operators flags...]
set -u
BIN=${1:-build-cuda/bench/cuda/g1_operators}
shift || true
OUT=${OUT:-g1-out}
WHEELS=${WHEELS:-build-cuda/whl}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# cuBLASLt 13 from the toolkit or from the nvidia-cublas wheel that torch brings.
CUBLAS_DIR=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${CUBLAS_DIR}:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/device.txt"
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$WHEELS"/*.whl \
    && export PYTHONPATH=/tmp/site
fi
"$BIN" --out "$OUT/operators.json" "$@" 2>&1 | tee "$OUT/g1.log"
if [ "${SKIP_PEERS:-0}" != 1 ]; then
  timeout "${PEERS_TIMEOUT:-240}" python3 bench/cuda/g1_peers.py --out "$OUT/peers.json" ${PEERS_FLAGS:-} 2>&1 | tee "$OUT/peers.log"
  # Peers go into the bundle beside the rows they time (same operator and shape strings).
  [ -s "$OUT/peers.json" ] && [ -s "$OUT/operators.json" ] && python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
ops = json.load(open(f"{out}/operators.json"))
ops["peers"] += json.load(open(f"{out}/peers.json"))["peers"]
json.dump(ops, open(f"{out}/operators.json", "w"), indent=1)
print("merged", len(ops["peers"]), "peer timings")
PY
fi
