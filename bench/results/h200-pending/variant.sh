# Shared by the device steps that compare a patched build with the tree's own (sourced; .devroot/
# holds a copy beside the steps). Run from the repository root after dev.sh's `build` step.

# build_variant DIR PATCH [-R] TARGET...: the tree copied to DIR (without build/, .devroot/,
# .devrun/), .devroot/PATCH applied (-R: reversed, to rebuild the tree's base when the tree holds
# the change), configured as ci/build.sh does on the device, and TARGETs built.
build_variant() {
  local dir=$1 patch=$2 reverse=""; shift 2
  [ "${1:-}" = -R ] && { reverse=-R; shift; }
  rm -rf "$dir" && mkdir -p "$dir" &&
    tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C "$dir"
  (cd "$dir" && git apply $reverse "$OLDPWD/.devroot/$patch") || { echo "PATCH-FAILED $patch"; return 1; }
  cmake -S "$dir" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=/tmp/devroot/usr \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > "$R/$(basename "$dir")-cmake.log" 2>&1
  cmake --build "$dir/build" -j 16 --target "$@" > "$R/$(basename "$dir")-build.log" 2>&1 ||
    { tail -30 "$R/$(basename "$dir")-build.log"; return 1; }
}

# alternate_bench PREFIX NAME=DIR...: speculation_bench on the chain-trained micro five times per
# build, the builds alternated (NAME=. is the tree's own build), C1 and C4, k = 0, 2, 3; each run's
# JSON in $R/PREFIX-NAME-N.json.
alternate_bench() {
  local prefix=$1; shift
  local M=tinyglm/weights/tinyglm-micro-trained-mtp-chain P=tinyglm/weights/tinyglm-micro-trained/heldout.json
  for i in 1 2 3 4 5; do for v in "$@"; do
    local name=${v%%=*} dir=${v#*=}
    timeout 40 "$dir/build/bench/speculation_bench" --device cuda --model $M --prompts $P --k 0,2,3 \
      --concurrency 1,4 --max-tokens 128 --reps 3 > "$R/$prefix-$name-$i.json" 2> "$R/$prefix-$name-$i.log"
    echo "$name $i rc=$?"
  done; done
}

# g2_cells PREFIX RUNS NAME=DIR...: G2's speculation cells (its checkpoint, read from
# gates/G2.json; the eight held-out prompts, --waves 8, C1 and C4, k = 0, 2, 3) RUNS times per
# build, the builds alternated (NAME=. is the tree's own build); each run's JSON in
# $R/PREFIX-NAME-N.json and one line a cell on stdout.
g2_cells() {
  local prefix=$1 runs=$2; shift 2
  local M P=tinyglm/weights/tinyglm-micro-trained/heldout.json
  M=$(python3 -c "import json; print(json.load(open('gates/G2.json'))['speculation_targets']['checkpoint'])")
  for i in $(seq "$runs"); do for v in "$@"; do
    local name=${v%%=*} dir=${v#*=} f="$R/$prefix-${v%%=*}-$i"
    timeout 60 "$dir/build/bench/speculation_bench" --device cuda --model "$M" --prompts $P --k 0,2,3 \
      --concurrency 1,4 --waves 8 --max-tokens 128 --reps 3 > "$f.json" 2> "$f.log"
    echo "$name $i rc=$?"
    python3 - "$f.json" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["cells"]:
    t = c["draft_step_time"]
    print("  C%d k%d %.0f tok/s tps/step %.3f %s run %.1f main %.1f lag %.1f launch %.1f" % (
        c["concurrency"], c["k"], c["median_decode_tok_s"], c["tokens_per_verify_step"],
        c["output_sha256"][:8], t["run_us"], t["main_us"], t["lag_us"], t["launch_us"]))
PY
  done; done
}
