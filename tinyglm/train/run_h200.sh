#!/usr/bin/env bash
# Trains tinyglm-micro on one GPU and writes the checkpoint directory the engine loads.
#
#   bash tinyglm/train/run_h200.sh OUT_DIR [SEED] [STEPS] [TIME_BUDGET_S] [train.py flags...]
#
# SEED defaults to 1; STEPS to auto (fit TIME_BUDGET_S, default 300 s of training, then about 30 s of
# start-up, held-out greedy eval and export); an integer STEPS reproduces a recorded run
# (OUT_DIR/training.json's "reproduce" line). OUT_DIR receives config.json, the safetensors shard and
# index, train_log.jsonl, training.json and stdout.log. Needs python3 with torch; nothing else (no numpy).
set -euo pipefail
out=${1:?usage: run_h200.sh OUT_DIR [SEED] [STEPS] [TIME_BUDGET_S]}
seed=${2:-1}
steps=${3:-auto}
budget=${4:-300}
mkdir -p "$out"
out=$(cd "$out" && pwd)  # absolute: the script runs from the repository root
cd "$(dirname "$0")/../.."
python3 - <<'EOF'
import torch
assert torch.cuda.is_available(), "no CUDA device visible to torch"
print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
EOF
workers=$(($(nproc) > 8 ? 6 : 2))
python3 tinyglm/train/train.py --seed "$seed" --steps "$steps" --time-budget-s "$budget" \
  --workers "$workers" --out "$out" "${@:5}" 2>&1 | tee "$out/stdout.log"
ls -l "$out"
