#pragma once
// The quality bundle: what `sparkglm-qualify quality --out DIR` writes
// (docs/qualification-bundle.md, "Quality bundles"), and how the verifier judges one again. It
// binds the trained weights, the held-out set, the training sources and the scores by checksum:
//
//   heldout-scores.json   (metrics)   the raw record: per task the examples, exact replies, reply
//                                     tokens scored, nll and accuracy; the engine settings
//   inputs/config.json    (config)    the checkpoint's config.json
//   inputs/training.json  (config)    its training record: the shard's and each source's sha256
//   inputs/heldout.json   (workload)  the held-out set that was scored
// and, when G2's targets have probes (gates/quality_probes.h):
//   inputs/<workload>.json (workload) the probes workload as run
//   requests.jsonl        (requests)  every probe request's record (harness/request_record.h)
//   server/probes.log     (log)       the server's output
//
// qualification.json holds one G2 gate (judge_quality), the metrics heldout_nll and
// heldout_token_accuracy per task and for the mean, and
//   "quality": {"checkpoint": DIR, "heldout": FILE,                    as given to the command
//               "engine": {"device", "kv_cache_dtype", "precision_mode", "chunk"},
//                          (bundles before 2026-12-05 have no precision_mode: strict)
//               "weights": {"identity", "shard", "shard_sha256"},
//               "files": {"config.json", "training.json", "heldout.json": sha256},
//               "sources_sha256": {"tinyglm/train/train.py": sha256, ...}, as training.json says
//               "targets": G2's quality_targets as judged by,
//               "probes": {"workload", "workload_sha256", "server": argv (binary by file
//                          name), "server_sha256",
//                          "grades": probe_grades_json}}   when probes ran
// The writer refuses a checkpoint whose shard or training sources no longer hash to what its
// training.json records. The shard itself (7 MB) is not carried: training.json binds its sha256.
//
// The verifier believes none of it: the recorded checksums must be those of the carried files,
// the shard's and the sources' those training.json (carried) records, the weights identity that of
// training.json, change.candidate's weights the identity the engine states for that shard
// ("sha256:<shard>=<sha256>", Checkpoint::identity); the scores' example and token counts those of
// the carried held-out set; the means and every metric those derived from heldout-scores.json; and
// the gate the one judge_quality yields from the scores (and the probes' grades, graded again from
// requests.jsonl and the carried workload) under G2's quality_targets (the current definition,
// then each superseded one of gates/history/), whose targets the record must name.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/gate_definition.h"
#include "gates/quality_probes.h"
#include "gates/quality_targets.h"
#include "harness/heldout_loss.h"
#include "receipts/problem.h"

namespace sparkglm::gates {

// What a trained checkpoint's training.json binds.
struct TrainedCheckpoint {
  std::string shard;  // the safetensors file's name in the checkpoint folder
  std::string shard_sha256;
  std::string weights_identity;                       // "trained:seed=S,steps=N,data=..."
  std::map<std::string, std::string> sources_sha256;  // repository path -> sha256
};

// Reads DIR/training.json and checks that DIR's one safetensors shard and each training source
// (a path relative to `root`, the repository root) still hash to what it records. Throws Error
// naming the file that is missing or differs.
TrainedCheckpoint check_trained_checkpoint(const std::filesystem::path& dir,
                                           const std::filesystem::path& root);

// One `quality` run, as measured.
struct QualityRun {
  std::string checkpoint;  // the folder scored, as given (relative to the repository root)
  std::string heldout;     // the held-out file, as given
  std::string device, kv_cache_dtype;
  std::string precision_mode = "strict";  // MODEL.md section 7: strict | spark
  int chunk = 0;
  std::string model_id;             // the runner's model id
  std::string model_config_sha256;  // of ModelConfig::to_json().dump(), as sparkglm-serve states
  std::string weights_identity;     // as the engine loaded them: "sha256:<shard>=<sha256>"
  std::string generator;            // the held-out set's data generator
  std::vector<std::string> args;    // the command's arguments
  harness::HeldoutLoss scores;
  QualityTargets targets;
  const ProbeRun* probes = nullptr;  // the targets' probes as run (required when they have probes)
};

// The record's metrics for `scores`: heldout_nll and heldout_token_accuracy of each task and the
// mean, single-arm.
nlohmann::json quality_metrics(const harness::HeldoutLoss& scores);

// Writes the bundle folder `out` (its name is the id): checks the checkpoint first
// (check_trained_checkpoint under `root`) and that the loaded weights are the ones training.json
// names, then the files, then qualification.json through receipts::BundleWriter. Returns the
// record. Throws Error on any refusal; nothing is written then.
nlohmann::json write_quality_bundle(const std::filesystem::path& out, const QualityRun& run,
                                    const std::filesystem::path& root);

// A record that `quality --out` wrote: it has a "quality" object.
bool is_quality_record(const nlohmann::json& record);

// Everything in a quality bundle that does not re-derive (see the top of this file); `g2` are
// G2's definitions, the current one first.
receipts::Problems rederive_quality(const std::filesystem::path& bundle,
                                    const nlohmann::json& record,
                                    const std::vector<GateDefinition>& g2);

}  // namespace sparkglm::gates
