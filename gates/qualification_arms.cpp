// Starting, attaching to and stopping the servers of a qualification run (qualification_arms.h).
#include "gates/qualification_arms.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <system_error>

#include "engine/core/build_info.h"
#include "gates/device_share.h"
#include "gates/serving_evidence.h"
#include "harness/run_environment.h"
#include "harness/server_identity.h"
#include "harness/server_process.h"

namespace sparkglm::gates {

namespace fs = std::filesystem;
using nlohmann::json;

bool serves_on_cuda(const ArmCommand& cmd) {
  for (size_t i = 0; i < cmd.args.size(); ++i)
    if (cmd.args[i] == "--device=cuda" ||
        (cmd.args[i] == "--device" && i + 1 < cmd.args.size() && cmd.args[i + 1] == "cuda"))
      return true;
  return false;
}

QualificationArms open_arms(const RunRequest& req, receipts::BundleWriter& bundle,
                            std::ostream& err, std::vector<std::string>& limitations) {
  QualificationArms out;
  std::vector<ServingArm>& arms = out.arms;
  if (req.external) {
    arms.push_back(attach_arm("candidate", *req.external, bundle, err));
    limitations.push_back(
        "measured through --url: the server was running already; its binary, commit, profile "
        "and effective configuration were not observed (server/candidate/endpoint.json holds "
        "what it said over HTTP), so no promotion may cite this bundle");
  } else {
    ArmCommand candidate = req.candidate;
    std::optional<ArmCommand> baseline = req.baseline;
    std::vector<ArmCommand*> commands = {&candidate};
    if (baseline) commands.push_back(&*baseline);
    int64_t device_bytes = 0;
    const json env = harness::probe_environment();
    if (env.contains("gpus") && env["gpus"].is_array() && !env["gpus"].empty())
      device_bytes = env["gpus"][0].value("memory_bytes", int64_t(0));
    out.device_share =
        plan_device_share(commands, serves_on_cuda(candidate), device_bytes).to_json();
    arms.push_back(start_arm("candidate", candidate, bundle, err));
    if (baseline) arms.push_back(start_arm("baseline", *baseline, bundle, err));
  }
  check_arms_comparable(arms);
  return out;
}

void close_arms(std::vector<ServingArm>& arms, receipts::BundleWriter& bundle, json& counters,
                json& emit_delays, std::vector<std::string>& limitations) {
  for (ServingArm& a : arms) {
    const std::string after = a.scrape_metrics();
    bundle.add_bytes("server/" + a.label + "/metrics-after.txt", after, "metrics");
    counters[a.label] = counter_deltas(a.metrics_before, after);
    emit_delays[a.label] = emit_delay(a.metrics_before, after);
    if (!a.server) continue;  // measured through --url: never ours to stop
    const harness::ServerExit exit = a.server->stop();
    if (!exit.clean())
      limitations.push_back("the " + a.label + " server did not stop cleanly: " + exit.describe());
  }
}

bool serves_dummy_weights(const ServingArm& arm) {
  return arm.identity.identity["model"].value("weights", "").rfind("dummy", 0) == 0;
}

json build_identity(const ArmCommand& cmd) {
  const BuildInfo& b = build_info();
  std::error_code ec;
  return {{"label", "candidate"},
          {"commit", b.commit},
          {"clean_tree", std::string(b.clean_tree) == "true"},
          {"binary_sha256",
           fs::exists(cmd.binary, ec) ? harness::file_sha256(cmd.binary) : std::string(64, '0')},
          {"profile", ""},
          {"profile_sha256", ""},
          {"effective_config_sha256", ""},
          {"model", {{"preset", ""}, {"config_sha256", ""}, {"weights", ""}}},
          {"device", "not started"},
          {"args", cmd.args}};
}

}  // namespace sparkglm::gates
