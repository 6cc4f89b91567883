#pragma once
// A valid bundle written with BundleWriter into a fresh temporary folder, and the helpers the
// receipts tests use to corrupt it and to look for the problem that names the corruption.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "receipts/bundle_file.h"
#include "receipts/bundle_writer.h"
#include "receipts/problem.h"
#include "receipts/qualification_record.h"

namespace sparkglm::receipts {

namespace fs = std::filesystem;
using nlohmann::json;

// A two-arm G2 record as the runner would fill it (artifacts and attestation come from finish()).
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
      {"state", "candidate"},
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
       {{{"id", "G0"}, {"status", "pass"}, {"summary", "CI green"}, {"criteria", json::array()}},
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

  // The artifacts of a small two-arm run, in several subfolders, one of them streamed to disk.
  fs::path make_bundle(const std::string& id, const fs::path& parent = {}) {
    const fs::path folder = (parent.empty() ? root_ : parent) / id;
    BundleWriter writer(folder);
    writer.add_bytes("requests.jsonl",
                     "{\"case_id\":\"decode_c1\",\"ok\":true}\n"
                     "{\"case_id\":\"decode_c1\",\"ok\":false}\n",
                     "requests");
    writer.add_bytes("workloads/tinyglm-gate.json", "{\"id\":\"tinyglm-gate\"}\n", "workload");
    writer.add_bytes("server/baseline/effective-config.json", "{\"block-size\":16}\n", "config");
    writer.add_bytes("server/baseline/identity.json", "{\"commit\":\"af5e772\"}\n", "identity");
    writer.add_file("server/candidate/server.log", "log");
    std::ofstream(writer.where_is("server/candidate/server.log"), std::ios::binary)
        << "started\nserving\nstopped\n";
    writer.finish(valid_record(id));
    return folder;
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
