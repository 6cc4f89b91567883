set -x
R=$1
mkdir -p /root/pc && df -h /root/pc && findmnt -T /root/pc
# the disk's read bandwidth where the tier's file lives: 8 GiB written, then read with O_DIRECT and buffered
dd if=/dev/zero of=/root/pc/bw.bin bs=16M count=512 oflag=direct 2>&1 | tail -1
dd if=/root/pc/bw.bin of=/dev/null bs=16M iflag=direct 2>&1 | tail -1
dd if=/root/pc/bw.bin of=/dev/null bs=16M 2>&1 | tail -1
rm -f /root/pc/bw.bin
./build/sparkglm-qualify run --gate G2 --preset tinyglm --device cuda --ab --server-args "--enable-prefix-caching" --candidate-args "--prefix-cache-dir /root/pc --prefix-cache-gb 24" --workload multi-turn --scale 1 --id 2026-12-02-g2-ab-prefix-disk-tier-cuda-h200 --title "A/B on the H200: the prefix cache's disk tier (--prefix-cache-dir, 24 GiB) against the resident cache alone, multi-turn (tinyglm, scale 1; issue 17)" --out $R/2026-12-02-g2-ab-prefix-disk-tier-cuda-h200
