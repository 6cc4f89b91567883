#include "bench/runner/verify_cell.h"

#include <string>
#include <vector>

#include "bench/runner/cell_support.h"
#include "engine/runtime/offline_generator.h"

namespace sparkglm::bench {

using nlohmann::json;

json run_verify(ModelRunner& runner, BlockAllocator& blocks, const CellSpec& cell,
                const CellSettings& s) {
  const CacheGeometry g = runner.cache_geometry();
  const int rows = cell.rows, width = cell.width, bs = g.block_size;
  if (g.state_records < width)
    return skipped("needs " + std::to_string(width) +
                   " KDA state records per slot, the runner has " +
                   std::to_string(g.state_records));
  const int vocab = runner.config().vocab_size;
  Tables t(blocks, rows);
  const auto start = Clock::now();
  const int64_t context = decode_context(cell, s);
  const auto prompt_ends = prefill_rows(runner, t, context, s.max_prefill_tokens);
  std::vector<int32_t> next(static_cast<size_t>(rows));
  for (int q = 0; q < rows; ++q)
    next[size_t(q)] = argmax_token(prompt_ends[size_t(q)].data(), vocab);
  // Graphs on for the decode and the first verify step; the second runs eagerly.
  const bool graphs = runner.set_eager(false);
  std::vector<double> decode_ms, verify_ms, eager_ms;
  std::string note;
  int64_t pos = context;
  ForwardOutput out;
  for (int step = 0; step < s.warmup_steps + s.decode_steps; ++step) {
    if (ms_since(start) > s.max_seconds * 1e3) {
      if (verify_ms.size() < 3)
        return skipped("too slow: " + std::to_string(verify_ms.size()) +
                       " timed steps within --max-seconds " + std::to_string(int(s.max_seconds)));
      note = "cut short by --max-seconds after " + std::to_string(verify_ms.size()) + " steps";
      break;
    }
    // A decode step at pos, then a verify step over pos + 1 .. pos + width (its drafts: the
    // decode step's greedy token repeated; their values do not change the work), then with graphs
    // the eager verify step over the next width positions.
    ForwardBatch d;
    for (int q = 0; q < rows; ++q) {
      blocks.ensure_capacity(t.tables[size_t(q)], pos + 1 + 2 * width, bs);
      d.add_sequence({next[size_t(q)]}, int32_t(pos), q, t.tables[size_t(q)]);
    }
    auto t0 = Clock::now();
    runner.forward(d, out);
    const double dms = ms_since(t0);
    for (int q = 0; q < rows; ++q)
      next[size_t(q)] = argmax_token(out.logits.data() + int64_t(q) * vocab, vocab);
    pos += 1;
    auto verify = [&](bool eager) {
      ForwardBatch v;
      for (int q = 0; q < rows; ++q) {
        v.add_sequence(std::vector<int32_t>(size_t(width), next[size_t(q)]), int32_t(pos), q,
                       t.tables[size_t(q)], /*want_logits=*/true, /*all_logits=*/true);
        v.seqs.back().decode = true;
        v.seqs.back().record_states = true;
      }
      runner.set_eager(eager);
      const auto v0 = Clock::now();
      runner.forward(v, out);
      const double ms = ms_since(v0);
      runner.set_eager(false);
      for (int q = 0; q < rows; ++q)
        next[size_t(q)] =
            argmax_token(out.logits.data() + (int64_t(q) * width + width - 1) * vocab, vocab);
      pos += width;
      return ms;
    };
    const double vms = verify(false);
    const double ems = graphs ? verify(true) : 0.0;
    if (step >= s.warmup_steps) {
      decode_ms.push_back(dms);
      verify_ms.push_back(vms);
      if (graphs) eager_ms.push_back(ems);
    }
  }
  const double med = median(verify_ms), dmed = median(decode_ms);
  json j = {{"rows", rows},
            {"width", width},
            {"prompt_tokens", context},
            {"warmup_steps", s.warmup_steps},
            {"tokens_per_s", rows * width * 1e3 / med},
            {"median_ms", med},
            {"runs", verify_ms.size()},
            {"samples_ms", verify_ms},
            {"decode", {{"median_ms", dmed}, {"samples_ms", decode_ms}}},
            {"verify_over_decode", med / dmed}};
  if (graphs) {
    const double emed = median(eager_ms);
    const StepGraphStats gs = runner.graph_stats();
    j["eager"] = {{"median_ms", emed}, {"samples_ms", eager_ms}};
    j["graphed_over_eager"] = med / emed;
    j["graphs"] = {{"decode_graphs", gs.decode_graphs},
                   {"verify_graphs", gs.verify_graphs},
                   {"decode_graph_steps", gs.decode_graph_steps},
                   {"verify_graph_steps", gs.verify_graph_steps},
                   {"verify_eager_steps", gs.verify_eager_steps},
                   {"graph_bytes", gs.graph_bytes}};
  }
  if (!note.empty()) j["note"] = note;
  return j;
}

}  // namespace sparkglm::bench
