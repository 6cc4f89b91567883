# Session 25, call 2 (warm machine of call 1): every CUDA test with both patches, two more bench rounds.
set -u
bash .devroot/dev.sh 400 ball bench2
for f in ball bench2; do echo "== $f"; tail -25 /tmp/R/$f.log 2>/dev/null; done
