#include "engine/backend/cuda/draft_chain.h"

#include <algorithm>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/greedy_row.cuh"
#include "engine/backend/cuda/mtp_entry_row.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/backend/cuda/rms_row.cuh"
#include "engine/backend/cuda/sampling.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 128;

// What the kernels write into a chain row of the chain's StepInputs (its fixed arrays).
struct ChainRows {
  int32_t *tokens, *page_rows, *lengths, *positions;
  const int32_t* tables;  // [rows, stride]: decode row r is sequence r
  int stride, block_size;
};

__device__ void place_row(const ChainRows& c, int r, int32_t token, int32_t position) {
  c.tokens[r] = token < 0 ? 0 : token;  // a chain that found no pick runs on as waste
  c.positions[r] = position;
  c.lengths[r] = position + 1;
  const int32_t block = c.tables[int64_t(r) * c.stride + position / c.block_size];
  c.page_rows[r] = block * c.block_size + position % c.block_size;
}

// Grid (chain rows, 2) as mtp_entry_kernel's. map row r: [verify rows n, then their verify step
// rows]. out row r: [accepted row, then the chain's drafts]. Both parts find the slice's accepted
// row; part 0 records it and the first draft, moves the row to the first pass with the draft as its
// token and writes the pass's embedding half; part 1 writes its state half from the accepted row's
// z (read in place: the pass writes z after this launch, and its input lies apart, ws.mtp_cat).
__global__ void __launch_bounds__(rms_row::kThreads)
    begin_kernel(const int32_t* map, int map_stride, const int32_t* verify_tokens,
                 const int32_t* verify_positions, const int32_t* main_picks, GreedyPicks first,
                 const float* z, ChainRows c, int32_t* out, const __grid_constant__ MtpEntry next) {
  pdl_wait();  // the picks and states of the kernels ahead
  pdl_trigger();
  const int r = blockIdx.x;
  const int32_t* m = map + int64_t(r) * map_stride;
  __shared__ int src, accepted_drafts;
  __shared__ float scratch[32];
  if (threadIdx.x == 0) {
    const int n = m[0];
    int accepted = 0;  // drafts accepted: the pick at the row before a draft is that draft
    while (accepted + 1 < n && main_picks[m[1 + accepted]] == verify_tokens[m[2 + accepted]])
      ++accepted;
    src = m[1 + accepted];
    accepted_drafts = accepted;
  }
  __syncthreads();
  if (blockIdx.y == 1) {
    mtp_entry_row(next, r, 1, 0, z + int64_t(src) * next.n, scratch);
    return;
  }
  const int32_t draft = greedy_pick(first, src);
  if (threadIdx.x == 0) {
    out[int64_t(r) * map_stride] = accepted_drafts;
    out[int64_t(r) * map_stride + 1] = draft;
    place_row(c, r, draft, verify_positions[m[1]] + accepted_drafts + 1);
  }
  mtp_entry_row(next, r, 0, draft < 0 ? 0 : draft, nullptr, scratch);  // place_row's token
}

// After the last pass: each row's pick recorded.
__global__ void record_kernel(int pass, GreedyPicks picks, int map_stride, int32_t* out) {
  pdl_wait();
  pdl_trigger();
  const int r = blockIdx.x;
  int32_t* o = out + int64_t(r) * map_stride;
  const int32_t pick = greedy_pick(picks, r);
  // A pass after a missing pick is waste: the chain ends at its first -1.
  if (threadIdx.x == 0) o[1 + pass] = o[pass] < 0 ? -1 : pick;
}

// After an earlier pass, grid (rows, 2) as mtp_entry_kernel's: part 0 records the row's pick,
// moves the row one position on with it as its token and writes the next pass's embedding half;
// part 1 writes its state half from z (read in place: the next pass writes z after this launch).
__global__ void __launch_bounds__(rms_row::kThreads)
    advance_kernel(int pass, GreedyPicks picks, const float* z, int map_stride, ChainRows c,
                   int32_t* out, const __grid_constant__ MtpEntry next) {
  pdl_wait();
  pdl_trigger();
  __shared__ float scratch[32];
  const int r = blockIdx.x;
  if (blockIdx.y == 1) {
    mtp_entry_row(next, r, 1, 0, z + r * next.n, scratch);
    return;
  }
  int32_t* o = out + int64_t(r) * map_stride;
  const int32_t pick = greedy_pick(picks, r);
  const int32_t draft = o[pass] < 0 ? -1 : pick;
  if (threadIdx.x == 0) {
    o[1 + pass] = draft;
    place_row(c, r, draft, c.positions[r] + 1);
  }
  mtp_entry_row(next, r, 0, draft < 0 ? 0 : draft, nullptr, scratch);  // place_row's token
}

ChainRows chain_rows(StepInputs& chain, int block_size) {
  const StepInputs::Patch p = chain.rows_to_patch();
  return {p.tokens,    p.page_rows,    p.lengths,
          p.positions, chain.tables(), chain.layout().capacity().table_stride,
          block_size};
}

}  // namespace

DraftChain::DraftChain(const Workspace& ws, int max_width, int64_t hidden, int64_t vocab)
    : max_rows_(kDecodeMaxRows),
      max_width_(max_width),
      hidden_(hidden),
      vocab_(vocab),
      logits_(ws.chain_logits),
      map_(ws.chain_map),
      first_picks_(ws.chain_first_picks),
      picks_(ws.chain_picks),
      out_(ws.chain_out) {
  SPARKGLM_ASSERT(max_width + 1 <= kChainStride, "DraftChain: at most 7 drafts a chain");
  static_assert(kDecodeMaxRows * kChainStride <= StepInputs::kStepTailWords,
                "DraftChain: the map rides in the chain step's transfer");
  const size_t words = size_t(max_rows_) * kChainStride * sizeof(int32_t);
  for (int32_t*& out : pinned_out_) SPARKGLM_CUDA_CHECK(cudaMallocHost(&out, words));
}

DraftChain::~DraftChain() {
  for (int32_t* out : pinned_out_) cudaFreeHost(out);
}

bool DraftChain::plan(const ForwardBatch& batch, const StepInputs& verify, int passes,
                      StepInputs& chain, cudaStream_t stream) {
  passes_ = rows_ = 0;
  first_logit_.clear();
  if (passes <= 0 || passes + 1 > max_width_ || int(batch.seqs.size()) > max_rows_) return false;
  std::vector<int> step_row(size_t(batch.num_rows()), -1), logit_of(size_t(batch.num_rows()), -1);
  for (int r = 0; r < verify.rows(); ++r) step_row[size_t(verify.batch_row(r))] = r;
  for (size_t i = 0; i < batch.logit_rows.size(); ++i)
    logit_of[size_t(batch.logit_rows[i])] = int(i);
  const int block_size = verify.layout().block_size();
  ForwardBatch rows;
  for (const SequenceSlice& s : batch.seqs) {
    if (!s.decode || s.num_rows < 1 || s.num_rows + 1 > kChainStride) return false;
    // The chain's passes run at positions last accepted row + 1 .. + passes: from the slice's
    // first row + 1 to its last row + passes.
    const int nearest = s.start_position + 1;
    const int furthest = s.start_position + s.num_rows - 1 + passes;
    if (verify.is_sparse(nearest) != verify.is_sparse(furthest) ||
        int64_t(s.block_table.size()) * block_size <= furthest)
      return false;
    rows.add_sequence({0}, furthest, s.state_slot, s.block_table, /*want_logits=*/false);
  }
  chain.build(rows);
  // The map in the chain's step order (its dense rows first), in the chain's own transfer.
  rows_ = chain.rows();
  first_logit_.resize(size_t(rows_));
  map_host_.assign(size_t(rows_ * kChainStride), 0);
  for (int r = 0; r < rows_; ++r) {
    const SequenceSlice& s = batch.seqs[size_t(chain.batch_row(r))];
    int32_t* m = map_host_.data() + int64_t(r) * kChainStride;
    m[0] = s.num_rows;
    for (int i = 0; i < s.num_rows; ++i) m[1 + i] = step_row[size_t(s.first_row + i)];
    first_logit_[size_t(r)] = logit_of[size_t(s.first_row)];
  }
  chain.upload(stream, {map_host_.data(), rows_ * kChainStride, map_});
  passes_ = passes;
  return true;
}

void DraftChain::check_entry(const MtpEntry& next, const float* z, int64_t z_rows) const {
  const auto* cat = reinterpret_cast<const float*>(next.cat);
  SPARKGLM_ASSERT(mtp_entry_fits(next.n) && next.n == hidden_,
                  "DraftChain: the next pass's input is not a cached row of the state");
  SPARKGLM_ASSERT(cat >= z + z_rows * hidden_ || cat + rows_ * hidden_ <= z,
                  "DraftChain: the next pass's input overlaps the states it is made from");
}

void DraftChain::begin(const StepInputs& verify, const int32_t* main_picks,
                       const float* draft_logits, const float* z, StepInputs& chain, int block_size,
                       cudaStream_t stream, unsigned long long* greedy_keys, const MtpEntry& next) {
  check_entry(next, z, verify.rows());
  const GreedyPicks first =
      greedy_picks(draft_logits, verify.rows(), vocab_, first_picks_, stream, greedy_keys);
  launch_dependent(begin_kernel, dim3(unsigned(rows_), 2), rms_row::kThreads, 0, stream, map_,
                   kChainStride, verify.tokens(), verify.positions_device(), main_picks, first, z,
                   chain_rows(chain, block_size), out_, next);
}

void DraftChain::advance(int pass, const float* logits, const float* z, StepInputs& chain,
                         int block_size, cudaStream_t stream, unsigned long long* greedy_keys,
                         const MtpEntry& next) {
  const GreedyPicks picks = greedy_picks(logits, rows_, vocab_, picks_, stream, greedy_keys);
  if (pass == passes_) {
    launch_dependent(record_kernel, rows_, kThreads, 0, stream, pass, picks, kChainStride, out_);
    return;
  }
  check_entry(next, z, rows_);
  launch_dependent(advance_kernel, dim3(unsigned(rows_), 2), rms_row::kThreads, 0, stream, pass,
                   picks, z, kChainStride, chain_rows(chain, block_size), out_, next);
}

void DraftChain::to_host(cudaStream_t stream, int parity) {
  SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(pinned_out_[parity], out_,
                                      size_t(rows_ * kChainStride) * sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, stream));
  copied_first_logit_[parity] = first_logit_;
  copied_width_[parity] = width();
}

int32_t DraftChain::out_index(int parity, int32_t entry) const {
  const int w = copied_width_[parity];
  const std::vector<int32_t>& first = copied_first_logit_[parity];
  SPARKGLM_ASSERT(w > 0 && entry >= 0, "DraftChain: chain_from names no chain");
  const int32_t row = entry / w, draft = entry % w;
  // The slice holding logit row `row`: the one starting last at or before it.
  int found = -1;
  for (int r = 0; r < int(first.size()); ++r)
    if (first[size_t(r)] <= row && (found < 0 || first[size_t(r)] > first[size_t(found)]))
      found = r;
  SPARKGLM_ASSERT(found >= 0, "DraftChain: chain_from names a row before every chain");
  return found * kChainStride + 1 + draft;
}

void DraftChain::spread(int parity, int64_t logit_rows, std::vector<int32_t>& draft_chain) const {
  const int w = copied_width_[parity];
  const std::vector<int32_t>& first = copied_first_logit_[parity];
  draft_chain.assign(size_t(logit_rows * w), -1);
  for (int r = 0; r < int(first.size()); ++r) {
    const int32_t* o = pinned_out_[parity] + int64_t(r) * kChainStride;
    const int64_t row = first[size_t(r)] + o[0];  // the slice's accepted row
    SPARKGLM_ASSERT(row >= 0 && row < logit_rows, "DraftChain: an accepted row off its slice");
    std::copy_n(o + 1, w, draft_chain.data() + row * w);
  }
}

}  // namespace sparkglm::cuda
