// The G1 operator runner: every CUDA operator of MODEL.md at production shapes, checked against
// the CPU reference and timed against its roofline floor, written as a "sparkglm.operators/1"
// bundle. sparkglm-qualify's G1 gate turns each row into a criterion.
//
//   g1_operators --out operators.json [--peers peers.json] [--only
//   linear,norm,kda,mla,dsa,moe,router,mhc,sampling,moe_prefill,mla_prefill,quantized,moe_quant]
//                [--quick]
//                [--runs N]
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "engine/core/strict_json.h"

namespace {

int run(int argc, char** argv) {
  using namespace sparkglm;
  const CliArgs args(std::vector<std::string>(argv + 1, argv + argc), {"--quick"});
  args.allow_only({"--out", "--peers", "--only", "--quick", "--runs"});
  const std::string out_path = args.required("--out");
  const int runs = int(args.integer("--runs", 30, 25, 1000));
  std::set<std::string> only;
  {
    std::stringstream ss(args.str("--only", ""));
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) only.insert(item);
  }
  const std::set<std::string> families = {
      "linear", "norm",     "kda",         "mla",         "dsa",       "moe",      "router",
      "mhc",    "sampling", "moe_prefill", "mla_prefill", "quantized", "moe_quant"};
  for (const std::string& f : only)
    if (!families.count(f))
      throw Error(ErrorKind::kInvalidArgument,
                  "--only: unknown family \"" + f +
                      "\" (expected linear, norm, kda, mla, dsa, moe, router, mhc, sampling, "
                      "moe_prefill, mla_prefill, quantized, moe_quant)");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw Error(ErrorKind::kUnsupported, "g1_operators needs a CUDA device; none was found");

  g1::Harness h(runs, args.has("--quick"));
  h.measure_ceilings();
  auto want = [&](const char* f) { return only.empty() || only.count(f); };
  if (want("linear")) g1::run_linear_cases(h);
  if (want("norm")) g1::run_norm_and_embedding_cases(h);
  if (want("kda")) g1::run_kda_cases(h);
  if (want("mla")) g1::run_mla_cases(h);
  if (want("dsa")) g1::run_dsa_cases(h);
  if (want("moe")) g1::run_moe_cases(h);
  if (want("router")) g1::run_router_and_sampling_cases(h);
  if (want("mhc")) g1::run_mhc_cases(h);
  if (want("sampling")) g1::run_sampling_cases(h);
  if (want("moe_prefill")) g1::run_moe_prefill_cases(h);
  if (want("mla_prefill")) g1::run_mla_prefill_cases(h);
  // The FP4-Local decode GEMV runs only when named: neither the runner nor the loader uses it
  // yet, and it has not run on a GPU, so the default G1 run (the main job's) leaves it out.
  if (only.count("quantized")) g1::run_quantized_linear_cases(h);
  // The FP4-Local MoE decode rows (current kernel, 2026-12-02 baseline as a peer): when named.
  if (only.count("moe_quant")) g1::run_moe_quant_cases(h);

  if (args.has("--peers")) {
    const nlohmann::json peers = parse_json_file(
        args.required("--peers"), ErrorKind::kInvalidArgument, json_limits::kReceipt);
    h.add_external_peers(peers.contains("peers") ? peers["peers"] : peers);
  }
  nlohmann::json report = h.report();
  std::ofstream out(out_path);
  out << report.dump(1) << "\n";
  if (!out) throw Error(ErrorKind::kInvalidArgument, "--out: cannot write " + out_path);
  int failed = 0;
  for (const auto& row : report["operators"]) failed += row["pass"].get<bool>() ? 0 : 1;
  std::printf("%zu operator rows, %d failed; wrote %s\n", report["operators"].size(), failed,
              out_path.c_str());
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "g1_operators: %s\n", e.what());
    return 2;
  }
}
