# The next session's first device call (written in session 25): build HEAD from source, then
# mtp-pass-launches.patch built beside it, every CUDA test there, the bench alternated and ncu
# (about 150 + 350 s). Set up .devroot/ first: dev.sh of ../h200-2026-12-02/, the Debian debs
# (../h200-2026-12-04/README.md), and from this folder step_mtp_launches.sh,
# mtp-pass-launches.patch, step_verify_timeline.sh and step_chain_slices.sh (next_call2.sh). Every
# CUDA test ran on the engine of 2b86c91 in session 25 (133 passed); later commits changed
# comments, docs and a scheduler limit whose default keeps the old behaviour (tested on the CPU),
# so the patched build's every-test run covers HEAD too.
set -u
cp .devroot/step_mtp_launches.sh .devroot/step_ml.sh 2>/dev/null
bash .devroot/dev.sh 590 build ml
echo "== ml"; tail -30 /tmp/R/ml.log 2>/dev/null
