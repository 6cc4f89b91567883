#pragma once
// The runner bench's `_schema` decode cells (issue 20's mask cost): C sequences decode greedily
// under CellSettings::grammar. Each step's masks are filled on the host by the sequences'
// GrammarMatchers through StepSampling::fill_masks and applied by the runner before its greedy
// pick, as the scheduler serves a constrained request (such steps are not pipelined: a row's next
// mask needs its token). A row whose document ends starts the next one. C more sequences of the
// same prompts decode without masks, their steps alternating with the masked ones, so the ratio
// comes from one run and a change of load falls on both (the cell needs 2C state slots).
//
// Reported beside the usual decode fields (tokens_per_s, median_ms, runs, samples_ms of the
// constrained steps): mask_samples_us (time inside fill_masks per step, all rows),
// mask_us_per_token, mask_fraction_of_step (median of mask / step per step), unconstrained
// (its own tokens_per_s, median_ms, runs, samples_ms), documents_completed, grammar_bytes (the
// compiled grammar and its mask cache), vocabulary_bytes (its trie and shared masks, shared by
// every request), peak_rss_bytes and schema_sha256. A token the runner picks outside its row's
// mask fails the cell.
#include <nlohmann/json.hpp>

#include "bench/runner/engine_cells.h"
#include "engine/model/model_runner.h"
#include "engine/runtime/block_allocator.h"

namespace sparkglm::bench {

nlohmann::json run_constrained_decode(ModelRunner& runner, BlockAllocator& blocks,
                                      const CellSpec& cell, const CellSettings& s);

}  // namespace sparkglm::bench
