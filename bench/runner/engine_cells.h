#pragma once
// The runner bench's cells, driven straight through ModelRunner (no scheduler, no HTTP):
//   decode_cC    C sequences of `prompt` tokens (decode_cC_at_Nk: N * 1024) prefilled, then
//                `warmup_steps` untimed and `decode_steps` timed steps of C rows twice:
//                pipelined (the reported numbers: submit step N+1, then collect step N, rows
//                reading the runner's greedy picks, as the scheduler serves greedy requests; a
//                sample is the interval between two collections) and synchronous (under
//                "synchronous": one forward per sample, its logits to the host, the greedy token
//                taken there outside the timed call); with CellSettings::temperature also seeded
//                sampling, host-drawn and runner-drawn.
//   decode_cC_schema (and decode_cC_at_Nk_schema) the same C sequences decoding under
//                CellSettings::grammar (constrained_cell.h): each step's token masks filled on
//                the host and applied by the runner, the time inside the masks reported beside
//                the step's, and C unconstrained sequences' steps alternating with them.
//   verify_cC_wW (and verify_cC_wW_at_Nk) C sequences' verify steps of W rows each against their
//                decode steps (verify_cell.h).
//   prefill_L    (prefill_Nk: N * 1024 tokens) one fresh sequence of L tokens, cold (new slot,
//                new blocks), in chunks of max_prefill_tokens, timed end to end; `runs` times.
// forward returns host logits, so it is synchronous and a steady-clock interval covers the work.
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/model/model_runner.h"
#include "engine/runtime/block_allocator.h"
#include "engine/text/grammar/compiled_grammar.h"

namespace sparkglm::bench {

struct CellSpec {
  std::string name;
  bool decode = false;
  int rows = 1;              // decode: sequences per step
  int64_t tokens = 0;        // prefill: prompt length
  int64_t context = 0;       // decode: prompt length, when the name gives one (else --prompt)
  bool constrained = false;  // decode: "_schema", under CellSettings::grammar
  int width = 0;             // verify_cC_wW: rows of each sequence's verify slice (2..9); 0 else
};

// "decode_c4", "decode_c1_at_128k", "decode_c8_schema", "verify_c1_w3", "prefill_8k",
// "prefill_256";
// Error(kInvalidArgument) naming the cell otherwise.
CellSpec parse_cell(const std::string& name);

struct CellSettings {
  int prompt = 128;  // decode cells' prompt
  int decode_steps = 64;
  int warmup_steps = 4;
  int runs = 3;  // prefill runs
  int max_prefill_tokens = 8192;
  double max_seconds = 600;  // a cell that would take longer is skipped or cut short (recorded)
  // > 0: decode cells also time seeded sampling at this temperature (top-p 0.95), under
  // "sampled": drawn on the host from each step's logits, as the scheduler did before the runner
  // drew tokens itself, and drawn by the runner in pipelined steps (ModelRunner::draws_sampled()).
  float temperature = 0.0f;
  // The `_schema` cells' grammar (--schema FILE compiled against the model's vocabulary) and the
  // schema file's sha256; null when no --schema was given.
  std::shared_ptr<const CompiledGrammar> grammar;
  std::string schema_sha256;
};

// The prompt a decode cell's sequences are prefilled with.
int64_t decode_context(const CellSpec& cell, const CellSettings& s);

// Sequences (state slots) a cell runs at once: a _schema cell's C masked and C unmasked.
int sequences(const CellSpec& cell);

// Latent-cache blocks a cell needs at once.
int64_t blocks_needed(const CellSpec& cell, const CellSettings& s, int block_size);

// {"samples_ms", "runs", "median_ms", "tokens_per_s", ...} or {"skipped": reason}.
nlohmann::json run_cell(ModelRunner& runner, BlockAllocator& blocks, const CellSpec& cell,
                        const CellSettings& s);

}  // namespace sparkglm::bench
