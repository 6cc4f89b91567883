#pragma once
// One arm of a serving run: a server the harness started (its binary, flags and start-up log
// observed, so its identity is known), or a server already running that it measures through
// --url (only what the server says over HTTP is known: /v1/models, /version when present, the
// response headers). Either way the arm's files go into the bundle under server/<label>/.
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/qualification_run.h"
#include "harness/server_identity.h"
#include "harness/server_process.h"
#include "receipts/bundle_writer.h"

namespace sparkglm::gates {

struct ServingArm {
  std::string label;
  std::string base_url;
  std::unique_ptr<harness::ServerProcess> server;  // null when measured through --url
  harness::ServerIdentity identity;
  std::string metrics_before;  // "" when the server has no /metrics

  // GET /metrics, or "" when the server does not answer it with 200.
  std::string scrape_metrics() const;
};

// Starts `cmd` and records its log, effective configuration and identity.
ServingArm start_arm(const std::string& label, const ArmCommand& cmd,
                     receipts::BundleWriter& bundle, std::ostream& err);

// Attaches to a running server: checks it is healthy (/health, else /v1/models), registers the
// API key, records what it says about itself in server/<label>/endpoint.json and builds an
// identity whose `observed` is "endpoint" (binary, commit and profile not observed). Throws
// Error(kInvalidArgument) naming --url, --api-key-env or --model.
ServingArm attach_arm(const std::string& label, const ExternalServer& server,
                      receipts::BundleWriter& bundle, std::ostream& err);

// Both arms must serve the same model: an A/B of two models measures nothing. The weights
// compare by their source: "dummy:seed=S,format=fp4-local" is "dummy:seed=S" stored in another
// format (model_loader.cpp), which is what a --weight-format A/B changes.
void check_arms_comparable(const std::vector<ServingArm>& arms);
std::string weights_source(const std::string& weights);

}  // namespace sparkglm::gates
