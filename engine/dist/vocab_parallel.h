#pragma once
// The LM head split by vocabulary: rank r holds logits of ids [r * V/W, (r + 1) * V/W) for every
// row (docs/parallel.md). A greedy row needs one (max, id) pair per rank, not the row's logits;
// a row that is sampled, masked or returned needs the whole row, gathered.
#include <cstdint>
#include <vector>

#include "engine/dist/communicator.h"

namespace sparkglm::dist {

// local: [n, vl] this rank's logits of n rows (vocab_begin = rank * vl). Returns [n] global ids:
// greedy_token's rule over the whole row (the lowest id among the maxima, NaN counted as -inf, -1
// when no logit is above -inf), the same on every rank. One all_gather of n pairs.
std::vector<int32_t> greedy_picks(Communicator& comm, const float* local, int64_t n, int64_t vl);

// local: [n, vl]; full: [n, W * vl], every rank's part in id order. One all_gather.
void gather_rows(Communicator& comm, const float* local, int64_t n, int64_t vl, float* full);

}  // namespace sparkglm::dist
