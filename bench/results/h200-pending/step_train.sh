# Issue 18 on the H200 (needs torch there: the 2026-12-02 training ran with torch 2.11+cu130):
# 1. table lookups at short lengths, the micro's failing first hop (docs/trained-tinyglm.md,
#    reply_positions.py); 2. the long-context stage at 16K and 32K. Each from the committed micro,
#    each a checkpoint with its training.json; bring them back, then score them on the CPU with
#    `sparkglm-qualify quality --checkpoint DIR` and `python3 tinyglm/train/reply_positions.py`.
R=$1; B=tinyglm/weights/tinyglm-micro-trained
python3 tinyglm/train/extend_context.py --checkpoint $B --out $R/micro-lookup --steps 400 \
  --long-buckets 1536,3072 --replay 0.2 --tokens-per-step 32768 --lr 1e-3 > $R/train-lookup.log 2>&1
echo "lookup rc=$?"
python3 tinyglm/train/extend_context.py --checkpoint $B --out $R/micro-long --steps 150 \
  --long-buckets 16384,32768 --replay 0.3 > $R/train-long.log 2>&1
echo "long rc=$?"
