# Session 25: two patched copies of the tree built in the background while main's tests run:
# /tmp/sel = select-pick-byte.patch, /tmp/both = select-pick-byte + kda-verify-slices.
R=$1
build_copy() { # name patches...
  local n=$1 W=/tmp/$1; shift
  rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
  for p in "$@"; do (cd $W && git apply $OLDPWD/.devroot/$p.patch) || { echo "PATCH-FAILED $n $p" > $R/$n-build.log; return 1; }; done
  cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/$n-cmake.log 2>&1
  cmake --build $W/build -j 8 --target sparkglm_cuda_tests speculation_bench > $R/$n-build.log 2>&1 && touch /tmp/$n.built
  echo "$n build rc=$? at $(date +%T)" >> $R/pbuild.txt
}
(build_copy sel select-pick-byte &) ; (build_copy both select-pick-byte kda-verify-slices &)
echo started
