# Session 16 call 5: the spark G2 A/B of issue 15 (strict against --precision-mode spark, tinyglm,
# multi-turn at scale 1, through sparkglm-serve on the H200), carried binaries of this tree.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R=/tmp/R5; mkdir -p $R build /tmp/devroot
fin() { tar czf $OUT/r5.tgz -C /tmp R5; }
trap fin EXIT
for f in .devrun/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/devroot/rt SPARKGLM_SOURCE_DIR="$(pwd)"
tar xzf .devrun/bins.tgz -C build
T0=$(date +%s)
timeout 540 ./build/sparkglm-qualify run --gate G2 --preset tinyglm --device cuda --ab \
  --option precision-mode=spark --workload multi-turn --scale 1 \
  --id 2026-12-04-g2-ab-spark-cuda-h200 \
  --title "A/B on the H200: --precision-mode spark (emulated FP4) against strict (tinyglm, multi-turn at scale 1; issue 15)" \
  --out $R/2026-12-04-g2-ab-spark-cuda-h200 > $R/sparkab.log 2>&1
echo "spark A/B rc=$? after $(( $(date +%s) - T0 ))s" | tee $R/summary.txt
./build/sparkglm-qualify verify $R/2026-12-04-g2-ab-spark-cuda-h200 >> $R/summary.txt 2>&1
tail -30 $R/sparkab.log
