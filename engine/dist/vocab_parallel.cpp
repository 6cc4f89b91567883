#include "engine/dist/vocab_parallel.h"

#include <algorithm>

#include "engine/model/step_sampling.h"

namespace sparkglm::dist {

namespace {

struct Best {
  float value;
  int32_t id;  // local id, -1: none above -inf
};

}  // namespace

std::vector<int32_t> greedy_picks(Communicator& comm, const float* local, int64_t n, int64_t vl) {
  const int world = comm.world_size();
  std::vector<Best> mine(static_cast<size_t>(n));  // [n]
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = greedy_token(local + i * vl, vl);
    mine[size_t(i)] = {id < 0 ? 0.0f : local[i * vl + id], id};
  }
  std::vector<Best> all(size_t(world) * size_t(n));  // [W, n]
  comm.all_gather(mine.data(), mine.size() * sizeof(Best), all.data());
  std::vector<int32_t> picks(size_t(n), -1);
  for (int64_t i = 0; i < n; ++i) {
    float best = 0.0f;
    for (int r = 0; r < world; ++r) {  // ascending ids: a later rank must be strictly greater
      const Best& b = all[size_t(r) * size_t(n) + size_t(i)];
      if (b.id < 0 || (picks[size_t(i)] >= 0 && !(b.value > best))) continue;
      best = b.value;
      picks[size_t(i)] = int32_t(r * vl) + b.id;
    }
  }
  return picks;
}

void gather_rows(Communicator& comm, const float* local, int64_t n, int64_t vl, float* full) {
  const int world = comm.world_size();
  std::vector<float> parts(size_t(world) * size_t(n * vl));  // [W, n, vl]
  comm.all_gather(local, size_t(n * vl) * sizeof(float), parts.data());
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(&parts[size_t((r * n + i) * vl)], vl, full + i * world * vl + r * vl);
}

}  // namespace sparkglm::dist
