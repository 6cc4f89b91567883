# Session 25, call 1: build at HEAD, every CUDA test there, the two pending patches built beside it,
# their key tests, the bench alternated, ncu of the select kernel.
set -u
bash .devroot/dev.sh 590 build pbuild mtests ptests bench ncu
for f in pbuild mtests ptests bench ncu; do echo "== $f"; tail -25 /tmp/R/$f.log 2>/dev/null; done
