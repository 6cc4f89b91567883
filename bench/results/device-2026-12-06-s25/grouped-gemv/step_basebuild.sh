# Session 25, call 3: the baseline (HEAD: the working tree's grouped GEMV undone) built in the
# background in /tmp/base while the candidate's tests run.
R=$1; W=/tmp/base
rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
(cd $W && git checkout -q HEAD -- engine tests && git diff HEAD --stat -- engine tests && git status --short | head) > $R/base-status.txt 2>&1
( cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/base-cmake.log 2>&1 &&
  cmake --build $W/build -j 12 --target speculation_bench > $R/base-build.log 2>&1 && touch /tmp/base.built; echo "base build done $(date +%T)" >> $R/base-status.txt ) &
echo started
