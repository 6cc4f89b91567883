# Ran in session 27 as ../h200-pending/next_call.sh (calls 1 and 2 on one warm machine); P now
# names this folder, where the steps and the patch moved once merged.
# The next session's device work (written in session 26), run two or three times on one warm
# machine (each within 30 s of the last's return; dev.sh skips the steps already done): build
# HEAD from source, every CUDA test on it (the host-piece timing of DraftStepTimes, compiled, not
# run), then gemv-rows-loads.patch built, every CUDA test on it, the A/B bench and ncu. About
# 170 + 200 + 100 + 200 + 130 s. Set up .devroot/ first: dev.sh of ../h200-2026-12-02/ and the
# Debian debs (../h200-2026-12-04/README.md); this script copies the steps and the patch.
set -u
P=bench/results/device-2026-12-06-s27
cp $P/gemv-rows-loads.patch bench/results/h200-pending/variant.sh .devroot/
cp $P/step_gemv_loads.sh .devroot/step_gl.sh
cp $P/step_gemv_tests.sh .devroot/step_gltests.sh
cp $P/step_gemv_bench.sh .devroot/step_glbench.sh
bash .devroot/dev.sh 590 build cuda_tests gl gltests glbench
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/R/cuda_tests.log 2>/dev/null | head
for f in gl gltests glbench; do echo "== $f"; tail -14 /tmp/R/$f.log 2>/dev/null; done
