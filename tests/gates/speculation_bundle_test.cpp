// A speculation bundle carries speculation_bench files and judges G2's speculation_targets on
// them; the verifier judges them again and believes none of the record's words. Here the bench
// files are synthetic (C1 and C4, k = 0..2): the bundle logic reads numbers and hashes, not a
// model. A speedup under the target and an output that changed with speculation each fail their
// criterion; an edited file, verdict, metric, target or limitation fails verification; bad input
// is refused before anything is written.
#include "gates/speculation_bundle.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "gates/gate_definition.h"
#include "gates/qualify_commands.h"
#include "gates/verdict_rederivation.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_verifier.h"
#include "receipts/problem.h"
#include "receipts/qualification_record.h"
#include "tests/support/build_paths.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSource = sparkglm::testing::source_dir();
const fs::path kGates = kSource / "gates";
// The checkpoint G2's speculation target names: the bench files below measure it.
const std::string& target_model() {
  static const std::string m = load_gate(kGates.string(), "G2").speculation_targets->checkpoint;
  return m;
}

// One cell: three repetitions around `tok_s` (its median), every draft position accepted 80 %.
json cell(int c, int k, double tok_s, char hash, bool in_step = true) {
  json acceptance = json::array();
  for (int i = 0; i < k; ++i) acceptance.push_back(0.8);
  return {{"device", "cuda"},
          {"k", k},
          {"rollback", "records"},
          {"concurrency", c},
          {"draft_in_step", in_step},
          {"decode_tok_s", {tok_s * 0.98, tok_s, tok_s * 1.01}},
          {"median_decode_tok_s", tok_s},
          {"steady_decode_tok_s", {tok_s, tok_s, tok_s}},
          {"acceptance_by_position", acceptance},
          {"tokens_per_verify_step", 1 + 0.8 * k},
          {"step_drafts_per_verify_step", k > 0 ? 1.0 : 0.0},
          {"output_sha256", std::string(64, hash)}};
}

// The trained micro on cuda over eight prompts a repetition, as the targets name it: C1 k = 1 at
// 1.8x k = 0, outputs equal.
json bench() {
  return {{"schema", "sparkglm.speculation_bench/1"},
          {"device", "cuda"},
          {"model_dir", target_model()},
          {"weights", "sha256:model-00001-of-00001.safetensors=" + std::string(64, 'd')},
          {"config_sha256", std::string(64, 'c')},
          {"cuda_graphs", true},
          {"profile_steps", false},
          {"threads", 16},
          {"max_tokens", 128},
          {"reps", 3},
          {"waves", 8},  // C1: prompts 0..7 a repetition, as G2's min_prompts asks
          {"prompts", 48},
          {"rollback", "records"},
          {"cells",
           {cell(1, 0, 1000, '1'), cell(1, 1, 1800, '1'), cell(1, 2, 1500, '1'),
            cell(4, 0, 3000, '4'), cell(4, 1, 3300, '4'), cell(4, 2, 2800, '4')}},
          {"binary_sha256", std::string(64, 'a')},
          {"commit", "0123abcd"},
          {"clean_tree", true}};
}

struct TempDir {
  fs::path path =
      fs::temp_directory_path() / ("speculation-bundle-" + std::to_string(getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
    return path / name;
  }
  fs::path write(const std::string& name, const json& j) const { return write(name, j.dump(1)); }
};

SpeculationRequest request(std::vector<fs::path> files, const fs::path& gates = kGates) {
  return {std::move(files), "speculation", "s1", {"a note"}, gates};
}

receipts::Problems verify(const fs::path& bundle, const fs::path& gates = kGates) {
  return receipts::verify_bundle(bundle, full_verification(kSource / "receipts/keys", gates));
}

std::string listed(const receipts::Problems& problems) {
  std::string text;
  for (const receipts::Problem& p : problems) text += "  " + p.to_string() + "\n";
  return text;
}

// Whether one problem's text holds both parts (where it is, what it says).
bool names(const receipts::Problems& problems, const std::string& where, const std::string& what) {
  for (const receipts::Problem& p : problems)
    if (p.to_string().find(where) != std::string::npos &&
        p.to_string().find(what) != std::string::npos)
      return true;
  return false;
}

bool has_line(const json& lines, const std::string& part) {
  for (const json& l : lines)
    if (l.get<std::string>().find(part) != std::string::npos) return true;
  return false;
}

const json* criterion(const json& record, const std::string& name) {
  for (const json& c : record["gates"][0]["criteria"])
    if (c["name"] == name) return &c;
  return nullptr;
}

json read_record(const fs::path& bundle) {
  return receipts::parse_record_text(receipts::read_file(bundle / "qualification.json"), "q");
}

// Rewrites qualification.json after `edit`, as a careless hand would.
void edit_record(const fs::path& bundle, const std::function<void(json&)>& edit) {
  json record = read_record(bundle);
  edit(record);
  receipts::write_file_atomically(bundle / "qualification.json",
                                  receipts::record_file_text(record));
}

fs::path copy_of(const fs::path& bundle, const std::string& tag) {
  const fs::path to = bundle.parent_path() / tag / bundle.filename();
  fs::create_directories(to.parent_path());
  fs::copy(bundle, to, fs::copy_options::recursive);
  return to;
}

const std::string kSpeedup = "C1 speedup over k = 0 (best median decode tok/s with k >= 1)";

TEST(SpeculationBundle, AWrittenBundleVerifiesAndRecordsTheBestSpeedup) {
  TempDir t;
  const fs::path out = t.path / "s1";
  const json record = write_speculation_bundle(out, request({t.write("b.json", bench())}));
  EXPECT_TRUE(verify(out).empty()) << listed(verify(out));
  EXPECT_EQ(record["gates"][0]["status"], "pass") << record["gates"][0].dump(1);
  ASSERT_NE(criterion(record, kSpeedup), nullptr) << record["gates"][0].dump(1);
  EXPECT_DOUBLE_EQ((*criterion(record, kSpeedup))["observed"].get<double>(), 1.8);
  EXPECT_EQ((*criterion(record, kSpeedup))["threshold"], ">= 1.60x");
  EXPECT_NE((*criterion(record, kSpeedup))["note"].get<std::string>().find(
                "k=1 records, draft in step (speculation-bench/1.json): median 1800.0 tok/s "
                "over k=0's 1000.0 tok/s"),
            std::string::npos);
  ASSERT_NE(criterion(record, "C4 greedy output identical across k"), nullptr);
  EXPECT_EQ((*criterion(record, "C4 greedy output identical across k"))["observed"], 0);
  EXPECT_EQ(record["change"]["candidate"]["binary_sha256"], std::string(64, 'a'));
  EXPECT_EQ(record["change"]["candidate"]["model"]["preset"],
            fs::path(target_model()).filename().string());
  EXPECT_EQ(record["speculation"]["files"][0]["path"], "speculation-bench/1.json");
  EXPECT_EQ(record["speculation"]["targets"]["min_speedup"], 1.6);
  EXPECT_TRUE(has_line(record["limitations"], "a note"));
  std::map<std::string, double> medians;  // "case metric" -> median
  for (const json& m : record["metrics"]) {
    EXPECT_EQ(m["workload"],
              "speculation-bench " + fs::path(target_model()).filename().string() + " (cuda)");
    medians[m["case"].get<std::string>() + " " + m["name"].get<std::string>()] =
        m["candidate"]["median"];
  }
  EXPECT_DOUBLE_EQ(medians["c1-k1-records-instep speedup_over_k0"], 1.8);
  EXPECT_DOUBLE_EQ(medians["c4-k2-records-instep speedup_over_k0"], 2800.0 / 3000.0);
  EXPECT_DOUBLE_EQ(medians["c4-k1-records-instep decode_tokens_per_s"], 3300.0);
  EXPECT_DOUBLE_EQ(medians["c1-k2-records-instep acceptance_pos2"], 0.8);
  EXPECT_DOUBLE_EQ(medians["c1-k2-records-instep tokens_per_verify_step"], 2.6);
  EXPECT_EQ(medians.count("c1-k0-records-instep speedup_over_k0"), 0u);
  EXPECT_EQ(medians.size(), 22u);  // 6 tok/s, 6 tokens/step, 4 speedups, 6 acceptances
}

TEST(SpeculationBundle, ASpeedupUnderTheTargetFailsAndSaysByHowMuch) {
  TempDir t;
  json b = bench();
  b["cells"][1] = cell(1, 1, 1200, '1');
  b["cells"][2] = cell(1, 2, 1100, '1');
  const fs::path out = t.path / "s1";
  const json record = write_speculation_bundle(out, request({t.write("b.json", b)}));
  EXPECT_EQ(record["gates"][0]["status"], "fail");
  ASSERT_NE(criterion(record, kSpeedup), nullptr);
  EXPECT_FALSE((*criterion(record, kSpeedup))["pass"].get<bool>());
  EXPECT_DOUBLE_EQ((*criterion(record, kSpeedup))["observed"].get<double>(), 1.2);
  EXPECT_TRUE(has_line(record["limitations"], "target missed: " + kSpeedup +
                                                  " is 1.200x, target >= 1.60x, short by 25.0 %"))
      << record["limitations"].dump(1);
  EXPECT_TRUE(verify(out).empty()) << listed(verify(out));  // a fail, written as one
}

TEST(SpeculationBundle, AnOutputThatChangedWithSpeculationFailsIdentity) {
  TempDir t;
  json b = bench();
  b["cells"][5]["output_sha256"] = std::string(64, '5');  // C4 k = 2
  const json record = write_speculation_bundle(t.path / "s1", request({t.write("b.json", b)}));
  EXPECT_EQ(record["gates"][0]["status"], "fail");
  const json* c4 = criterion(record, "C4 greedy output identical across k");
  ASSERT_NE(c4, nullptr);
  EXPECT_FALSE((*c4)["pass"].get<bool>());
  EXPECT_EQ((*c4)["observed"], 1);
  EXPECT_TRUE((*criterion(record, "C1 greedy output identical across k"))["pass"].get<bool>());
  EXPECT_TRUE((*criterion(record, kSpeedup))["pass"].get<bool>());
  EXPECT_TRUE(has_line(record["limitations"],
                       "C4 greedy output identical across k: 1 of 2 cell(s) differ "
                       "(output_sha256 differs from the k = 0 cell's in speculation-bench/1.json "
                       "c4-k2-records-instep)"))
      << record["limitations"].dump(1);
}

TEST(SpeculationBundle, AnotherDeviceOrModelIsJudgedForIdentityNotSpeed) {
  for (const auto& [field, value] : {std::pair<std::string, std::string>{"device", "cpu"},
                                     {"model_dir", "tinyglm/weights/other"}}) {
    json b = bench();
    b[field] = value;
    if (field == "device")
      for (json& c : b["cells"]) c["device"] = "cpu";
    std::vector<std::string> limits;
    const GateResult g = judge_speculation(*load_gate(kGates.string(), "G2").speculation_targets,
                                           {parse_speculation_bench(b, "b.json")}, &limits);
    ASSERT_EQ(g.criteria.size(), 2u) << field;  // C1 and C4 identity; no speedup
    EXPECT_EQ(g.status, "pass");
    EXPECT_NE(g.summary.find("speedup not judged"), std::string::npos) << g.summary;
    ASSERT_EQ(limits.size(), 1u);
    EXPECT_NE(limits[0].find(kSpeedup + " not judged, the target is stated for " + target_model() +
                             " on cuda"),
              std::string::npos)
        << limits[0];
  }
  // The same path spelled with a trailing slash is the same checkpoint.
  json b = bench();
  b["model_dir"] = target_model() + "/";
  const GateResult g = judge_speculation(*load_gate(kGates.string(), "G2").speculation_targets,
                                         {parse_speculation_bench(b, "b.json")});
  EXPECT_EQ(g.criteria.size(), 3u);
}

// G2's min_prompts: a file whose C1 cells ran fewer prompts a repetition than it asks (one round,
// or a file that does not say how many prompts it was given) is judged for identity, not speed,
// and says why; eight rounds of one prompt, or one round of eight at C8, reach it.
TEST(SpeculationBundle, ASpeedupOnFewerPromptsThanTheTargetAsksIsNotJudged) {
  const SpeculationTargets t = *load_gate(kGates.string(), "G2").speculation_targets;
  ASSERT_EQ(t.min_prompts, 8);
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    std::string why;  // "" where the speedup is judged
  };
  const std::vector<Case> cases = {
      {"one round", [](json& b) { b["waves"] = 1; },
       "its C1 cells ran 1 prompt(s) a repetition (waves 1, 48 given), the target needs 8"},
      {"no waves (a file before --waves)", [](json& b) { b.erase("waves"); },
       "its C1 cells ran 1 prompt(s) a repetition (waves 1, 48 given)"},
      {"seven rounds", [](json& b) { b["waves"] = 7; },
       "its C1 cells ran 7 prompt(s) a repetition (waves 7, 48 given)"},
      {"eight rounds of a six-prompt file", [](json& b) { b["prompts"] = 6; },
       "its C1 cells ran 6 prompt(s) a repetition (waves 8, 6 given)"},
      {"no prompt count", [](json& b) { b.erase("prompts"); },
       "the file does not say how many prompts its cells ran"},
      {"eight rounds", [](json&) {}, ""},
      {"nine rounds", [](json& b) { b["waves"] = 9; }, ""}};
  for (const Case& c : cases) {
    json b = bench();
    c.edit(b);
    std::vector<std::string> limits;
    const GateResult g = judge_speculation(t, {parse_speculation_bench(b, "b.json")}, &limits);
    if (c.why.empty()) {
      EXPECT_EQ(g.criteria.size(), 3u) << c.what;  // C1 and C4 identity, the C1 speedup
      EXPECT_TRUE(limits.empty()) << c.what << ": " << limits[0];
      continue;
    }
    ASSERT_EQ(g.criteria.size(), 2u) << c.what;  // identity only
    EXPECT_EQ(g.status, "pass") << c.what;
    EXPECT_NE(g.summary.find("speedup not judged: no file measured " + target_model() +
                             " on cuda over 8 prompts"),
              std::string::npos)
        << c.what << ": " << g.summary;
    ASSERT_EQ(limits.size(), 1u) << c.what;
    EXPECT_NE(limits[0].find("b.json: " + kSpeedup + " not judged, " + c.why), std::string::npos)
        << c.what << ": " << limits[0];
  }
  // The count is a bounded integer, as the bench writes it.
  for (const json& bad : {json(0), json(-3), json(2.5), json("8"), json(int64_t(1) << 40)}) {
    json b = bench();
    b["prompts"] = bad;
    EXPECT_THROW(parse_speculation_bench(b, "b.json"), Error) << bad.dump();
  }
  json w = bench();
  w["waves"] = 65;
  EXPECT_THROW(parse_speculation_bench(w, "b.json"), Error);
}

TEST(SpeculationBundle, EditingTheCarriedBenchFileFailsVerification) {
  TempDir t;
  const fs::path bundle = t.path / "s1";
  write_speculation_bundle(bundle, request({t.write("b.json", bench())}));
  const std::string path = "speculation-bench/1.json";
  const std::string bytes = receipts::read_file(bundle / path);
  const size_t at = bytes.find("1800");
  ASSERT_NE(at, std::string::npos);
  // One number edited, nothing else: the artifact changed.
  const fs::path a = copy_of(bundle, "a");
  receipts::write_file_atomically(a / path, std::string(bytes).replace(at, 4, "2900"));
  EXPECT_TRUE(names(verify(a), path, "changed")) << listed(verify(a));
  // Edited and re-hashed everywhere the record binds it: the metrics and the gate's observed
  // numbers no longer follow from the file.
  const fs::path f = copy_of(bundle, "f");
  json doc = json::parse(bytes);
  doc["cells"][1]["decode_tok_s"] = {2900.0 * 0.98, 2900.0, 2900.0 * 1.01};
  doc["cells"][1]["median_decode_tok_s"] = 2900.0;
  const std::string forged = doc.dump(1);
  receipts::write_file_atomically(f / path, forged);
  const receipts::FileDigest d = receipts::digest_file(f / path);
  edit_record(f, [&](json& r) {
    for (json& artifact : r["artifacts"])
      if (artifact["path"] == path) {
        artifact["sha256"] = d.sha256;
        artifact["bytes"] = d.bytes;
      }
    r["speculation"]["files"][0]["sha256"] = d.sha256;
  });
  const receipts::Problems p = verify(f);
  EXPECT_TRUE(names(p, "metrics[", "the carried files give")) << listed(p);
  EXPECT_TRUE(names(p, "gates[0].criteria[2]", "judged again")) << listed(p);
}

TEST(SpeculationBundle, EditingTheRecordFailsVerification) {
  TempDir t;
  json b = bench();
  b["cells"][1] = cell(1, 1, 1200, '1');  // a missed target: the gate fails
  const fs::path bundle = t.path / "s1";
  write_speculation_bundle(bundle, request({t.write("b.json", b)}));
  const std::vector<std::tuple<std::string, std::string, std::function<void(json&)>>> edits = {
      {"gates[0].status", "judged again",
       [](json& r) {  // made a pass, criteria and all
         r["gates"][0]["status"] = "pass";
         for (json& c : r["gates"][0]["criteria"]) c["pass"] = true;
       }},
      {"metrics[1]", "the carried files give",
       [](json& r) { r["metrics"][1]["candidate"]["median"] = 9.0; }},
      {"speculation.targets", "are not G2.json's",
       [](json& r) { r["speculation"]["targets"]["min_speedup"] = 1.1; }},
      {"limitations", "lacks \"target missed",
       [](json& r) {
         json kept = json::array();
         for (const json& l : r["limitations"])
           if (l.get<std::string>().rfind("target missed", 0) != 0) kept.push_back(l);
         r["limitations"] = kept;
       }},
      {"change.candidate", "the carried files give",
       [](json& r) { r["change"]["candidate"]["binary_sha256"] = std::string(64, 'b'); }},
      {"speculation.files[0].sha256", "hashes to",
       [](json& r) { r["speculation"]["files"][0]["sha256"] = std::string(64, 'e'); }},
  };
  ASSERT_TRUE(verify(bundle).empty()) << listed(verify(bundle));
  for (const auto& [where, what, edit] : edits) {
    const fs::path copy = copy_of(bundle, "edit-" + where);
    edit_record(copy, edit);
    EXPECT_TRUE(names(verify(copy), where, what)) << where << ":\n" << listed(verify(copy));
  }
}

// An error of write_speculation_bundle's, or "" when it wrote the bundle.
std::string refusal(const TempDir& t, const std::vector<fs::path>& files) {
  const fs::path out = t.path / "s1";
  fs::remove_all(out);
  try {
    write_speculation_bundle(out, request(files));
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    EXPECT_FALSE(fs::exists(out)) << "a refused bundle left " << out;
    return e.what();
  }
  return "";
}

TEST(SpeculationBundle, BadInputIsRefusedNamingTheFileAndField) {
  TempDir t;
  // Each case writes its file when it runs: bad-<case>.json.
  using Make = std::function<fs::path(const std::string&)>;
  const auto with = [&](const std::function<void(json&)>& edit) -> Make {
    return [&t, edit](const std::string& name) {
      json b = bench();
      edit(b);
      return t.write(name, b);
    };
  };
  const std::vector<std::pair<Make, std::string>> cases = {
      {[&](const std::string&) { return t.path / "absent.json"; }, "absent.json: cannot be read"},
      {[&](const std::string& name) { return t.write(name, std::string("cells: none")); },
       "not valid JSON"},
      {with([](json& b) { b["schema"] = "sparkglm.runner_bench/1"; }),
       "field schema: expected \"sparkglm.speculation_bench/1\""},
      {with([](json& b) { b.erase("schema"); }),
       "no \"schema\": a speculation_bench file written before"},
      {with([](json& b) { b["cells"].erase(3); }),  // C4 k = 0
       "cells[3] (c4-k1-records-instep) has no k = 0 cell"},
      {with([](json& b) { b["cells"].push_back(b["cells"][1]); }),
       "cells[6] (c1-k1-records-instep) repeats cells[1]"},
      {with([](json& b) { b["cells"][2]["median_decode_tok_s"] = 1400.0; }),
       "field cells[2].median_decode_tok_s: expected the middle of decode_tok_s"},
      {with([](json& b) { b["cells"][2]["acceptance_by_position"] = {0.8}; }),
       "field cells[2].acceptance_by_position: expected an array of 2 numbers"},
      {with([](json& b) {
         b["cells"][4]["decode_tok_s"] = {1.0, 2.0};
       }),
       "field cells[4].decode_tok_s: expected an array of 3 numbers"},
      {with([](json& b) { b.erase("binary_sha256"); }),
       "field binary_sha256: expected 64 lowercase hex digits, got nothing"},
      {with([](json& b) { b["profile_steps"] = true; }), "field profile_steps"},
      {with([](json& b) {
         for (int c = 1; c <= 86; ++c)
           for (int k = 0; k < 3; ++k) b["cells"].push_back(cell(c + 4, k, 100, '9'));
       }),
       "field cells: expected an array of 1..256 cells"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = "bad-" + std::to_string(i) + ".json";
    const std::string got = refusal(t, {cases[i].first(name)});
    EXPECT_NE(got.find(cases[i].second), std::string::npos)
        << "expected: " << cases[i].second << "\ngot: " << got;
    if (i > 0) {
      EXPECT_NE(got.find(name), std::string::npos) << "the file is not named: " << got;
    }
  }
  // Two files from different binaries make no one candidate.
  json other = bench();
  other["binary_sha256"] = std::string(64, 'b');
  EXPECT_NE(refusal(t, {t.write("b1.json", bench()), t.write("b2.json", other)})
                .find("come from different binaries"),
            std::string::npos);
  // The committed files written before the schema are refused as such, not misread.
  EXPECT_NE(
      refusal(t, {kSource / "bench/results/h200-2026-12-03-s13/spec-micro-cuda-instep-on.json"})
          .find("no \"schema\""),
      std::string::npos);
}

TEST(SpeculationBundle, TwoFilesKeepTheirCasesApart) {
  TempDir t;
  json off = bench();
  for (json& c : off["cells"]) c["draft_in_step"] = false;
  off["cells"][1]["decode_tok_s"] = {2000.0, 2100.0, 2200.0};
  off["cells"][1]["median_decode_tok_s"] = 2100.0;
  const fs::path out = t.path / "s1";
  const json record =
      write_speculation_bundle(out, request({t.write("on.json", bench()), t.write("off.json", off),
                                             t.write("again.json", bench())}));
  EXPECT_TRUE(verify(out).empty()) << listed(verify(out));
  std::set<std::string> cases;
  for (const json& m : record["metrics"])
    if (m["name"] == "decode_tokens_per_s") cases.insert(m["case"]);
  EXPECT_EQ(cases.size(), 18u);  // 6 cells in each of 3 files
  EXPECT_TRUE(cases.count("c1-k1-records-outstep"));
  EXPECT_TRUE(cases.count("c1-k1-records-instep-f3"));
  // The best over both files: the drafts out of step at 2.1x.
  EXPECT_DOUBLE_EQ((*criterion(record, kSpeedup))["observed"].get<double>(), 2.1);
  EXPECT_NE((*criterion(record, kSpeedup))["note"].get<std::string>().find(
                "draft out of step (speculation-bench/2.json)"),
            std::string::npos);
}

// gates/G2.json edited, in a folder of its own.
fs::path gates_with(const TempDir& t, const std::string& name,
                    const std::function<void(json&)>& edit) {
  json g2 = read_gate_file((kGates / "G2.json").string()).json;
  edit(g2);
  fs::create_directories(t.path / name);
  std::ofstream(t.path / name / "G2.json") << g2.dump(1);
  return t.path / name;
}

TEST(SpeculationBundle, TheGateJsonSetsTheTargetAndSupersededOnesStillVerify) {
  TempDir t;
  const fs::path strict =
      gates_with(t, "strict", [](json& g2) { g2["speculation_targets"]["min_speedup"] = 2.0; });
  const fs::path bundle = t.path / "s1";
  const json record =
      write_speculation_bundle(bundle, request({t.write("b.json", bench())}, strict));
  EXPECT_EQ(record["gates"][0]["status"], "fail");  // 1.8x of 2x
  EXPECT_EQ((*criterion(record, kSpeedup))["threshold"], ">= 2.00x");
  EXPECT_TRUE(verify(bundle, strict).empty()) << listed(verify(bundle, strict));
  // Judged by the shipped 1.6x, the fail does not re-derive; with the 2x definition kept in
  // history/ it does (a target moved on after the bundle was written).
  EXPECT_TRUE(names(verify(bundle, kGates), "gates[0].status", "judged again"));
  const std::string sha = read_gate_file((strict / "G2.json").string()).sha256.substr(0, 12);
  const fs::path moved = gates_with(t, "moved", [](json&) {});
  fs::create_directories(moved / "history" / sha);
  fs::copy_file(strict / "G2.json", moved / "history" / sha / "G2.json");
  EXPECT_TRUE(verify(bundle, moved).empty()) << listed(verify(bundle, moved));

  const fs::path bad =
      gates_with(t, "bad", [](json& g2) { g2["speculation_targets"]["min_speed"] = 2.0; });
  try {
    load_gate(bad.string(), "G2");
    ADD_FAILURE() << "an unknown target was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("speculation_targets.min_speed: not a speculation target"),
              std::string::npos)
        << e.what();
  }
  for (const json& count : {json(0), json(1.5), json("8"), json(5000)}) {
    const fs::path p = gates_with(
        t, "bad-prompts", [&](json& g2) { g2["speculation_targets"]["min_prompts"] = count; });
    try {
      load_gate(p.string(), "G2");
      ADD_FAILURE() << "min_prompts " << count.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("speculation_targets.min_prompts: expected an integer"),
                std::string::npos)
          << e.what();
    }
  }
  const fs::path none = gates_with(t, "none", [](json& g2) { g2.erase("speculation_targets"); });
  try {
    write_speculation_bundle(t.path / "none" / "s1", request({t.write("b.json", bench())}, none));
    ADD_FAILURE() << "a G2 without speculation_targets judged a bundle";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no \"speculation_targets\""), std::string::npos)
        << e.what();
  }
}

TEST(SpeculationBundle, TheMeasureCommandWritesOneKindOfBundle) {
  TempDir t;
  const std::string file = t.write("b.json", bench()).string();
  std::ostringstream out, err;
  EXPECT_EQ(
      measure_command({"--speculation-bench", file, "--runner-bench", file, "--title", "t", "--id",
                       "s1", "--out", (t.path / "s1").string(), "--gates", kGates.string()},
                      out, err),
      2);
  EXPECT_NE(err.str().find("--speculation-bench and --runner-bench"), std::string::npos)
      << err.str();
  EXPECT_FALSE(fs::exists(t.path / "s1"));
  std::ostringstream out2, err2;
  EXPECT_EQ(
      measure_command({"--speculation-bench", file, "--title", "t", "--id", "s1", "--out",
                       (t.path / "s1").string(), "--gates", kGates.string(), "--limitation", "why"},
                      out2, err2),
      0)
      << err2.str();
  EXPECT_NE(err2.str().find("verifies"), std::string::npos) << err2.str();
  EXPECT_TRUE(verify(t.path / "s1").empty()) << listed(verify(t.path / "s1"));
  EXPECT_TRUE(has_line(read_record(t.path / "s1")["limitations"], "why"));
}

}  // namespace
}  // namespace sparkglm::gates
