#include "gates/engine_measurement.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/utc_time.h"
#include "gates/case_metrics.h"
#include "gates/engine_inputs.h"
#include "harness/run_environment.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_writer.h"

namespace sparkglm::gates {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One tok/s sample per run: the runs of a cell process the same tokens.
std::vector<double> tok_s_samples(const json& c) {
  std::vector<double> out;
  const double tokens_per_ms = c["tokens_per_s"].get<double>() * c["median_ms"].get<double>();
  for (const json& s : c["samples_ms"]) out.push_back(tokens_per_ms / s.get<double>());
  return out;
}

std::string label(const json& bench) {
  return bench["preset"].get<std::string>() + " (" + bench["device"].get<std::string>() + ")";
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// What the cell's floor is made of, for a reader asking why a fraction is low.
std::string floor_text(const json& bench, const json& c) {
  std::string t = fmt("median %.3f ms", c["median_ms"].get<double>()) +
                  fmt(" vs floor %.3f ms", c.value("floor_ms", 0.0));
  if (c.contains("floor_bytes"))
    t += fmt(" (%.1f MB read per step", c["floor_bytes"].get<double>() / 1e6) +
         fmt(" at %.0f GB/s)", bench["bandwidth_gbps"].get<double>());
  else if (c.contains("floor_flops"))
    t += fmt(" (%.2f TFLOP", c["floor_flops"].get<double>() / 1e12) +
         fmt(" at %.1f TFLOP/s)", bench["peak_tflops"].get<double>());
  if (c.contains("note")) t += "; " + c["note"].get<std::string>();
  return t;
}

std::string threshold_text(const EngineTarget& t, const std::string& unit) {
  return t.relation() + fmt("%.2f", t.value) + unit;
}

// One judged target.
void judge(GateResult& g, std::vector<std::string>& limits, const std::string& name,
           double observed, const EngineTarget& target, const std::string& unit,
           const std::string& why) {
  const bool pass = target.met(observed);
  const std::string th = threshold_text(target, unit);
  g.criteria.push_back({name, observed, th, pass, why});
  if (!pass)
    limits.push_back("target missed: " + name + " is " + fmt("%.3f", observed) + unit +
                     ", target " + th +
                     fmt(", short by %.1f %%", 100 * (1 - observed / target.value)) + ": " + why);
}

void unmeasured(GateResult& g, std::vector<std::string>& limits, const std::string& name,
                const std::string& threshold, const json* c) {
  const std::string why = c ? "skipped: " + c->value("skipped", "") : std::string("not measured");
  g.criteria.push_back({name, why, threshold, false, ""});
  limits.push_back("target missed: " + name + " (" + threshold + ") was " + why);
}

}  // namespace

GateResult judge_engine_targets(const std::vector<json>& benches, const json& peer,
                                const EngineTargets& t, std::vector<std::string>& limits) {
  GateResult g;
  g.id = "G2";
  for (const json& b : benches) {
    if (b["preset"] != t.preset) {
      limits.push_back(label(b) + ": measured only; the targets (gates/G2.json) are stated for " +
                       t.preset);
      continue;
    }
    const std::string who = label(b) + " ";
    const json *c1 = find_cell(b, "decode_c1"), *c8 = find_cell(b, "decode_c8"),
               *p8 = find_cell(b, "prefill_8k");
    const std::string n1 = who + "C1 decode, fraction of its weight-streaming floor";
    if (measured(c1))
      judge(g, limits, n1, (*c1)["fraction_of_floor"], t.c1_decode_fraction_of_floor, "",
            floor_text(b, *c1));
    else
      unmeasured(g, limits, n1, threshold_text(t.c1_decode_fraction_of_floor, ""), c1);
    const std::string n8 = who + "C8 aggregate decode tok/s over C1";
    if (measured(c1) && measured(c8))
      judge(g, limits, n8,
            (*c8)["tokens_per_s"].get<double>() / (*c1)["tokens_per_s"].get<double>(),
            t.c8_over_c1_decode, "x", "C8 " + floor_text(b, *c8));
    else
      unmeasured(g, limits, n8, threshold_text(t.c8_over_c1_decode, "x"), measured(c1) ? c8 : c1);
    const std::string np = who + "8K prefill, fraction of its compute floor";
    if (measured(p8))
      judge(g, limits, np, (*p8)["fraction_of_floor"], t.prefill_8k_fraction_of_floor, "",
            floor_text(b, *p8));
    else
      unmeasured(g, limits, np, threshold_text(t.prefill_8k_fraction_of_floor, ""), p8);
    if (peer.is_null() || peer["preset"] != b["preset"]) {
      limits.push_back(who + "C1 decode against PyTorch eager (" +
                       threshold_text(t.c1_decode_over_torch_eager, "x") + ") and torch.compile (" +
                       threshold_text(t.c1_decode_over_torch_compile, "x") +
                       "): not judged, no --torch-peer for this preset");
      continue;
    }
    const std::pair<const char*, EngineTarget> modes[] = {
        {"eager", t.c1_decode_over_torch_eager}, {"compile", t.c1_decode_over_torch_compile}};
    for (const auto& [mode, target] : modes) {
      const json* p = find_cell(peer, "decode_c1", mode);
      const std::string n = who + "C1 decode tok/s over torch " + mode + " (" +
                            peer["device"].get<std::string>() + ")";
      if (!measured(p)) {
        limits.push_back(
            n + ": not judged, the peer " +
            (p ? "skipped: " + p->value("skipped", "") : std::string("lacks the cell")));
      } else if (!measured(c1)) {
        unmeasured(g, limits, n, threshold_text(target, "x"), c1);
      } else {
        const double ours = (*c1)["tokens_per_s"], theirs = (*p)["tokens_per_s"];
        judge(g, limits, n, ours / theirs, target, "x",
              fmt("SparkGLM %.1f tok/s", ours) + fmt(" vs torch %.1f tok/s", theirs));
      }
    }
    // "SparkGLM must be faster at every cell": each other measured cell against both modes.
    for (const json& c : b["cells"]) {
      const std::string cell = c["cell"];
      if (cell == "decode_c1" || !measured(&c)) continue;
      for (const char* mode : {"eager", "compile"}) {
        const json* p = find_cell(peer, cell, mode);
        if (!measured(p)) continue;
        const double ours = c["tokens_per_s"], theirs = (*p)["tokens_per_s"];
        judge(g, limits, who + cell + " tok/s over torch " + mode, ours / theirs,
              t.cells_over_torch, "x",
              fmt("SparkGLM %.1f tok/s", ours) + fmt(" vs torch %.1f tok/s", theirs));
      }
    }
  }
  if (g.criteria.empty())
    return not_run("G2",
                   "no " + t.preset + " runner bench: the targets are stated for " + t.preset);
  g.summary = "engine-step targets of the issue (speed is measured here, not an A/B)";
  g.conclude();
  return g;
}

namespace {

// A _schema cell's mask cost (bench/runner/constrained_cell.h), per timed step: the masks' time
// per token and their share of the step; the same rows' unconstrained tok/s; the grammar's bytes.
void add_mask_metrics(const json& c, const std::string& workload, const std::string& cell,
                      json& out) {
  const double rows = c["rows"].get<double>();
  std::vector<double> per_token, share;
  for (size_t i = 0; i < c["samples_ms"].size(); ++i) {
    const double us = c["mask_samples_us"][i].get<double>();
    per_token.push_back(us / rows);
    share.push_back(us / 1e3 / c["samples_ms"][i].get<double>());
  }
  out.push_back(
      metric_to_json({"mask_us_per_token", "us", workload, cell, false, {}, per_token}, 5.0));
  out.push_back(
      metric_to_json({"mask_fraction_of_step", "fraction", workload, cell, false, {}, share}, 5.0));
  out.push_back(metric_to_json({"unconstrained_tokens_per_s",
                                "tok/s",
                                workload,
                                cell,
                                true,
                                {},
                                tok_s_samples(c["unconstrained"])},
                               5.0));
  out.push_back(metric_to_json(
      {"grammar_bytes", "bytes", workload, cell, false, {}, {c["grammar_bytes"].get<double>()}},
      5.0));
}

// Per measured cell: tok/s and fraction of floor; where the peer ran the same cell, its tok/s and
// the ratio SparkGLM / peer of the medians. All single-arm ("measured"): the peer is no build of
// this engine, so it cannot be the record's baseline identity.
json cell_metrics(const std::vector<json>& benches, const json& peer) {
  json out = json::array();
  for (const json& b : benches)
    for (const json& c : b["cells"]) {
      if (c.contains("skipped")) continue;
      const std::string workload = "runner-bench " + label(b), cell = c["cell"];
      const std::vector<double> tps = tok_s_samples(c);
      out.push_back(metric_to_json({"tokens_per_s", "tok/s", workload, cell, true, {}, tps}, 5.0));
      std::vector<double> fraction;
      for (const json& s : c["samples_ms"])
        fraction.push_back(c["floor_ms"].get<double>() / s.get<double>());
      out.push_back(metric_to_json(
          {c.contains("floor_bytes") ? "fraction_of_bandwidth_floor" : "fraction_of_compute_floor",
           "fraction",
           workload,
           cell,
           true,
           {},
           fraction},
          5.0));
      if (c.contains("mask_samples_us")) add_mask_metrics(c, workload, cell, out);
      if (peer.is_null() || peer["preset"] != b["preset"]) continue;
      for (const char* mode : {"eager", "compile"}) {
        const json* p = find_cell(peer, cell, mode);
        if (!measured(p)) continue;
        const std::string m = std::string("torch_") + mode;
        out.push_back(metric_to_json(
            {m + "_tokens_per_s", "tok/s", workload, cell, true, {}, tok_s_samples(*p)}, 5.0));
        const double ratio = c["tokens_per_s"].get<double>() / (*p)["tokens_per_s"].get<double>();
        out.push_back(
            metric_to_json({"ratio_to_" + m, "x", workload, cell, true, {}, {ratio}}, 5.0));
      }
    }
  return out;
}

// The candidate: the runner bench's binary, as its files say (they must agree).
json candidate_identity(const std::vector<json>& benches) {
  std::string presets, weights;
  std::vector<std::string> devices;
  for (const json& b : benches) {
    for (const char* k : {"binary_sha256", "commit"})
      if (b[k] != benches[0][k])
        throw Error(ErrorKind::kInvalidArgument,
                    std::string("--runner-bench: the files come from different binaries (") + k +
                        " " + b[k].get<std::string>() + " vs " + benches[0][k].get<std::string>() +
                        ")");
    presets += (presets.empty() ? "" : ",") + b["preset"].get<std::string>();
    weights += (weights.empty() ? "" : ",") + b["weights"].get<std::string>();
    const std::string d = b["device"];
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  }
  std::string device;
  for (const std::string& d : devices) device += (device.empty() ? "" : ",") + d;
  return {{"label", "candidate"},
          {"commit", benches[0]["commit"]},
          {"clean_tree", benches[0].value("clean_tree", false)},
          {"binary_sha256", benches[0]["binary_sha256"]},
          {"profile", ""},
          {"profile_sha256", ""},
          {"effective_config_sha256", ""},
          {"model",
           {{"preset", presets},
            {"config_sha256", benches.size() == 1 ? benches[0]["config_sha256"] : json("")},
            {"weights", weights}}},
          {"device", device},
          {"args", json::array()}};
}

}  // namespace

json write_engine_measurement(const MeasureRequest& r) {
  if (r.runner_bench.empty())
    throw Error(ErrorKind::kInvalidArgument, "--runner-bench: at least one file is needed");
  std::vector<json> benches;
  std::vector<std::string> bytes;
  for (const fs::path& p : r.runner_bench) {
    benches.push_back(read_json(p, "--runner-bench"));  // refuses a file too large to hold first
    bytes.push_back(receipts::read_file(p));
    check_runner_bench(benches.back(), p.string());
  }
  json peer;  // null without --torch-peer
  if (!r.torch_peer.empty()) {
    peer = read_json(r.torch_peer, "--torch-peer");
    check_torch_peer(peer, r.torch_peer.string());
  }
  json change = {{"class", "operator"},
                 {"option", nullptr},
                 {"baseline", nullptr},
                 {"candidate", candidate_identity(benches)}};
  const GateDefinition g2 = load_gate(r.gates.string(), "G2");
  if (!g2.engine_targets)
    throw Error(ErrorKind::kInvalidConfig, (r.gates / "G2.json").string() +
                                               ": no \"engine_targets\" to judge a measurement by");
  std::vector<std::string> limits;
  const GateResult gate = judge_engine_targets(benches, peer, *g2.engine_targets, limits);
  limits.insert(limits.end(), r.notes.begin(), r.notes.end());
  const json env = harness::probe_environment();
  for (const json& b : benches) {
    for (const json& c : b["cells"])
      if (c.contains("skipped"))
        limits.push_back(label(b) + " " + c["cell"].get<std::string>() +
                         " skipped: " + c["skipped"].get<std::string>());
    if (b["device"] == "cpu")
      limits.push_back(label(b) + ": the compute floor divides by an estimated CPU peak (" +
                       b.value("peak_method", "see the runner bench file") + ")");
  }
  limits.push_back(
      "engine-step numbers of a ModelRunner driven directly (no scheduler, no HTTP); "
      "the environment is the host that wrote this bundle, the device each number "
      "ran on is in its runner-bench file");
  receipts::BundleWriter bundle(r.out);
  std::vector<std::string> used;
  for (size_t i = 0; i < benches.size(); ++i) {
    std::string name = "runner-bench/" + benches[i]["preset"].get<std::string>() + "-" +
                       benches[i]["device"].get<std::string>();
    if (std::find(used.begin(), used.end(), name) != used.end()) name += "-" + std::to_string(i);
    used.push_back(name);
    bundle.add_bytes(name + ".json", bytes[i], "metrics");
  }
  if (!peer.is_null())
    bundle.add_bytes("torch-peer.json", receipts::read_file(r.torch_peer), "metrics");
  const json record = {
      {"schema", "sparkglm.qualification/1"},
      {"id", r.id},
      {"title", r.title},
      {"created_at", utc_now_iso8601()},
      {"state", "measurement"},
      {"level", "G2"},
      {"target",
       "engine-step speed of the ModelRunner: decode tok/s at C1, C4, C8 and cold prefill tok/s "
       "at 8K, 32K, 64K, each beside its floor"},
      {"change", change},
      {"environment", env},
      {"workloads", json::array()},
      {"gates", json::array({gate.to_json()})},
      {"metrics", cell_metrics(benches, peer)},
      {"limitations", limits}};
  return bundle.finish(record);
}

}  // namespace sparkglm::gates
