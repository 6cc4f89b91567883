# Issue 18 on the H200 (torch there: the 2026-12-02 training ran with torch 2.11+cu130): tinyglm-wide
# from scratch (tinyglm/train/train_wide.py, 16 MLA heads of 64, 16 indexer heads, top-k 64, 8 layers).
# Bring DIR back and score it on the CPU: `sparkglm-qualify quality --checkpoint DIR --out ...` and
# `python3 tinyglm/train/reply_positions.py --checkpoint DIR` (does the first hop of a needle pass?).
# Needs no build: it can run beside one. 330 s of training, a 40 s held-out check, the export.
R=$1
nvidia-smi --query-gpu=name,memory.used --format=csv
python3 tinyglm/train/train_wide.py --seed 1 --steps auto --time-budget-s 330 --eval-max-s 40 \
  --out $R/wide > $R/train-wide.log 2>&1
echo "wide rc=$?"
tail -3 $R/train-wide.log
