#include "engine/backend/cuda/mla_prefill.h"

#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

size_t round_up(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Grid: T. Row t: length start + t + 1 and its own copy of the sequence's block table.
__global__ void rows_kernel(int start, const int32_t* table, int table_len, int32_t* lengths,
                            int32_t* tables) {
  const int t = int(blockIdx.x);
  if (threadIdx.x == 0) lengths[t] = start + t + 1;
  for (int i = int(threadIdx.x); i < table_len; i += int(blockDim.x))
    tables[int64_t(t) * table_len + i] = table[i];
}

}  // namespace

size_t mla_prefill_workspace_bytes(int rows, int heads, int start, int table_len) {
  return round_up(size_t(rows) * 4) + round_up(size_t(rows) * size_t(table_len) * 4) +
         size_t(mla_decode_workspace_floats(rows, heads, start + rows)) * 4;
}

void mla_prefill(const MlaPrefillArgs& a, cudaStream_t stream) {
  if (a.rows <= 0) return;
  if (a.start < 0 || a.block_size <= 0 ||
      int64_t(a.table_len) * a.block_size < int64_t(a.start) + a.rows)
    throw Error(ErrorKind::kInvalidArgument,
                "mla_prefill: table_len (" + std::to_string(a.table_len) + ") x block_size (" +
                    std::to_string(a.block_size) + ") must cover start + rows (" +
                    std::to_string(int64_t(a.start) + a.rows) + ") tokens");
  auto* base = static_cast<char*>(a.workspace);
  auto* lengths = reinterpret_cast<int32_t*>(base);
  auto* tables = reinterpret_cast<int32_t*>(base + round_up(size_t(a.rows) * 4));
  auto* ws = reinterpret_cast<float*>(base + round_up(size_t(a.rows) * 4) +
                                      round_up(size_t(a.rows) * size_t(a.table_len) * 4));
  rows_kernel<<<unsigned(a.rows), 128, 0, stream>>>(a.start, a.block_table, a.table_len, lengths,
                                                    tables);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  MlaDecodeArgs d;
  d.rows = a.rows;
  d.heads = a.heads;
  d.q_tilde = a.q_tilde;
  d.pages = a.pages;
  d.format = a.format;
  d.block_size = a.block_size;
  d.block_table = tables;
  d.table_stride = a.table_len;
  d.lengths = lengths;
  d.attended = nullptr;
  d.max_len = a.start + a.rows;
  d.scale = a.scale;
  d.workspace = ws;
  d.o_bar = a.o_bar;
  mla_decode(d, stream);
}

}  // namespace sparkglm::cuda
