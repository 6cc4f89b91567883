# Session 34 call 3 (lean): unpack the packages, build the three targets the steps need, run step_s34.
mkdir -p /tmp/devroot /tmp/R && for f in .devroot/*.deb; do dpkg -x $f /tmp/devroot; done && tar xJf .devroot/boost-subset.tar.xz -C /tmp/devroot && mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/R/gpu.txt
T0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > /tmp/R/cmake.log 2>&1
cmake --build build -j 16 --target sparkglm_cuda_tests speculation_bench sparkglm-runner-bench > /tmp/R/build.log 2>&1 || tail -30 /tmp/R/build.log
echo "tree built rc=$? +$(( $(date +%s) - T0 ))s"
timeout ${1:-400} bash .devroot/step_s34.sh /tmp/R
