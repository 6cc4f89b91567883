#include "engine/model/selection_trace.h"

#include <algorithm>
#include <utility>

namespace sparkglm {

void SelectionTrace::record(int layer, int slot, int32_t position, const int32_t* tokens,
                            size_t count) {
  std::vector<int32_t> sorted(tokens, tokens + count);
  std::sort(sorted.begin(), sorted.end());
  const std::lock_guard<std::mutex> lock(mu_);
  rows_[{layer, slot, position}] = std::move(sorted);
}

std::vector<int32_t> SelectionTrace::tokens(int layer, int slot, int32_t position) const {
  const std::lock_guard<std::mutex> lock(mu_);
  const auto it = rows_.find({layer, slot, position});
  return it == rows_.end() ? std::vector<int32_t>{} : it->second;
}

size_t SelectionTrace::size() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return rows_.size();
}

}  // namespace sparkglm
