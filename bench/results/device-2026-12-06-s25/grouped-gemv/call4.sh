# Session 25, call 4 (warm machine of call 3): the true baseline, HEAD 7162393 (select + KDA slices
# merged, no grouped GEMV; its files carried in .devroot/basefiles), against the grouped GEMV.
set -u; R=/tmp/R; W=/tmp/head
rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
cp -r .devroot/basefiles/. $W/
cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/head-cmake.log 2>&1
time cmake --build $W/build -j 16 --target speculation_bench > $R/head-build.log 2>&1 || tail -20 $R/head-build.log
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3; do for v in head group; do
  B=./build/bench/speculation_bench; [ $v = head ] && B=$W/build/bench/speculation_bench
  timeout 30 $B --device cuda --model $M --prompts $P --k 0,2,3 --concurrency 1,4 --max-tokens 128 \
    --reps 3 > $R/hb-$v-$i.json 2> $R/hb-$v-$i.log; echo "$v $i rc=$?"
done; done
tar czf $OUT/results4.tgz -C /tmp R
