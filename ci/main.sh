#!/usr/bin/env bash
# The main job on its embedded default: the G2 tinyGLM qualification. Builds if needed, starts
# sparkglm-serve on the `tinyglm` preset (production per-layer geometry, dummy weights), runs the G2
# workloads, writes a bundle under out/main/ that `sparkglm-qualify verify` accepts, renders its
# report beside it and prints the card. Arguments, when given, replace the default flags of
# `sparkglm-qualify run`.
#
# Where a GPU is visible and the build has the CUDA backend, the server runs on it at full scale
# (3 repetitions of decode_c1 128->256, mixed_c4 4096->128, long_c2 16384->32); elsewhere the CPU
# reference backend serves the same workloads at scale 0.05, which finishes in minutes on 2 cores.
# Quality beside speed: the default run then judges the trained tinyGLM against G2's
# quality_targets on the same device (`sparkglm-qualify quality`, gates/quality_gate.h): its
# held-out loss through the engine, and the quality probes' greedy replies through sparkglm-serve
# (tool calls, JSON schemas, isolation judged by pass rate; arithmetic and needles recorded). Its
# bundle (out/main/<id>-quality, gates/quality_bundle.h) binds the weights, held-out set, training
# sources, scores and probe records by sha256.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/sparkglm-qualify ] && [ -x build/sparkglm-serve ] || { bash ci/setup.sh; bash ci/build.sh; }
./build/sparkglm-qualify --version
quality=""
if [ $# -eq 0 ]; then
  quality=1
  device=cpu scale=0.05
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
    ./build/sparkglm-serve --version | grep -q "cuda: [0-9]"; then
    device=cuda scale=1
  fi
  id="$(date -u +%Y-%m-%d-%H%M%S)-g2-tinyglm-$device"
  set -- --gate G2 --preset tinyglm --device "$device" --scale "$scale" --id "$id" --out "out/main/$id"
fi
status=0
./build/sparkglm-qualify run "$@" || status=$?
bundle=""
for ((i = 1; i <= $#; i++)); do
  if [ "${!i}" = "--out" ]; then j=$((i + 1)); bundle="${!j}"; fi
done
if [ -n "$bundle" ] && [ -f "$bundle/qualification.json" ]; then
  ./build/sparkglm-qualify verify "$bundle"
  ./build/sparkglm-qualify report "$bundle" --out "$bundle.report" > /dev/null
  echo "bundle: $bundle (report: $bundle.report/report.html)"
fi
if [ -n "$quality" ]; then
  echo "== quality (held-out loss and probes of the trained tinyGLM, $device backend)"
  # A bundle of its own beside the G2 run's, verified as it is written (exit 2 if it does not).
  ./build/sparkglm-qualify quality --device "$device" --out "$bundle-quality" || status=$?
fi
exit $status
