#include "bench/runner/constrained_cell.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/peak_rss.h"
#include "bench/runner/cell_support.h"
#include "engine/core/error.h"
#include "engine/model/step_sampling.h"
#include "engine/runtime/offline_generator.h"
#include "engine/text/grammar/grammar_matcher.h"

namespace sparkglm::bench {

using nlohmann::json;

json run_constrained_decode(ModelRunner& runner, BlockAllocator& blocks, const CellSpec& cell,
                            const CellSettings& s) {
  if (!s.grammar) return skipped("no --schema: the _schema cells decode under one");
  const int vocab = runner.config().vocab_size;
  const int bs = runner.cache_geometry().block_size, rows = cell.rows;
  const int32_t words = s.grammar->mask_words();
  // Sequences 0..rows-1 decode under masks, rows..2 rows-1 without: their steps alternate, so a
  // change of load on the machine falls on both alike.
  Tables t(blocks, 2 * rows);
  const int64_t context = decode_context(cell, s);
  std::vector<std::unique_ptr<GrammarMatcher>> matchers;
  for (int q = 0; q < rows; ++q) matchers.push_back(std::make_unique<GrammarMatcher>(s.grammar));

  // The first token of each row, from its prompt's last logits (under its first mask).
  std::vector<int32_t> next(static_cast<size_t>(2 * rows));
  std::vector<uint32_t> mask(static_cast<size_t>(words));
  auto last = prefill_rows(runner, t, context, s.max_prefill_tokens);
  int documents = 0;
  auto accept = [&](int q, int32_t token) {
    GrammarMatcher& m = *matchers[size_t(q)];
    if (!m.accept_token(token))
      throw Error(ErrorKind::kUnsupported, "row " + std::to_string(q) + " got token " +
                                               std::to_string(token) + ", which its mask refuses");
    if (m.is_terminated()) {  // the document is whole: the row starts the next one
      ++documents;
      matchers[size_t(q)] = std::make_unique<GrammarMatcher>(s.grammar);
    }
    next[size_t(q)] = token;
  };
  for (int q = 0; q < rows; ++q) {
    matchers[size_t(q)]->fill_mask(mask.data());
    apply_token_mask(mask.data(), last[size_t(q)].data(), vocab);
    accept(q, argmax_token(last[size_t(q)].data(), vocab));
    next[size_t(rows + q)] = argmax_token(last[size_t(rows + q)].data(), vocab);
  }

  int64_t pos = context;
  auto batch_at = [&](int64_t at, int first) {
    ForwardBatch b;
    for (int q = first; q < first + rows; ++q) {
      blocks.ensure_capacity(t.tables[size_t(q)], at + 1, bs);
      b.add_sequence({next[size_t(q)]}, int32_t(at), q, t.tables[size_t(q)]);
    }
    return b;
  };
  StepSampling plain;  // greedy picks in the runner, every row
  plain.picked.assign(size_t(rows), 1);
  plain.draws.assign(size_t(rows), RowDraw{});
  StepSampling masked = plain;
  for (int q = 0; q < rows; ++q) masked.mask_row.push_back(q);
  masked.mask_words = words;
  double mask_ms = 0;
  masked.fill_masks = [&](uint32_t* dst) {
    const auto t0 = Clock::now();
    for (int q = 0; q < rows; ++q) matchers[size_t(q)]->fill_mask(dst + int64_t(q) * words);
    mask_ms += ms_since(t0);
  };

  const auto start = Clock::now();
  std::vector<double> step_ms, masks_us, fraction, free_ms;
  std::string note;
  StepResult result;
  const int total = s.warmup_steps + s.decode_steps;
  for (int step = 0; step < total; ++step, ++pos) {
    if (ms_since(start) > s.max_seconds * 1e3) {
      if (step_ms.size() < 3) return skipped("too slow within --max-seconds");
      note = "cut short by --max-seconds after " + std::to_string(step_ms.size()) + " steps";
      break;
    }
    mask_ms = 0;
    auto t0 = Clock::now();
    runner.submit(batch_at(pos, 0), masked);
    runner.collect(result);
    const double ms = ms_since(t0);
    for (int q = 0; q < rows; ++q) accept(q, result.tokens.at(size_t(q)));
    t0 = Clock::now();
    runner.submit(batch_at(pos, rows), plain);
    runner.collect(result);
    const double free = ms_since(t0);
    for (int q = 0; q < rows; ++q) next[size_t(rows + q)] = result.tokens.at(size_t(q));
    if (step < s.warmup_steps) continue;
    step_ms.push_back(ms);
    masks_us.push_back(mask_ms * 1e3);
    fraction.push_back(mask_ms / ms);
    free_ms.push_back(free);
  }

  json j = step_stats(step_ms, rows);
  j.update({{"rows", rows},
            {"prompt_tokens", context},
            {"warmup_steps", s.warmup_steps},
            {"schema_sha256", s.schema_sha256},
            {"mask_samples_us", masks_us},
            {"mask_us_per_token", median(masks_us) / rows},
            {"mask_fraction_of_step", median(fraction)},
            {"unconstrained", step_stats(free_ms, rows)},
            {"documents_completed", documents},
            {"grammar_bytes", s.grammar->memory_bytes()},
            {"vocabulary_bytes", s.grammar->vocabulary().memory_bytes()},
            {"peak_rss_bytes", peak_rss_bytes()},
            // The median timed step's cache length, at which the floor is taken.
            {"floor_context", context + 1 + s.warmup_steps + int64_t(step_ms.size()) / 2}});
  if (!note.empty()) j["note"] = note;
  return j;
}

}  // namespace sparkglm::bench
