# The next session's first device call (written in session 25): build HEAD from source, the verify
# step's timeline (nsys), then mtp-pass-launches.patch built beside it, every CUDA test there, the
# bench alternated and ncu. Set up .devroot/ first: dev.sh of ../h200-2026-12-02/, the Debian debs
# (../h200-2026-12-04/README.md), and from this folder step_verify_timeline.sh,
# step_mtp_launches.sh and mtp-pass-launches.patch. HEAD's every CUDA test ran in session 25 (133
# passed at 2b86c91; later commits changed comments and docs only).
set -u
cp .devroot/step_verify_timeline.sh .devroot/step_timeline.sh 2>/dev/null
cp .devroot/step_mtp_launches.sh .devroot/step_ml.sh 2>/dev/null
bash .devroot/dev.sh 590 build timeline ml
for f in timeline ml; do echo "== $f"; tail -30 /tmp/R/$f.log 2>/dev/null; done
