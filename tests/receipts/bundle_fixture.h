#pragma once
// A valid bundle written with BundleWriter into a fresh temporary folder, and the helpers the
// receipts tests use to corrupt it and to look for the problem that names the corruption.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/sha256.h"
#include "harness/request_record.h"
#include "receipts/attestation.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_verifier.h"
#include "receipts/bundle_writer.h"
#include "receipts/problem.h"
#include "receipts/qualification_record.h"

namespace sparkglm::receipts {

namespace fs = std::filesystem;
using nlohmann::json;

// A two-arm G2 measurement as the runner would fill it (artifacts and attestation come from
// finish(); make_bundle fills the hashes of the artifacts it writes).
inline json valid_record(const std::string& id) {
  const json identity = {
      {"label", "candidate"},
      {"commit", "af5e772"},
      {"clean_tree", true},
      {"binary_sha256", std::string(64, 'b')},
      {"profile", "4x1m"},
      {"profile_sha256", std::string(64, 'c')},
      {"effective_config_sha256", std::string(64, 'd')},
      {"model", {{"preset", "tinyglm-micro"}, {"config_sha256", ""}, {"weights", "dummy-seed:0"}}},
      {"device", "cpu"},
      {"args", {"--preset", "tinyglm-micro"}}};
  json baseline = identity;
  baseline["label"] = "baseline";
  const json stats = {
      {"median", 10.0}, {"min", 9.0}, {"max", 11.0}, {"samples", {9.0, 10.0, 11.0}}};
  return {
      {"schema", "sparkglm.qualification/1"},
      {"id", id},
      {"title", "G2 tinyGLM gate, tinyglm-micro, CPU"},
      {"created_at", "2026-11-29T21:04:05Z"},
      {"state", "measurement"},
      {"level", "G2"},
      {"target", "fp8 KV cache keeps tinyGLM's tokens and speed"},
      {"change",
       {{"class", "launcher-profile"},
        {"option", {{"name", "kv_cache_dtype"}, {"value", "fp8_g128"}}},
        {"baseline", baseline},
        {"candidate", identity}}},
      {"environment",
       {{"host", "ci"},
        {"os", "Linux"},
        {"cpu", "x86_64"},
        {"cpu_cores", 2},
        {"memory_bytes", 8589934592ULL},
        {"gpus", json::array()},
        {"driver", ""},
        {"cuda", ""},
        {"nccl", ""},
        {"compiler", "GNU-12.2.0"}}},
      {"workloads",
       {{{"id", "tinyglm-gate"}, {"spec_sha256", std::string(64, 'e')}, {"scale", 0.05}}}},
      {"gates",
       {{{"id", "G0"},
         {"status", "pass"},
         {"summary", "CI green"},
         {"criteria",
          {{{"name", "committed bundles verify"},
            {"observed", 0},
            {"threshold", 0},
            {"pass", true}}}}},
        {{"id", "G1"},
         {"status", "not-applicable"},
         {"summary", "no operator change"},
         {"criteria", json::array()}},
        {{"id", "G2"},
         {"status", "pass"},
         {"summary", "deterministic, same tokens, not slower"},
         {"criteria",
          {{{"name", "deterministic across repetitions"},
            {"observed", true},
            {"threshold", true},
            {"pass", true}}}}}}},
      {"metrics",
       {{{"name", "aggregate_decode_tok_s"},
         {"unit", "tok/s"},
         {"workload", "tinyglm-gate"},
         {"case", "decode_c1"},
         {"direction", "higher"},
         {"n", 3},
         {"baseline", stats},
         {"candidate", stats},
         {"change_pct", 0.0},
         {"ci95", {0.98, 1.02}},
         {"p", 0.9},
         {"verdict", "neutral-noisy"}}}},
      {"limitations", {"tinyGLM numbers say nothing about full-model throughput"}},
  };
}

// Every problem as "where: what" lines, for failure messages.
inline std::string text(const Problems& problems) {
  std::string out;
  for (const Problem& p : problems) out += "\n  " + p.to_string();
  return out.empty() ? "\n  (no problems)" : out;
}

// Whether some problem's `where` contains `where` and its `what` contains `what`.
inline bool has(const Problems& problems, const std::string& where, const std::string& what) {
  for (const Problem& p : problems)
    if (p.where.find(where) != std::string::npos && p.what.find(what) != std::string::npos)
      return true;
  return false;
}

#define EXPECT_PROBLEM(problems, where, what)   \
  EXPECT_TRUE(has((problems), (where), (what))) \
      << "expected " << (where) << ": " << (what) << text(problems)

class BundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("sparkglm_receipts_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Two requests as the harness records them: one served, one failed.
  static std::string requests_jsonl() {
    harness::RequestRecord ok;
    ok.arm = "candidate";
    ok.workload = "tinyglm-gate";
    ok.case_id = "decode_c1";
    ok.start_s = 0.5;
    ok.first_output_s = ok.first_visible_s = 0.75;
    ok.output_event_s = {0.75, 0.8, 0.9};
    ok.end_s = 1.0;
    ok.ok = true;
    ok.http_status = 200;
    harness::RequestRecord failed = ok;
    failed.index = 1;
    failed.first_output_s = failed.first_visible_s = std::nullopt;
    failed.output_event_s.clear();
    failed.ok = false;
    failed.http_status = 500;
    failed.error = "HTTP 500";
    return harness::to_json(ok).dump() + "\n" + harness::to_json(failed).dump() + "\n";
  }

  // The artifacts of a small two-arm run, in several subfolders, one of them streamed to disk;
  // the record's identities and spec hash say what the artifacts hold.
  fs::path make_bundle(const std::string& id, const fs::path& parent = {}) {
    const fs::path folder = (parent.empty() ? root_ : parent) / id;
    json record = valid_record(id);
    const std::string config = "{\"block-size\":16}\n", spec = "{\"id\":\"tinyglm-gate\"}\n";
    record["change"]["baseline"]["effective_config_sha256"] =
        sha256_hex(json::parse(config).dump());
    record["workloads"][0]["spec_sha256"] = sha256_hex(spec);
    BundleWriter writer(folder);
    writer.add_bytes("requests.jsonl", requests_jsonl(), "requests");
    writer.add_bytes("workloads/tinyglm-gate.json", spec, "workload");
    writer.add_bytes("server/baseline/effective-config.json", config, "config");
    writer.add_bytes("server/baseline/identity.json", record["change"]["baseline"].dump(2) + "\n",
                     "identity");
    writer.add_file("server/candidate/server.log", "log");
    std::ofstream(writer.where_is("server/candidate/server.log"), std::ios::binary)
        << "started\nserving\nstopped\n";
    writer.finish(record);
    return folder;
  }

  // A throwaway maintainer key: the private key at root_/NAME.pem, its public half committed (as
  // the repository would) to the trusted folder root_/keys/NAME.pub. Returns the public key.
  std::string trust(const std::string& name) {
    fs::create_directories(keys_dir());
    const std::string key = generate_key(root_ / (name + ".pem"));
    write(keys_dir() / (name + ".pub"), key + "\n");
    return key;
  }
  fs::path keys_dir() const { return root_ / "keys"; }
  // Options that trust root_/keys (never the repository's receipts/keys).
  VerifyOptions trusting(const std::string& public_key = "") const {
    VerifyOptions options;
    options.public_key = public_key;
    options.trusted_keys = keys_dir();
    return options;
  }

  static json record_of(const fs::path& bundle) {
    return json::parse(read_file(bundle / kManifestName));
  }
  static void save(const fs::path& bundle, const json& record) {
    write_file_atomically(bundle / kManifestName, record_file_text(record));
  }
  static void write(const fs::path& file, const std::string& bytes) {
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << bytes;
  }

  fs::path root_;
};

}  // namespace sparkglm::receipts
