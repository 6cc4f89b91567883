#include "bench/runner/engine_cells.h"

#include <algorithm>
#include <chrono>
#include <new>
#include <regex>

#include "bench/runner/cell_support.h"
#include "bench/runner/constrained_cell.h"
#include "bench/runner/verify_cell.h"
#include "engine/core/error.h"
#include "engine/runtime/offline_generator.h"
#include "engine/runtime/sampler.h"

namespace sparkglm::bench {

namespace {

using nlohmann::json;

// Seeded sampling at s.temperature on the decode cell's sequences, from position `pos`: `steps`
// timed steps (after s.warmup_steps) drawn on the host from each step's logits, then as many
// pipelined steps drawn by the runner. Null when the temperature is 0.
json sampled_decode(ModelRunner& runner, BlockAllocator& blocks, Tables& t,
                    std::vector<int32_t>& next, int64_t& pos, int steps, const CellSettings& s) {
  if (s.temperature <= 0.0f || steps == 0) return nullptr;
  const int rows = int(next.size()), vocab = runner.config().vocab_size;
  const int bs = runner.cache_geometry().block_size;
  SamplingParams params;
  params.temperature = s.temperature;
  params.top_p = 0.95f;
  std::vector<SequenceSampler> samplers;
  for (int q = 0; q < rows; ++q) {
    params.seed = uint64_t(7 + q);
    samplers.emplace_back(params, std::vector<int32_t>{}, 0);
  }
  auto batch_at = [&](int64_t at, bool placeholders) {
    ForwardBatch b;
    for (int q = 0; q < rows; ++q) {
      blocks.ensure_capacity(t.tables[size_t(q)], at + 1, bs);
      b.add_sequence({placeholders ? 0 : next[size_t(q)]}, int32_t(at), q, t.tables[size_t(q)]);
    }
    return b;
  };
  const int total = s.warmup_steps + steps;
  StepResult result;
  std::vector<double> host;
  StepSampling none;  // every row's logits to the host
  none.picked.assign(size_t(rows), 0);
  none.draws.assign(size_t(rows), RowDraw{});
  for (int step = 0; step < total; ++step, ++pos) {
    const auto t0 = Clock::now();
    runner.submit(batch_at(pos, false), none);
    runner.collect(result);
    for (int q = 0; q < rows; ++q) {
      SequenceSampler& sampler = samplers[size_t(q)];
      next[size_t(q)] = sampler.sample(result.logits.data() + int64_t(q) * vocab, vocab, {}).token;
      sampler.accept(next[size_t(q)]);
    }
    if (step >= s.warmup_steps) host.push_back(ms_since(t0));
  }
  json out = {{"temperature", s.temperature},
              {"top_p", params.top_p},
              {"host_draws", step_stats(host, rows)}};
  if (!runner.draws_sampled()) {
    out["runner_draws"] = skipped("this runner draws greedy tokens only");
    return out;
  }
  StepSampling first, chained;
  first.picked.assign(size_t(rows), 1);
  for (int q = 0; q < rows; ++q) first.draws.push_back(samplers[size_t(q)].row_draw(total));
  chained = first;
  for (int q = 0; q < rows; ++q) chained.token_from.push_back(q);  // row q reads logit row q
  std::vector<double> device;
  runner.submit(batch_at(pos++, false), first);
  auto last = Clock::now();
  for (int step = 0; step < total; ++step, ++pos) {
    for (RowDraw& d : chained.draws) d.index = uint64_t(total + step + 1);
    runner.submit(batch_at(pos, true), chained);
    runner.collect(result);
    const auto now = Clock::now();
    if (step >= s.warmup_steps)
      device.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  }
  runner.collect(result);
  out["runner_draws"] = step_stats(device, rows);
  return out;
}

json run_decode(ModelRunner& runner, BlockAllocator& blocks, const CellSpec& cell,
                const CellSettings& s) {
  const int vocab = runner.config().vocab_size;
  const int bs = runner.cache_geometry().block_size, rows = cell.rows;
  Tables t(blocks, rows);
  std::vector<int32_t> next(static_cast<size_t>(rows));
  const auto start = Clock::now();
  ForwardOutput out;
  const int64_t context = decode_context(cell, s);
  const auto prompt_ends = prefill_rows(runner, t, context, s.max_prefill_tokens);
  for (int q = 0; q < rows; ++q)
    next[size_t(q)] = argmax_token(prompt_ends[size_t(q)].data(), vocab);
  std::vector<double> samples;
  std::string note;
  int64_t pos = context;
  for (int step = 0; step < s.warmup_steps + s.decode_steps; ++step, ++pos) {
    if (ms_since(start) > s.max_seconds * 1e3) {
      if (samples.size() < 3)
        return skipped("too slow: " + std::to_string(samples.size()) +
                       " timed steps within --max-seconds " + std::to_string(int(s.max_seconds)));
      note = "cut short by --max-seconds after " + std::to_string(samples.size()) + " steps";
      break;
    }
    ForwardBatch b;
    for (int q = 0; q < rows; ++q) {
      blocks.ensure_capacity(t.tables[size_t(q)], pos + 1, bs);
      b.add_sequence({next[size_t(q)]}, int32_t(pos), q, t.tables[size_t(q)]);
    }
    const auto t0 = Clock::now();
    runner.forward(b, out);
    const double ms = ms_since(t0);
    for (int q = 0; q < rows; ++q)
      next[size_t(q)] = argmax_token(out.logits.data() + int64_t(q) * vocab, vocab);
    if (step >= s.warmup_steps) samples.push_back(ms);
  }
  // The same number of steps pipelined, as the scheduler serves greedy requests: step N+1 is
  // submitted before step N is collected, its rows read N's picks in the runner, and a step's
  // time is the interval between two collections.
  std::vector<double> piped;
  int64_t piped_start = 0;
  {
    StepSampling first, chained;
    first.picked.assign(size_t(rows), 1);
    first.draws.assign(size_t(rows), RowDraw{});
    chained.picked = first.picked;
    chained.draws = first.draws;
    for (int q = 0; q < rows; ++q) chained.token_from.push_back(q);  // row q reads logit row q
    auto batch_at = [&](int64_t at, bool placeholders) {
      ForwardBatch b;
      for (int q = 0; q < rows; ++q) {
        blocks.ensure_capacity(t.tables[size_t(q)], at + 1, bs);
        b.add_sequence({placeholders ? 0 : next[size_t(q)]}, int32_t(at), q, t.tables[size_t(q)]);
      }
      return b;
    };
    StepResult result;
    piped_start = pos;
    runner.submit(batch_at(pos++, false), first);
    auto last = Clock::now();
    for (size_t step = 0; step < samples.size() + size_t(s.warmup_steps); ++step, ++pos) {
      runner.submit(batch_at(pos, true), chained);
      runner.collect(result);
      const auto now = Clock::now();
      if (step >= size_t(s.warmup_steps))
        piped.push_back(std::chrono::duration<double, std::milli>(now - last).count());
      last = now;
    }
    runner.collect(result);
  }
  json sampled = sampled_decode(runner, blocks, t, next, pos, int(piped.size()), s);
  const double med = median(piped), sync_med = median(samples);
  json j = {
      {"rows", rows},
      {"prompt_tokens", context},
      {"warmup_steps", s.warmup_steps},
      {"tokens_per_s", rows * 1e3 / med},
      {"median_ms", med},
      {"runs", piped.size()},
      {"samples_ms", piped},
      {"synchronous",
       {{"tokens_per_s", rows * 1e3 / sync_med}, {"median_ms", sync_med}, {"samples_ms", samples}}},
      // The median pipelined step's cache length, at which the floor is taken.
      {"floor_context", piped_start + 1 + s.warmup_steps + int64_t(piped.size()) / 2}};
  if (!note.empty()) j["note"] = note;
  if (!sampled.is_null()) j["sampled"] = std::move(sampled);
  return j;
}

json run_prefill(ModelRunner& runner, BlockAllocator& blocks, const CellSpec& cell,
                 const CellSettings& s) {
  const int vocab = runner.config().vocab_size;
  const CacheGeometry g = runner.cache_geometry();
  const int64_t n = cell.tokens, chunks = (n + s.max_prefill_tokens - 1) / s.max_prefill_tokens;
  const auto prompt = prompt_of(n, 0, vocab);
  const auto start = Clock::now();
  std::vector<double> samples;
  std::string note;
  ForwardOutput out;
  for (int r = 0; r < s.runs; ++r) {
    if (r > 0 && ms_since(start) + samples.back() > s.max_seconds * 1e3) {
      note = "stopped after " + std::to_string(r) + " runs by --max-seconds " +
             std::to_string(int(s.max_seconds));
      break;
    }
    Tables t(blocks, 1);
    const int slot = r % g.num_state_slots;  // a fresh slot: start_position 0 zeroes its state
    const auto t0 = Clock::now();
    for (int64_t at = 0; at < n; at += s.max_prefill_tokens) {
      const int64_t end = std::min(n, at + s.max_prefill_tokens);
      blocks.ensure_capacity(t.tables[0], end, g.block_size);
      ForwardBatch b;
      b.add_sequence({prompt.begin() + at, prompt.begin() + end}, int32_t(at), slot, t.tables[0],
                     end == n);
      runner.forward(b, out);
      // The first chunk bounds a run from below (later chunks attend more): give up early.
      const double est = at == 0 ? ms_since(t0) * double(chunks) : ms_since(t0);
      if (est > s.max_seconds * 1e3) {
        if (r == 0)
          return skipped("too slow: one run " +
                         std::string(at == 0 ? "estimated at " : "took over ") +
                         std::to_string(int(est / 1e3)) + " s > --max-seconds " +
                         std::to_string(int(s.max_seconds)));
        note = "stopped after " + std::to_string(r) + " runs by --max-seconds";
        break;
      }
    }
    if (!note.empty()) break;
    samples.push_back(ms_since(t0));
  }
  const double med = median(samples);
  json j = {{"tokens", n},
            {"chunk_tokens", s.max_prefill_tokens},
            {"tokens_per_s", double(n) * 1e3 / med},
            {"median_ms", med},
            {"runs", samples.size()},
            {"samples_ms", samples}};
  if (!note.empty()) j["note"] = note;
  return j;
}

}  // namespace

int64_t decode_context(const CellSpec& cell, const CellSettings& s) {
  return cell.context > 0 ? cell.context : s.prompt;
}

CellSpec parse_cell(const std::string& name) {
  static const std::regex decode("decode_c([1-9][0-9]{0,3})(_at_([1-9][0-9]{0,6})(k?))?(_schema)?"),
      prefill("prefill_([1-9][0-9]{0,6})(k?)"),
      verify("verify_c([1-9][0-9]{0,3})_w([2-9])(_at_([1-9][0-9]{0,6})(k?))?");
  std::smatch m;
  CellSpec c;
  c.name = name;
  if (std::regex_match(name, m, decode)) {
    c.decode = true;
    c.rows = std::stoi(m[1]);
    if (m[2].matched) c.context = std::stoll(m[3]) * (m[4].length() ? 1024 : 1);
    c.constrained = m[5].matched;
  } else if (std::regex_match(name, m, verify)) {
    c.decode = true;
    c.rows = std::stoi(m[1]);
    c.width = std::stoi(m[2]);
    if (m[3].matched) c.context = std::stoll(m[4]) * (m[5].length() ? 1024 : 1);
  } else if (std::regex_match(name, m, prefill)) {
    c.tokens = std::stoll(m[1]) * (m[2].length() ? 1024 : 1);
  } else {
    throw Error(ErrorKind::kInvalidArgument,
                "--cells: expected decode_cN[_at_N[k]][_schema], verify_cN_wW[_at_N[k]] or "
                "prefill_N[k] (decode_c1, decode_c4_at_128k, decode_c8_schema, verify_c1_w3, "
                "prefill_8k, prefill_256), "
                "got \"" +
                    name + "\"");
  }
  return c;
}

int sequences(const CellSpec& cell) {
  return !cell.decode ? 1 : cell.constrained ? 2 * cell.rows : cell.rows;
}

int64_t blocks_needed(const CellSpec& cell, const CellSettings& s, int block_size) {
  // Decode runs its steps twice (synchronous, then pipelined with one step more in flight), and
  // twice more when it also samples (host-drawn, then runner-drawn and pipelined).
  // A _schema cell runs its steps once on each of its 2C sequences.
  // A verify cell's decode step and two verify steps (graphed, eager) advance 1 + 2W positions.
  const int passes = cell.width > 0         ? 1 + 2 * cell.width
                     : cell.constrained     ? 1
                     : s.temperature > 0.0f ? 4
                                            : 2;
  const int64_t len = cell.decode
                          ? decode_context(cell, s) + passes * (s.warmup_steps + s.decode_steps) + 3
                          : cell.tokens;
  return sequences(cell) * ((len + block_size - 1) / block_size);
}

json run_cell(ModelRunner& runner, BlockAllocator& blocks, const CellSpec& cell,
              const CellSettings& s) {
  const CacheGeometry g = runner.cache_geometry();
  const int64_t need = blocks_needed(cell, s, g.block_size);
  if (need > g.num_blocks)
    return skipped("pool too small: needs " + std::to_string(need) + " blocks of " +
                   std::to_string(g.block_size) + " tokens, the runner has " +
                   std::to_string(g.num_blocks));
  if (cell.decode && sequences(cell) > g.num_state_slots)
    return skipped("needs " + std::to_string(sequences(cell)) + " state slots, the runner has " +
                   std::to_string(g.num_state_slots));
  try {
    if (cell.constrained) return run_constrained_decode(runner, blocks, cell, s);
    if (cell.width > 0) return run_verify(runner, blocks, cell, s);
    return cell.decode ? run_decode(runner, blocks, cell, s) : run_prefill(runner, blocks, cell, s);
  } catch (const std::bad_alloc&) {
    return skipped("out of host memory");
  } catch (const Error& e) {
    return skipped(std::string("the runner failed: ") + e.what());
  }
}

}  // namespace sparkglm::bench
