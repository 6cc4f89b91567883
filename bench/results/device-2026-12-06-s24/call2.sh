set -u
bash .devroot/dev.sh 400 build vs_build all vs_bench2 ncu_vs
for f in all vs_bench2 ncu_vs; do echo "== $f"; tail -22 /tmp/R/$f.log 2>/dev/null; done
