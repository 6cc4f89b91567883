#pragma once
// The runner bench's verify cells (issue 19: the cost of a verify step of width 2..5 against a
// decode step): verify_cC_wW, C sequences of `prompt` tokens (verify_cC_wW_at_Nk: N * 1024)
// prefilled, then `warmup_steps` untimed and `decode_steps` timed pairs of steps, alternating so a
// change of load falls on both: a decode step (one row per sequence, as decode_cC's synchronous
// steps) and a verify step (each sequence's decode slice of W rows, every row's logits and hidden
// state back on the host, the KDA state recorded after each row, as the scheduler's verify step
// with --speculative-tokens W - 1). Both through forward(), synchronous.
//
// Reported: median_ms, runs, samples_ms of the verify steps; decode (its median_ms, samples_ms);
// verify_over_decode (median verify / median decode); tokens_per_s (C * W rows per verify step).
// The runner needs W state records per slot and decode slices of W rows (runner_bench sets them).
#include <nlohmann/json.hpp>

#include "bench/runner/engine_cells.h"
#include "engine/model/model_runner.h"
#include "engine/runtime/block_allocator.h"

namespace sparkglm::bench {

nlohmann::json run_verify(ModelRunner& runner, BlockAllocator& blocks, const CellSpec& cell,
                          const CellSettings& s);

}  // namespace sparkglm::bench
