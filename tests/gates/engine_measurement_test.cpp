#include "gates/engine_measurement.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "gates/qualify_commands.h"
#include "receipts/bundle_verifier.h"
#include "tests/support/build_paths.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json cell(const std::string& name, double tok_s, double ms, double fraction) {
  return {{"cell", name},
          {"tokens_per_s", tok_s},
          {"median_ms", ms},
          {"runs", 3},
          {"samples_ms", {ms, ms * 1.1, ms * 0.9}},
          {"floor_ms", ms * fraction},
          {"fraction_of_floor", fraction}};
}

// A tinyglm run that meets every target of its own: C1 at 70 % of floor, C8 = 6x C1, 8K prefill
// at 60 % of compute.
json bench() {
  return {{"schema", "sparkglm.runner_bench/1"},
          {"device", "cuda"},
          {"preset", "tinyglm"},
          {"num_layers", 4},
          {"config_sha256", std::string(64, 'c')},
          {"weights", "dummy:seed=0"},
          {"bandwidth_gbps", 4000.0},
          {"peak_tflops", 700.0},
          {"cells",
           {cell("decode_c1", 100, 10, 0.7), cell("decode_c8", 600, 13.3, 0.5),
            cell("prefill_8k", 50000, 163.84, 0.6)}},
          {"binary_sha256", std::string(64, 'a')},
          {"commit", "0123abcd"}};
}

json peer(double eager_tok_s) {
  return {{"schema", "sparkglm.torch_peer/1"},
          {"preset", "tinyglm"},
          {"device", "NVIDIA H200"},
          {"torch", "2.5.1"},
          {"cells",
           {{{"cell", "decode_c1"},
             {"mode", "eager"},
             {"tokens_per_s", eager_tok_s},
             {"median_ms", 1e3 / eager_tok_s},
             {"runs", 1},
             {"samples_ms", {1e3 / eager_tok_s}}},
            {{"cell", "decode_c1"}, {"mode", "compile"}, {"skipped", "out of memory"}},
            {{"cell", "prefill_8192"},
             {"mode", "eager"},
             {"tokens_per_s", 10000.0},
             {"median_ms", 819.2},
             {"runs", 1},
             {"samples_ms", {819.2}}}}}};
}

const fs::path kGates = fs::path(sparkglm::testing::source_dir()) / "gates";

// The shipped targets, as gates/G2.json states them.
EngineTargets targets() {
  const GateDefinition g2 = load_gate(kGates.string(), "G2");
  EXPECT_TRUE(g2.engine_targets.has_value()) << "gates/G2.json has no engine_targets";
  return g2.engine_targets.value_or(EngineTargets{});
}

bool has_line(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& l : lines)
    if (l.find(part) != std::string::npos) return true;
  return false;
}

struct TempDir {
  fs::path path =
      fs::temp_directory_path() / ("engine-measure-" + std::to_string(getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path write(const std::string& name, const json& j) const {
    std::ofstream(path / name) << j.dump(1);
    return path / name;
  }
};

TEST(EngineMeasurement, TargetsMetPassWithoutMissedLimitations) {
  std::vector<std::string> limits;
  const GateResult g = judge_engine_targets({bench()}, json(), targets(), limits);
  EXPECT_EQ(g.status, "pass") << g.summary;
  EXPECT_EQ(g.criteria.size(), 3u);
  EXPECT_FALSE(has_line(limits, "target missed"));
  EXPECT_TRUE(has_line(limits, "not judged, no --torch-peer"));  // said, not silently dropped
}

TEST(EngineMeasurement, AMissedTargetFailsTheGateAndSaysByHowMuch) {
  json b = bench();
  b["cells"][0]["fraction_of_floor"] = 0.45;
  std::vector<std::string> limits;
  const GateResult g = judge_engine_targets({b}, peer(40), targets(), limits);
  EXPECT_EQ(g.status, "fail");
  EXPECT_TRUE(has_line(limits,
                       "C1 decode, fraction of its weight-streaming floor is 0.450, "
                       "target >= 0.60, short by 25.0 %"));
  // 100 tok/s against eager 40: 2.5x of the 3x asked.
  EXPECT_TRUE(has_line(limits,
                       "over torch eager (NVIDIA H200) is 2.500x, target >= 3.00x, "
                       "short by 16.7 %"));
  EXPECT_TRUE(
      has_line(limits, "torch compile (NVIDIA H200): not judged, the peer skipped: out of memory"));
}

TEST(EngineMeasurement, ASkippedCellMissesItsTarget) {
  json b = bench();
  b["cells"][2] = {{"cell", "prefill_8k"}, {"skipped", "pool too small"}};
  std::vector<std::string> limits;
  const GateResult g = judge_engine_targets({b}, json(), targets(), limits);
  EXPECT_EQ(g.status, "fail");
  EXPECT_EQ(g.criteria[2].observed, "skipped: pool too small");
  EXPECT_TRUE(has_line(limits, "8K prefill, fraction of its compute floor (>= 0.50) was skipped"));
}

TEST(EngineMeasurement, OtherPresetsAreMeasuredNotJudged) {
  json b = bench();
  b["preset"] = "glm-5.3-flash";
  std::vector<std::string> limits;
  EXPECT_EQ(judge_engine_targets({b}, json(), targets(), limits).status, "not-run");
  EXPECT_TRUE(has_line(limits, "glm-5.3-flash (cuda): measured only"));
}

TEST(EngineMeasurement, BundleVerifiesAndCarriesInputsAndPeerRatios) {
  TempDir t;
  MeasureRequest r;
  r.runner_bench = {t.write("bench.json", bench())};
  r.torch_peer = t.write("peer.json", peer(20));
  r.title = "engine step";
  r.id = "m1";
  r.out = t.path / "m1";
  r.gates = kGates;
  const json record = write_engine_measurement(r);
  EXPECT_TRUE(receipts::verify_bundle(r.out).empty());
  EXPECT_EQ(record["state"], "measurement");
  EXPECT_EQ(record["level"], "G2");
  EXPECT_EQ(record["change"]["candidate"]["binary_sha256"], std::string(64, 'a'));
  std::vector<std::string> paths;
  for (const json& a : record["artifacts"]) paths.push_back(a["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{"runner-bench/tinyglm-cuda.json", "torch-peer.json"}));
  std::map<std::string, double> medians;  // "case metric" -> median
  for (const json& m : record["metrics"])
    medians[m["case"].get<std::string>() + " " + m["name"].get<std::string>()] =
        m["candidate"]["median"];
  EXPECT_DOUBLE_EQ(medians["decode_c1 ratio_to_torch_eager"], 5.0);   // 100 / 20
  EXPECT_DOUBLE_EQ(medians["prefill_8k ratio_to_torch_eager"], 5.0);  // prefill_8192 is the cell
  EXPECT_DOUBLE_EQ(medians["decode_c1 tokens_per_s"], 100.0);
  EXPECT_EQ(medians.count("decode_c1 ratio_to_torch_compile"), 0u);  // the peer skipped it
}

TEST(EngineMeasurement, MalformedInputNamesTheFieldAndExitsNonZero) {
  TempDir t;
  json b = bench();
  b["cells"][1].erase("median_ms");
  const fs::path file = t.write("bad.json", b);
  std::ostringstream out, err;
  const int code = measure_command({"--runner-bench", file.string(), "--title", "t", "--id", "m2",
                                    "--out", (t.path / "m2").string(), "--gates", kGates.string()},
                                   out, err);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.str().find("bad.json: field cells[1].median_ms: expected a positive number"),
            std::string::npos)
      << err.str();
  EXPECT_FALSE(fs::exists(t.path / "m2" / "qualification.json"));
  json p = peer(20);
  p["cells"][0]["mode"] = "jit";
  try {
    check_torch_peer(p, "peer.json");
    ADD_FAILURE() << "a bad mode was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cells[0].mode: expected \"eager\" or \"compile\""),
              std::string::npos)
        << e.what();
  }
}

// A runner-bench file claiming 8 GiB (sparse: no disk) or one that never ends is refused by name
// before it is read whole, and nothing is written.
TEST(EngineMeasurement, HugeOrEndlessInputIsRefusedBeforeItIsRead) {
  TempDir t;
  const fs::path huge = t.path / "huge.json";
  std::ofstream(huge) << "{}";
  fs::resize_file(huge, uintmax_t(8) << 30);
  for (const std::string& file : {huge.string(), std::string("/dev/zero")}) {
    SCOPED_TRACE(file);
    std::ostringstream out, err;
    const int code = measure_command({"--runner-bench", file, "--title", "t", "--id", "m3", "--out",
                                      (t.path / "m3").string(), "--gates", kGates.string()},
                                     out, err);
    EXPECT_EQ(code, 2);
    const std::string why = file == huge.string()
                                ? "8589934592 bytes, larger than the limit of 268435456 bytes"
                                : "not a regular file";
    EXPECT_NE(err.str().find(file + ": " + why), std::string::npos) << err.str();
    EXPECT_FALSE(fs::exists(t.path / "m3" / "qualification.json"));
  }
}

// A _schema cell (bench/runner/constrained_cell.h): 2 rows, masks of 20/30/10 us per step.
json schema_cell() {
  json c = cell("decode_c2_schema", 200, 10, 0.5);
  c["rows"] = 2;
  c["mask_samples_us"] = {20.0, 30.0, 10.0};
  c["unconstrained"] = {
      {"tokens_per_s", 250.0}, {"median_ms", 8.0}, {"runs", 3}, {"samples_ms", {8.0, 8.0, 8.0}}};
  c["grammar_bytes"] = 65536;
  return c;
}

TEST(EngineMeasurement, ASchemaCellGivesItsMaskCostAndAMalformedOneIsRefused) {
  TempDir t;
  json b = bench();
  b["cells"].push_back(schema_cell());
  MeasureRequest r;
  r.runner_bench = {t.write("bench.json", b)};
  r.title = "masks";
  r.id = "m3";
  r.out = t.path / "m3";
  r.gates = kGates;
  const json record = write_engine_measurement(r);
  EXPECT_TRUE(receipts::verify_bundle(r.out).empty());
  std::map<std::string, double> medians;
  for (const json& m : record["metrics"])
    if (m["case"] == "decode_c2_schema") medians[m["name"]] = m["candidate"]["median"];
  EXPECT_DOUBLE_EQ(medians["mask_us_per_token"], 10.0);       // median 20 us over 2 rows
  EXPECT_DOUBLE_EQ(medians["mask_fraction_of_step"], 0.002);  // 20 us of a 10 ms step
  EXPECT_DOUBLE_EQ(medians["unconstrained_tokens_per_s"], 250.0);
  EXPECT_DOUBLE_EQ(medians["grammar_bytes"], 65536.0);

  b["cells"][3]["mask_samples_us"] = {20.0, 30.0};
  try {
    check_runner_bench(b, "bench.json");
    ADD_FAILURE() << "two mask samples for three steps were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cells[3].mask_samples_us: expected an array of `runs` "
                                         "(3) numbers"),
              std::string::npos)
        << e.what();
  }
}

TEST(EngineMeasurement, CommandWritesAFailingMeasurementWithExitOne) {
  TempDir t;
  json b = bench();
  b["cells"][1]["tokens_per_s"] = 300.0;  // C8 only 3x C1
  std::ostringstream out, err;
  const int code =
      measure_command({"--runner-bench", t.write("b.json", b).string(), "--title", "t", "--id",
                       "m3", "--out", (t.path / "m3").string(), "--gates", kGates.string()},
                      out, err);
  EXPECT_EQ(code, 1) << err.str();
  EXPECT_TRUE(receipts::verify_bundle(t.path / "m3").empty());
  EXPECT_NE(out.str().find("C8 aggregate decode tok/s over C1 is 3.000x"), std::string::npos)
      << out.str();
}

// gates/G2.json edited, in a folder of its own (one per test, rewritten by each call).
fs::path gates_with(const TempDir& t, const std::function<void(json&)>& edit) {
  json g2 = read_gate_file((kGates / "G2.json").string()).json;
  edit(g2);
  fs::create_directories(t.path / "gates");
  std::ofstream(t.path / "gates" / "G2.json") << g2.dump(1);
  return t.path / "gates";
}

TEST(EngineMeasurement, TheGateJsonSetsTheTargets) {
  // The same bench passes the shipped targets (C1 at 70 % of its floor, C8 = 6x C1) and fails
  // when G2.json asks for 80 % and strictly more than 6x: no target is restated in the code.
  TempDir t;
  const fs::path gates = gates_with(t, [](json& g2) {
    g2["engine_targets"]["c1_decode_fraction_of_floor"] = {{"at_least", 0.8}};
    g2["engine_targets"]["c8_over_c1_decode"] = {{"above", 6}};
  });
  std::ostringstream out, err;
  const int code =
      measure_command({"--runner-bench", t.write("b.json", bench()).string(), "--title", "t",
                       "--id", "m4", "--out", (t.path / "m4").string(), "--gates", gates.string()},
                      out, err);
  EXPECT_EQ(code, 1) << err.str();
  const json record = parse_json_file((t.path / "m4" / "qualification.json").string(),
                                      ErrorKind::kInvalidArgument, json_limits::kReceipt);
  std::map<std::string, std::string> judged;  // criterion -> "threshold pass|fail"
  for (const json& c : record["gates"][0]["criteria"])
    judged[c["name"].get<std::string>()] =
        c["threshold"].get<std::string>() + (c["pass"].get<bool>() ? " pass" : " fail");
  EXPECT_EQ(judged["tinyglm (cuda) C1 decode, fraction of its weight-streaming floor"],
            ">= 0.80 fail");
  EXPECT_EQ(judged["tinyglm (cuda) C8 aggregate decode tok/s over C1"], "> 6.00x fail");
  EXPECT_EQ(judged["tinyglm (cuda) 8K prefill, fraction of its compute floor"], ">= 0.50 pass");

  // The preset the targets are stated for is data too.
  const fs::path other =
      gates_with(t, [](json& g2) { g2["engine_targets"]["preset"] = "tinyglm-micro"; });
  std::vector<std::string> limits;
  const GateDefinition g2 = load_gate(other.string(), "G2");
  ASSERT_TRUE(g2.engine_targets.has_value());
  EXPECT_EQ(judge_engine_targets({bench()}, json(), *g2.engine_targets, limits).status, "not-run");
  EXPECT_TRUE(has_line(limits, "stated for tinyglm-micro"));
}

TEST(EngineMeasurement, AMalformedOrMissingTargetNamesTheField) {
  TempDir t;
  const fs::path bad = gates_with(t, [](json& g2) {
    g2["engine_targets"]["c8_over_c1_decode"] = {{"at_most", 5}};
  });
  try {
    load_gate(bad.string(), "G2");
    ADD_FAILURE() << "an unknown relation was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("G2.json.engine_targets.c8_over_c1_decode: expected "
                                         "\"at_least\" or \"above\""),
              std::string::npos)
        << e.what();
  }
  const fs::path missing =
      gates_with(t, [](json& g2) { g2["engine_targets"].erase("cells_over_torch"); });
  try {
    load_gate(missing.string(), "G2");
    ADD_FAILURE() << "a missing target was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("engine_targets.cells_over_torch: missing"),
              std::string::npos)
        << e.what();
  }
  const fs::path none = gates_with(t, [](json& g2) { g2.erase("engine_targets"); });
  std::ostringstream out, err;
  EXPECT_EQ(
      measure_command({"--runner-bench", t.write("b.json", bench()).string(), "--title", "t",
                       "--id", "m5", "--out", (t.path / "m5").string(), "--gates", none.string()},
                      out, err),
      2);
  EXPECT_NE(err.str().find("G2.json: no \"engine_targets\""), std::string::npos) << err.str();
}

}  // namespace
}  // namespace sparkglm::gates
