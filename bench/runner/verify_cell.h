#pragma once
// The runner bench's verify cells (issue 19: the cost of a verify step of width 2..5 against a
// decode step): verify_cC_wW, C sequences of `prompt` tokens (verify_cC_wW_at_Nk: N * 1024)
// prefilled, then `warmup_steps` untimed and `decode_steps` timed rounds of steps, alternating so
// a change of load falls on each: a decode step (one row per sequence, as decode_cC's synchronous
// steps), a verify step (each sequence's decode slice of W rows, every row's logits and hidden
// state back on the host, the KDA state recorded after each row, as the scheduler's verify step
// with --speculative-tokens W - 1), and on a runner with step graphs (ModelRunner::set_eager) the
// same verify step once more with graphs off (as --enforce-eager runs it). All through forward(),
// synchronous; the graphs are captured in the warm-up steps.
//
// Reported: median_ms, runs, samples_ms of the verify steps (graphed where the runner has graphs);
// decode (its median_ms, samples_ms); verify_over_decode (median verify / median decode);
// tokens_per_s (C * W rows per verify step); with graphs also eager (the eager verify steps'
// median_ms, samples_ms), graphed_over_eager and graphs (ModelRunner::graph_stats after the cell).
// The runner needs W state records per slot and decode slices of W rows (runner_bench sets them).
#include <nlohmann/json.hpp>

#include "bench/runner/engine_cells.h"
#include "engine/model/model_runner.h"
#include "engine/runtime/block_allocator.h"

namespace sparkglm::bench {

nlohmann::json run_verify(ModelRunner& runner, BlockAllocator& blocks, const CellSpec& cell,
                          const CellSettings& s);

}  // namespace sparkglm::bench
