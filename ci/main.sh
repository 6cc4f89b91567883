#!/usr/bin/env bash
# The main job on its embedded default: the G2 tinyGLM qualification. Builds if needed, starts
# sparkglm-serve on the `tinyglm` preset (production per-layer geometry, dummy weights) on the CPU
# reference backend, runs the G2 workloads at a scale that finishes in minutes on a small machine,
# writes a bundle under out/main/ that `sparkglm-qualify verify` accepts, renders its report beside
# it and prints the card. Arguments, when given, replace the default flags of `sparkglm-qualify run`.
#
# The CUDA engine does not serve yet (issue 6), so the CPU backend serves even where a GPU exists;
# the bundle's limitations say so.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/sparkglm-qualify ] && [ -x build/sparkglm-serve ] || { bash ci/setup.sh; bash ci/build.sh; }
./build/sparkglm-qualify --version
if [ $# -eq 0 ]; then
  id="$(date -u +%Y-%m-%d-%H%M%S)-g2-tinyglm-cpu"
  set -- --gate G2 --preset tinyglm --device cpu --scale 0.05 --id "$id" --out "out/main/$id"
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
exit $status
