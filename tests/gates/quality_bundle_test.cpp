// A quality bundle binds the trained weights, the held-out set, the training sources and the
// scores by checksum, and the verifier believes none of its words: a score, the verdict, a bound
// checksum or the targets edited after writing each fail verification with the reason. The
// writer refuses weights or training sources that no longer hash to what training.json records.
// The checkpoint here is a small stand-in (a shard of arbitrary bytes, two tasks): the bundle
// logic reads checksums and scores, not tensors; the committed bundle of the real weights is
// verified by G0 with the other committed results.
#include "gates/quality_bundle.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "gates/gate_definition.h"
#include "gates/quality_gate.h"
#include "gates/verdict_rederivation.h"
#include "harness/heldout_loss.h"
#include "harness/request_record.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_verifier.h"
#include "receipts/problem.h"
#include "receipts/qualification_record.h"
#include "receipts/trusted_keys.h"
#include "tests/support/build_paths.h"
#include "workloads/request_plan.h"
#include "workloads/workload_spec.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kGates = fs::path(sparkglm::testing::source_dir()) / "gates";

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() /
             ("quality-bundle-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + tag)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string sha_of(const fs::path& path) {
  return receipts::digest_file(path).sha256;
}

// A repository in miniature: one training source, a checkpoint whose training.json binds it and
// the shard, a held-out set of two tasks, and G2.json with quality_targets for those tasks.
struct Checkout {
  TempDir dir;
  fs::path root = dir.path / "repo";
  fs::path checkpoint = root / "ckpt";
  fs::path gates = root / "gates";
  fs::path keys = root / "keys";

  explicit Checkout(const std::string& tag = "") : dir(tag) {
    write(root / "train/train.py", "print('training')\n");
    write(checkpoint / "config.json", "{\"hidden_size\": 8}\n");
    write(checkpoint / "model-00001-of-00001.safetensors", std::string(64, '\x07'));
    write(checkpoint / "heldout.json",
          json{{"schema", "sparkglm.heldout/1"},
               {"generator", "curriculum/1"},
               {"examples",
                {{{"task", "arith"}, {"reply_from", 2}, {"tokens", {1, 2, 3, 4}}},
                 {{"task", "copy"}, {"reply_from", 1}, {"tokens", {5, 6, 7}}}}}}
              .dump());
    write(checkpoint / "training.json",
          json{{"schema", "sparkglm.tinyglm_training/1"},
               {"weights_identity", "trained:seed=1,steps=2,data=curriculum/1"},
               {"shard_sha256", sha_of(checkpoint / "model-00001-of-00001.safetensors")},
               {"sources_sha256", {{"train/train.py", sha_of(root / "train/train.py")}}}}
              .dump(1));
    json g2 = read_gate_file((kGates / "G2.json").string()).json;
    g2["quality_targets"] = {{"checkpoint", "ckpt"},
                             {"heldout", "ckpt/heldout.json"},
                             {"chunk", 4},
                             {"max_nll_ratio", 1.02},
                             {"max_task_nll_ratio", 1.05},
                             {"max_accuracy_drop", 0.01},
                             {"reference",
                              {{"nll", 0.75},
                               {"accuracy", 0.75},
                               {"tasks", {{"arith", {{"nll", 1.0}}}, {"copy", {{"nll", 0.5}}}}}}}};
    write(gates / "G2.json", g2.dump(1));
    fs::create_directories(keys);
  }

  // The run as `quality` fills it, with the scores given (2 reply tokens per task).
  QualityRun run(double arith_nll = 1.0) const {
    QualityRun r;
    r.checkpoint = checkpoint.string();
    r.heldout = (checkpoint / "heldout.json").string();
    r.device = "cpu";
    r.kv_cache_dtype = "bf16";
    r.chunk = 4;
    r.model_id = "tinyglm-micro";
    r.model_config_sha256 = std::string(64, 'c');
    r.weights_identity = "sha256:model-00001-of-00001.safetensors=" +
                         sha_of(checkpoint / "model-00001-of-00001.safetensors");
    r.generator = "curriculum/1";
    r.args = {"--out", "b"};
    r.scores = harness::HeldoutLoss::of_tasks(
        {{"copy", 1, 1, 2, 0.5, 1.0}, {"arith", 1, 0, 2, arith_nll, 0.5}});
    r.targets = *load_gate(gates.string(), "G2").quality_targets;
    return r;
  }

  receipts::Problems verify(const fs::path& bundle) const {
    return receipts::verify_bundle(bundle, full_verification(keys, gates));
  }
};

std::string listed(const receipts::Problems& problems) {
  std::string text;
  for (const receipts::Problem& p : problems) text += "  " + p.to_string() + "\n";
  return text;
}

// Whether a problem's text holds both parts (where it is, what it says).
bool names(const receipts::Problems& problems, const std::string& where, const std::string& what) {
  for (const receipts::Problem& p : problems)
    if (p.to_string().find(where) != std::string::npos &&
        p.to_string().find(what) != std::string::npos)
      return true;
  return false;
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

// Rewrites an artifact after `edit` and its hash and size in the record, as a forger would.
void edit_artifact(const fs::path& bundle, const std::string& path,
                   const std::function<void(json&)>& edit) {
  json j = json::parse(receipts::read_file(bundle / path));
  edit(j);
  write(bundle / path, j.dump(2) + "\n");
  const receipts::FileDigest d = receipts::digest_file(bundle / path);
  edit_record(bundle, [&](json& r) {
    for (json& a : r["artifacts"])
      if (a["path"] == path) {
        a["sha256"] = d.sha256;
        a["bytes"] = d.bytes;
      }
  });
}

TEST(QualityBundle, AWrittenBundleBindsTheFilesAndVerifies) {
  Checkout c;
  const fs::path bundle = c.dir.path / "q-pass";
  const json record = write_quality_bundle(bundle, c.run(), c.root);
  EXPECT_TRUE(c.verify(bundle).empty()) << listed(c.verify(bundle));
  EXPECT_EQ(record["gates"][0]["status"], "pass");
  const json& q = record["quality"];
  EXPECT_EQ(q["weights"]["shard_sha256"],
            sha_of(c.checkpoint / "model-00001-of-00001.safetensors"));
  EXPECT_EQ(q["files"]["config.json"], sha_of(c.checkpoint / "config.json"));
  EXPECT_EQ(q["files"]["heldout.json"], sha_of(c.checkpoint / "heldout.json"));
  EXPECT_EQ(q["files"]["training.json"], sha_of(c.checkpoint / "training.json"));
  EXPECT_EQ(q["sources_sha256"]["train/train.py"], sha_of(c.root / "train/train.py"));
  EXPECT_EQ(q["engine"], (json{{"device", "cpu"},
                               {"kv_cache_dtype", "bf16"},
                               {"precision_mode", "strict"},
                               {"chunk", 4}}));
  EXPECT_EQ(q["targets"]["max_nll_ratio"], 1.02);
  // Per task and the mean: nll and accuracy.
  ASSERT_EQ(record["metrics"].size(), 6u);
  EXPECT_EQ(record["metrics"][4]["case"], "mean");
  EXPECT_DOUBLE_EQ(record["metrics"][4]["candidate"]["median"].get<double>(), 0.75);
}

TEST(QualityBundle, AFailingScoreIsWrittenAsAFailAndVerifies) {
  Checkout c;
  const fs::path bundle = c.dir.path / "q-fail";
  const json record = write_quality_bundle(bundle, c.run(/*arith_nll=*/1.2), c.root);
  EXPECT_EQ(record["gates"][0]["status"], "fail");
  EXPECT_TRUE(c.verify(bundle).empty()) << listed(c.verify(bundle));
}

TEST(QualityBundle, TamperingWithAScoreFailsVerification) {
  Checkout c;
  const fs::path bundle = c.dir.path / "q";
  write_quality_bundle(bundle, c.run(), c.root);
  // The record's metric alone: it is not what heldout-scores.json gives.
  const fs::path a = c.dir.path / "a" / "q";
  fs::create_directories(a.parent_path());
  fs::copy(bundle, a, fs::copy_options::recursive);
  edit_record(a, [](json& r) { r["metrics"][0]["candidate"]["median"] = 0.9; });
  EXPECT_TRUE(names(c.verify(a), "metrics[0]", "heldout-scores.json gives")) << listed(c.verify(a));
  // The raw scores, unhashed: the artifact changed.
  const fs::path b = c.dir.path / "b" / "q";
  fs::create_directories(b.parent_path());
  fs::copy(bundle, b, fs::copy_options::recursive);
  write(b / "heldout-scores.json",
        receipts::read_file(b / "heldout-scores.json").replace(0, 1, " "));
  EXPECT_TRUE(names(c.verify(b), "heldout-scores.json", "changed")) << listed(c.verify(b));
  // The raw scores re-hashed: the gate's observed numbers and the metrics no longer follow.
  const fs::path f = c.dir.path / "f" / "q";
  fs::create_directories(f.parent_path());
  fs::copy(bundle, f, fs::copy_options::recursive);
  edit_artifact(f, "heldout-scores.json", [](json& s) { s["tasks"]["arith"]["nll"] = 0.8; });
  const receipts::Problems p = c.verify(f);
  EXPECT_TRUE(names(p, "gates[0].criteria", "judged again")) << listed(p);
  EXPECT_TRUE(names(p, "heldout-scores.json: nll", "the mean over its tasks")) << listed(p);
}

TEST(QualityBundle, TamperingWithTheVerdictFailsVerification) {
  Checkout c;
  const fs::path bundle = c.dir.path / "q";
  write_quality_bundle(bundle, c.run(/*arith_nll=*/1.2), c.root);  // a fail
  // Made a pass, criteria and all: judged again from the scores it is a fail.
  edit_record(bundle, [](json& r) {
    r["gates"][0]["status"] = "pass";
    for (json& k : r["gates"][0]["criteria"]) k["pass"] = true;
  });
  const receipts::Problems p = c.verify(bundle);
  EXPECT_TRUE(names(p, "gates[0].status", "it is fail")) << listed(p);
  EXPECT_TRUE(names(p, "gates[0].criteria[2]", "judged again")) << listed(p);
}

TEST(QualityBundle, TamperingWithABoundChecksumFailsVerification) {
  Checkout c;
  const fs::path bundle = c.dir.path / "q";
  write_quality_bundle(bundle, c.run(), c.root);
  const std::vector<std::pair<std::string, std::function<void(json&)>>> edits = {
      {"quality.weights.shard_sha256",
       [](json& r) { r["quality"]["weights"]["shard_sha256"] = std::string(64, 'a'); }},
      {"quality.files.heldout.json",
       [](json& r) { r["quality"]["files"]["heldout.json"] = std::string(64, 'a'); }},
      {"quality.files.config.json",
       [](json& r) { r["quality"]["files"]["config.json"] = std::string(64, 'a'); }},
      {"quality.sources_sha256",
       [](json& r) { r["quality"]["sources_sha256"]["train/train.py"] = std::string(64, 'a'); }},
      {"change.candidate.model.weights",
       [](json& r) { r["change"]["candidate"]["model"]["weights"] = "dummy-seed:0"; }},
      {"quality.targets", [](json& r) { r["quality"]["targets"]["max_nll_ratio"] = 2.0; }},
      {"quality.engine", [](json& r) { r["quality"]["engine"]["kv_cache_dtype"] = "fp8_g128"; }},
  };
  for (const auto& [where, edit] : edits) {
    const fs::path copy = c.dir.path / ("edit-" + where) / "q";
    fs::create_directories(copy.parent_path());
    fs::copy(bundle, copy, fs::copy_options::recursive);
    edit_record(copy, edit);
    EXPECT_TRUE(names(c.verify(copy), where, "")) << where << ":\n" << listed(c.verify(copy));
  }
  // A carried file re-hashed in the artifacts: the record's binding no longer matches it.
  edit_artifact(bundle, "inputs/training.json",
                [](json& t) { t["shard_sha256"] = std::string(64, 'e'); });
  const receipts::Problems p = c.verify(bundle);
  EXPECT_TRUE(names(p, "quality.files.training.json", "hashes to")) << listed(p);
  EXPECT_TRUE(names(p, "quality.weights.shard_sha256", "binds the shard eeee")) << listed(p);
}

TEST(QualityBundle, TheScoresMustCountTheHeldOutSet) {
  Checkout c;
  const fs::path bundle = c.dir.path / "q";
  write_quality_bundle(bundle, c.run(), c.root);
  edit_artifact(bundle, "heldout-scores.json", [](json& s) { s["tasks"]["copy"]["tokens"] = 3; });
  EXPECT_TRUE(names(c.verify(bundle), "heldout-scores.json", "task copy: 1 examples, 3 reply"))
      << listed(c.verify(bundle));
}

// The probes: a workload of two tool-call requests, a target on their pass rate, and records as
// a server would have sent them. The verifier grades requests.jsonl again from the carried
// workload, so a record edited to pass, or grades edited in the record, do not verify.
struct ProbedCheckout : Checkout {
  fs::path workload = root / "workloads/probe-t.json";
  ProbeRun probes;

  ProbedCheckout() {
    write(workload, json{{"schema", "sparkglm.workload/1"},
                         {"id", "probe-t"},
                         {"title", "t"},
                         {"cases",
                          {{{"id", "calls"},
                            {"title", "calls"},
                            {"endpoint", "chat"},
                            {"prompt", {{"builder", "tool_call"}, {"seed", 3}, {"tokens", 2048}}},
                            {"max_tokens", 64},
                            {"ignore_eos", false},
                            {"arrival", {{"type", "closed"}, {"concurrency", 1}}},
                            {"requests", 2},
                            {"repetitions", 1},
                            {"salt", "p-calls"},
                            {"graders", {"tool_call"}}}}}}
                        .dump());
    json g2 = read_gate_file((gates / "G2.json").string()).json;
    g2["quality_targets"]["probes"] = {{"workload", "probe-t"},
                                       {"min_pass_rate", {{"calls", {{"tool_call", 1}}}}}};
    write(gates / "G2.json", g2.dump(1));
    probes.spec = workloads::load_workload(workload.string());
    const workloads::WorkloadPlan plan = workloads::plan_workload(probes.spec, {});
    for (const workloads::RepetitionPlan& rep : plan.cases[0].repetitions)
      for (size_t i = 0; i < rep.requests.size(); ++i) {
        harness::RequestRecord r;
        r.arm = "candidate";
        r.workload = "probe-t";
        r.case_id = "calls";
        r.index = rep.requests[i].index;
        r.marker = rep.requests[i].marker;
        r.ok = true;
        r.http_status = 200;
        r.finish_reason = "tool_calls";
        const json want = json::parse(rep.expected[i]);
        r.tool_calls = {{want["name"], want["arguments"].dump()}};
        r.start_s = 0.1 * double(i);
        r.end_s = r.start_s + 0.05;
        probes.records.push_back(r);
      }
    probes.grades = grade_probes(probes.spec, probes.records);
    probes.server_argv = {
        "sparkglm-serve", "--model",          "ckpt",  "--device", "cpu", "--kv-cache-dtype",
        "bf16",           "--precision-mode", "strict"};
    probes.server_log = "listening\n";
  }

  QualityRun probed_run() const {
    QualityRun r = run();
    r.probes = &probes;
    return r;
  }
};

TEST(QualityBundle, ProbesAreGradedAgainFromTheirRecords) {
  ProbedCheckout c;
  const fs::path bundle = c.dir.path / "q";
  const json record = write_quality_bundle(bundle, c.probed_run(), c.root);
  EXPECT_EQ(record["gates"][0]["status"], "pass") << record["gates"][0].dump(1);
  EXPECT_TRUE(c.verify(bundle).empty()) << listed(c.verify(bundle));
  const json& grades = record["quality"]["probes"]["grades"];
  ASSERT_EQ(grades.size(), 1u);
  EXPECT_EQ(grades[0]["pass_rate"], 1.0);
  EXPECT_EQ(grades[0]["min_pass_rate"], 1.0);
  EXPECT_TRUE(fs::exists(bundle / "inputs/probe-t.json"));

  // A reply edited into another call, re-hashed: graded again, the gate is a fail.
  const fs::path a = c.dir.path / "a" / "q";
  fs::create_directories(a.parent_path());
  fs::copy(bundle, a, fs::copy_options::recursive);
  std::string jsonl = receipts::read_file(a / "requests.jsonl");
  const size_t at = jsonl.find("\"name\":\"");
  ASSERT_NE(at, std::string::npos);
  jsonl.insert(at + 8, "x");
  write(a / "requests.jsonl", jsonl);
  const receipts::FileDigest d = receipts::digest_file(a / "requests.jsonl");
  edit_record(a, [&](json& r) {
    for (json& art : r["artifacts"])
      if (art["path"] == "requests.jsonl") art["sha256"] = d.sha256, art["bytes"] = d.bytes;
  });
  receipts::Problems p = c.verify(a);
  EXPECT_TRUE(names(p, "gates[0].status", "it is fail")) << listed(p);
  EXPECT_TRUE(names(p, "quality.probes.grades", "are not the grades of requests.jsonl"))
      << listed(p);

  // The recorded grades edited: they are not the records'.
  const fs::path b = c.dir.path / "b" / "q";
  fs::create_directories(b.parent_path());
  fs::copy(bundle, b, fs::copy_options::recursive);
  edit_record(b, [](json& r) { r["quality"]["probes"]["grades"][0]["failed"] = 1; });
  EXPECT_TRUE(names(c.verify(b), "quality.probes.grades", "")) << listed(c.verify(b));

  // The probes dropped from the record while G2's targets have them: not graded, not a pass.
  const fs::path e = c.dir.path / "e" / "q";
  fs::create_directories(e.parent_path());
  fs::copy(bundle, e, fs::copy_options::recursive);
  edit_record(e, [](json& r) { r["quality"]["probes"] = nullptr; });
  EXPECT_TRUE(names(c.verify(e), "gates[0]", "")) << listed(c.verify(e));

  // The probes' server said to run another precision mode (or KV dtype) than the held-out loss.
  for (const auto& [flag, value] :
       {std::pair{"--precision-mode", "spark"}, std::pair{"--kv-cache-dtype", "fp8_g128"}}) {
    const fs::path m = c.dir.path / (std::string("m") + flag) / "q";
    fs::create_directories(m.parent_path());
    fs::copy(bundle, m, fs::copy_options::recursive);
    edit_record(m, [&, flag = flag, value = value](json& r) {
      json& argv = r["quality"]["probes"]["server"];
      for (size_t i = 0; i + 1 < argv.size(); ++i)
        if (argv[i] == flag) argv[i + 1] = value;
    });
    EXPECT_TRUE(names(c.verify(m), "quality.probes.server",
                      std::string("ran ") + flag + " \"" + value + "\""))
        << listed(c.verify(m));
  }

  // The writer refuses a run without the probes the targets name.
  EXPECT_THROW(write_quality_bundle(c.dir.path / "q-none", c.run(), c.root), Error);
}

TEST(QualityBundle, TheWriterRefusesChangedWeightsOrSources) {
  Checkout c;
  write(c.root / "train/train.py", "print('edited after training')\n");
  try {
    write_quality_bundle(c.dir.path / "q1", c.run(), c.root);
    FAIL() << "a changed training source was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("train/train.py: sha256"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("changed since the weights were trained"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(c.dir.path / "q1"));

  Checkout d("-shard");
  write(d.checkpoint / "model-00001-of-00001.safetensors", std::string(64, '\x08'));
  try {
    write_quality_bundle(d.dir.path / "q2", d.run(), d.root);
    FAIL() << "a changed shard was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("model-00001-of-00001.safetensors: sha256"), std::string::npos)
        << e.message();
  }

  Checkout m("-missing");
  fs::remove(m.root / "train/train.py");
  EXPECT_THROW(check_trained_checkpoint(m.checkpoint, m.root), Error);

  Checkout u("-identity");  // weights that training.json does not name (the dummy ones, say)
  QualityRun run = u.run();
  run.weights_identity = "dummy-seed:0";
  try {
    write_quality_bundle(u.dir.path / "q3", run, u.root);
    FAIL() << "weights training.json does not name were accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("the loaded weights are \"dummy-seed:0\""), std::string::npos)
        << e.message();
  }
}

// The command, end to end on the committed weights (about 30 s on 2 cores, probes included):
// `quality --out DIR` writes a bundle that verifies in full, and refuses a folder name that is no
// bundle id. It runs from the repository root, as the command's defaults (gates/, the checkpoint)
// and training.json's source paths are relative to it.
TEST(QualityBundle, TheCommandWritesABundleThatVerifies) {
  TempDir t("");
  const fs::path before = fs::current_path();
  fs::current_path(sparkglm::testing::source_dir());
  std::ostringstream out, err, out2, err2;
  const std::string serve = sparkglm::testing::binary_dir() + "/sparkglm-serve";
  const int code =
      quality_command({"--out", (t.path / "q-cmd").string(), "--server-bin", serve}, out, err);
  const int bad = quality_command({"--out", (t.path / "Not-An-Id").string()}, out2, err2);
  std::ostringstream out3, err3;
  const int bad_mode = quality_command({"--precision-mode", "fast"}, out3, err3);
  const receipts::Problems problems = receipts::verify_bundle(
      t.path / "q-cmd", full_verification(receipts::kTrustedKeysFolder, "gates"));
  fs::current_path(before);
  EXPECT_EQ(code, 0) << out.str() << err.str();
  EXPECT_NE(out.str().find("verifies"), std::string::npos) << out.str();
  EXPECT_TRUE(problems.empty()) << listed(problems);
  const json record = read_record(t.path / "q-cmd");
  EXPECT_EQ(record["quality"]["weights"]["shard_sha256"],
            "418354803745d598a9e71119a94c1d5ed31c2e1f58bf889bf68b7823ac2fc4d3");
  EXPECT_EQ(record["quality"]["engine"]["precision_mode"], "strict");
  EXPECT_EQ(record["quality"]["sources_sha256"]["tinyglm/train/curriculum.py"],
            "ead1ef6064415c344039d43c9bf42e74af2677ff06c9d56caba79690522308ad");
  // The probes ran through the server, and every judged one passed.
  for (const json& g : record["quality"]["probes"]["grades"]) {
    if (g["min_pass_rate"].is_null()) continue;  // recorded, not judged
    EXPECT_GE(g["pass_rate"].get<double>(), g["min_pass_rate"].get<double>()) << g.dump();
  }
  EXPECT_TRUE(fs::exists(t.path / "q-cmd" / "requests.jsonl"));
  EXPECT_EQ(bad, 2);
  EXPECT_NE(err2.str().find("\"Not-An-Id\" is the bundle's id"), std::string::npos) << err2.str();
  EXPECT_FALSE(fs::exists(t.path / "Not-An-Id"));
  EXPECT_EQ(bad_mode, 2);
  EXPECT_NE(err3.str().find("fast"), std::string::npos) << err3.str();
}

TEST(QualityBundle, TheCommittedWeightsStillMatchTheirTrainingRecord) {
  // The repository's own checkpoints, as `quality --out` checks one before it writes a bundle:
  // its shard and training sources are the ones its training.json binds. A training source edited
  // after the run fails here; commit it with the weights it trains (and their bundle).
  const std::string root = sparkglm::testing::source_dir();
  auto check = [&](const char* name) {
    return check_trained_checkpoint(fs::path(root) / "tinyglm/weights" / name, root);
  };
  const TrainedCheckpoint c = check("tinyglm-micro-trained");
  EXPECT_EQ(c.shard, "model-00001-of-00001.safetensors");
  EXPECT_GE(c.sources_sha256.size(), 6u);
  // Its MTP module fine-tuned for chained drafts (docs/speculative-decoding.md): the same check,
  // over the fine-tune's own sources (finetune_mtp_chain.py, mtp_chain.py and those it imports).
  const TrainedCheckpoint chain = check("tinyglm-micro-trained-mtp-chain");
  EXPECT_TRUE(chain.sources_sha256.count("tinyglm/train/mtp_chain.py"));
  EXPECT_NE(chain.shard_sha256, c.shard_sha256);
  // The module trained on the engine's own greedy replies (finetune_mtp_onpolicy.py, on a GPU):
  // G2's speculation checkpoint.
  const TrainedCheckpoint onpolicy = check("tinyglm-micro-trained-mtp-onpolicy-1200");
  EXPECT_TRUE(onpolicy.sources_sha256.count("tinyglm/train/finetune_mtp_onpolicy.py"));
  EXPECT_NE(onpolicy.shard_sha256, chain.shard_sha256);
}

}  // namespace
}  // namespace sparkglm::gates
