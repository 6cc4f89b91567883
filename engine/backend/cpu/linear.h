#pragma once
// y = x W^T for a batch of rows: the projection every layer spends its time in.
//
// Reduction order (the contract that makes results batch invariant): each output element
// y[m][n] = sum_k x[m][k] * W[n][k] is accumulated in 8 lanes, lane l taking k = l, l+8, l+16, ...
// in increasing k with a fused multiply-add, then the lanes are summed as
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). Neither the number of rows M, nor the
// blocking, nor the thread count changes this order, so a row's result never depends on which
// other rows share the batch.
#include <cstdint>

#include "engine/core/thread_pool.h"
#include "engine/model/weights.h"

namespace sparkglm::cpu {

// x: [M, ldx] (first W.cols used), y: [M, ldy] (first W.rows written).
void linear(const float* x, int64_t ldx, int64_t m, const Linear& w, float* y, int64_t ldy,
            ThreadPool& pool);
// Contiguous rows: ldx = W.cols, ldy = W.rows.
inline void linear(const float* x, int64_t m, const Linear& w, float* y, ThreadPool& pool) {
  linear(x, w.cols, m, w, y, w.rows, pool);
}
// Only output rows [n0, n1) of W (e.g. one head's slice): y[m][n - n0].
void linear_slice(const float* x, int64_t ldx, int64_t m, const Linear& w, int64_t n0, int64_t n1,
                  float* y, int64_t ldy, ThreadPool& pool);

// The same reduction order over two FP32 vectors.
float dot(const float* a, const float* b, int64_t n);

}  // namespace sparkglm::cpu
