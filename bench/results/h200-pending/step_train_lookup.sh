# Issue 18 on the H200 (needs torch there: the 2026-12-02 training ran with torch 2.11+cu130),
# from the committed micro, a checkpoint with its training.json; bring it back, then score it on
# the CPU with `sparkglm-qualify quality --checkpoint DIR` and `tinyglm/train/reply_positions.py`.
# Table lookups at short lengths: the micro's failing first hop (docs/trained-tinyglm.md). The CPU
# run at --replay 0.2 (2026-12-05) improved retrieval but let the tasks outside the mix regress.
R=$1; B=tinyglm/weights/tinyglm-micro-trained
python3 tinyglm/train/extend_context.py --checkpoint $B --out $R/micro-lookup --steps 400 \
  --long-buckets 1536,3072 --replay 0.5 --tokens-per-step 32768 --lr 1e-3 > $R/train-lookup.log 2>&1
echo "lookup rc=$?"
