# Issue 18 on the device (torch there: 2.11+cu130): tinyglm-wide trained in 500-second pieces, one
# piece a call, on a machine kept warm between calls (/tmp/R survives). Piece 1 trains from scratch;
# each later piece continues the last (`train_wide.py --init`, a fresh schedule at half the peak rate,
# batches keyed by the base shard and the piece's seed). No build is needed, so no debs need carrying.
# Bring the last $R/wide-N back and score it on the CPU: `sparkglm-qualify quality --checkpoint DIR`
# and `python3 tinyglm/train/reply_positions.py --checkpoint DIR --tasks needle,prose_fact`.
R=$1; N=$(( $(ls -d $R/wide-* 2>/dev/null | wc -l) + 1 ))
INIT=""; [ $N -gt 1 ] && INIT="--init $R/wide-$((N - 1)) --lr 0.001 --dense-warmup-frac 0"
nvidia-smi --query-gpu=name,memory.used --format=csv
python3 tinyglm/train/train_wide.py --seed $N --steps auto --time-budget-s 500 --eval-max-s 20 $INIT \
  --out $R/wide-$N > $R/train-wide-$N.log 2>&1
echo "wide-$N rc=$?"
tail -3 $R/train-wide-$N.log
