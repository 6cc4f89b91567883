#include "gates/serving_arm.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "harness/server_api.h"
#include "receipts/bundle_file.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string strip_slash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// A response body as JSON when it is JSON, else as text (cut short): recorded either way.
json body_of(const harness::HttpResult& r) {
  try {
    return parse_json(r.body, "the response", ErrorKind::kIo, json_limits::kServerReply);
  } catch (const Error&) {
    return r.body.substr(0, 4096);
  }
}

}  // namespace

std::string ServingArm::scrape_metrics() const {
  const harness::HttpResult r = harness::http_get(base_url + "/metrics");
  return r.ok() ? r.body : "";
}

ServingArm start_arm(const std::string& label, const ArmCommand& cmd,
                     receipts::BundleWriter& bundle, std::ostream& err) {
  const std::string log = "server/" + label + "/server.log";
  bundle.add_file(log, "log");
  harness::ServerProcessOptions o;
  o.binary = cmd.binary;
  o.args = cmd.args;
  o.log_path = bundle.where_is(log).string();
  fs::create_directories(bundle.where_is(log).parent_path());
  err << "starting " << label << ": " << cmd.binary;
  for (const std::string& a : cmd.args) err << ' ' << a;
  err << '\n';
  ServingArm arm;
  arm.label = label;
  arm.server = std::make_unique<harness::ServerProcess>(o);
  arm.base_url = arm.server->base_url();
  std::vector<std::string> argv = {cmd.binary};
  argv.insert(argv.end(), cmd.args.begin(), cmd.args.end());
  arm.identity = harness::read_server_identity(label, argv, receipts::read_file(o.log_path));
  arm.identity.identity["observed"] = "process";
  bundle.add_bytes("server/" + label + "/effective-config.json",
                   arm.identity.effective_config.dump(2) + "\n", "config");
  bundle.add_bytes("server/" + label + "/identity.json", arm.identity.identity.dump(2) + "\n",
                   "identity");
  arm.metrics_before = arm.scrape_metrics();
  bundle.add_bytes("server/" + label + "/metrics-before.txt", arm.metrics_before, "metrics");
  return arm;
}

ServingArm attach_arm(const std::string& label, const ExternalServer& server,
                      receipts::BundleWriter& bundle, std::ostream& err) {
  const std::string url = strip_slash(server.url);
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "--url: expected http://HOST:PORT or https://..., got \"" + server.url + "\"");
  if (!server.api_key_env.empty()) {
    const char* key = std::getenv(server.api_key_env.c_str());
    if (!key || !*key)
      throw Error(ErrorKind::kInvalidArgument, "--api-key-env " + server.api_key_env +
                                                   ": that environment variable is unset or empty");
    harness::set_api_key(url, key);
  }
  err << "measuring the running server at " << url << " (not started, not stopped)\n";
  const harness::HttpResult models = harness::http_get(url + "/v1/models");
  if (!models.ok())
    throw Error(ErrorKind::kInvalidArgument,
                "--url " + url + ": GET /v1/models did not answer 200: " + models.describe());
  const json listed = body_of(models);
  std::vector<std::string> ids;
  if (listed.is_object() && listed.contains("data") && listed["data"].is_array())
    for (const json& m : listed["data"])
      if (m.is_object() && m.contains("id") && m["id"].is_string())
        ids.push_back(m["id"].get<std::string>());
  if (ids.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "--url " + url + ": GET /v1/models lists no model (expected data[].id)");
  std::string model = server.model.empty() ? ids.front() : server.model;
  if (std::find(ids.begin(), ids.end(), model) == ids.end())
    throw Error(ErrorKind::kInvalidArgument, "--model " + model + ": the server at " + url +
                                                 " does not list it (it lists " + json(ids).dump() +
                                                 ")");
  const harness::HttpResult version = harness::http_get(url + "/version");
  const json endpoint = {
      {"url", url},
      {"model", model},
      {"models", listed},
      {"models_headers", models.headers},
      {"version", version.ok() ? body_of(version) : json(nullptr)},
      {"observed",
       "measured through --url: only what the server says over HTTP is known; its binary, "
       "commit, profile and effective configuration were not observed"}};
  // The version, when the server says one, is its claim, kept as such in endpoint.json.
  ServingArm arm;
  arm.label = label;
  arm.base_url = url;
  arm.identity.effective_config = json::object();
  arm.identity.identity = {{"label", label},
                           {"commit", "not observed"},
                           {"clean_tree", false},
                           {"binary_sha256", std::string(64, '0')},
                           {"profile", ""},
                           {"profile_sha256", ""},
                           {"effective_config_sha256", ""},
                           {"model", {{"preset", model}, {"config_sha256", ""}, {"weights", ""}}},
                           {"device", "not observed (measured through --url)"},
                           {"args", json::array()},
                           {"observed", "endpoint"},
                           {"endpoint", url}};
  bundle.add_bytes("server/" + label + "/endpoint.json", endpoint.dump(2) + "\n", "identity");
  bundle.add_bytes("server/" + label + "/identity.json", arm.identity.identity.dump(2) + "\n",
                   "identity");
  arm.metrics_before = arm.scrape_metrics();
  bundle.add_bytes("server/" + label + "/metrics-before.txt", arm.metrics_before, "metrics");
  return arm;
}

std::string weights_source(const std::string& weights) {
  const std::string::size_type at = weights.find(",format=");
  if (at == std::string::npos) return weights;
  const std::string::size_type end = weights.find(',', at + 1);
  return weights.substr(0, at) + (end == std::string::npos ? "" : weights.substr(end));
}

void check_arms_comparable(const std::vector<ServingArm>& arms) {
  if (arms.size() < 2) return;
  json a = arms[0].identity.identity["model"];
  json b = arms[1].identity.identity["model"];
  // The same weights stored in another format (--weight-format) are the change under test, not
  // another model: compare what the weights were made from. The identities stay in the bundle.
  for (json* m : {&a, &b})
    if (m->contains("weights") && (*m)["weights"].is_string())
      (*m)["weights"] = weights_source((*m)["weights"].get<std::string>());
  if (a != b)
    throw Error(ErrorKind::kInvalidArgument, "the arms serve different models (change.*.model): " +
                                                 arms[0].identity.identity["model"].dump() +
                                                 " vs " +
                                                 arms[1].identity.identity["model"].dump());
}

}  // namespace sparkglm::gates
