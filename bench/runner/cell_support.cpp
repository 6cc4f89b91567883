#include "bench/runner/cell_support.h"

#include <algorithm>

namespace sparkglm::bench {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<int32_t> prompt_of(int64_t n, int seq, int vocab) {
  const int64_t range = std::min(vocab - 32, 224);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = int32_t(32 + (i * 7919 + seq * 104729) % range);
  return p;
}

nlohmann::json skipped(const std::string& why) {
  return {{"skipped", why}};
}

nlohmann::json step_stats(const std::vector<double>& ms, int rows) {
  const double med = median(ms);
  return {{"tokens_per_s", rows * 1e3 / med},
          {"median_ms", med},
          {"runs", ms.size()},
          {"samples_ms", ms}};
}

std::vector<std::vector<float>> prefill_rows(ModelRunner& runner, Tables& t, int64_t context,
                                             int chunk) {
  const int vocab = runner.config().vocab_size, bs = runner.cache_geometry().block_size;
  std::vector<std::vector<float>> last;
  ForwardOutput out;
  for (size_t q = 0; q < t.tables.size(); ++q) {
    const auto prompt = prompt_of(context, int(q), vocab);
    for (int64_t at = 0; at < context; at += chunk) {
      const int64_t end = std::min<int64_t>(context, at + chunk);
      t.blocks.ensure_capacity(t.tables[q], end, bs);
      ForwardBatch b;
      b.add_sequence({prompt.begin() + at, prompt.begin() + end}, int32_t(at), int32_t(q),
                     t.tables[q], end == context);
      runner.forward(b, out);
    }
    last.emplace_back(out.logits.begin(), out.logits.begin() + vocab);
  }
  return last;
}

}  // namespace sparkglm::bench
