#pragma once
// What every rank of a run must share, compared at start (rank_bootstrap.h) and again once the
// model is loaded: ranks of one run must run the same binary with the same settings on the same
// model, or their shards do not add up to the model.
#include <string>

#include <nlohmann/json.hpp>

#include "engine/dist/communicator.h"
#include "engine/options/effective_config.h"

namespace sparkglm::dist {

// {"binary_sha256", "profile_sha256", "precision_mode", "settings": the effective configuration
// without the per-rank options, the rendezvous port and the thread count}. Reads no option.
nlohmann::json settings_fingerprint(const EffectiveConfig& config);

// "" when equal; otherwise the first difference in words: "rank 1 differs from rank 0 in
// settings.max-num-seqs: 2 there, 4 on rank 0".
std::string fingerprint_difference(const nlohmann::json& rank0, const nlohmann::json& other,
                                   int other_rank);

// The model half of the run identity (model id, config sha256, weights identity) on every rank:
// Error(kInvalidArgument) naming both when any rank's differs from rank 0's.
void check_same_model(Communicator& comm, const std::string& model_identity);

// sha256 of this process's executable (/proc/self/exe).
std::string binary_sha256();

}  // namespace sparkglm::dist
