# Issue 18 on the H200 (needs torch there: the 2026-12-02 training ran with torch 2.11+cu130),
# from the committed micro, a checkpoint with its training.json; bring it back, then score it on
# the CPU with `sparkglm-qualify quality --checkpoint DIR` and `tinyglm/train/reply_positions.py`.
# The long-context stage at 16K and 32K.
R=$1; B=tinyglm/weights/tinyglm-micro-trained
python3 tinyglm/train/extend_context.py --checkpoint $B --out $R/micro-long --steps 150 \
  --long-buckets 16384,32768 --replay 0.3 > $R/train-long.log 2>&1
echo "long rc=$?"
