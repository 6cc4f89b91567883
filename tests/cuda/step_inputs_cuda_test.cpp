// StepInputs (engine/backend/cuda/step_inputs.h): a step's inputs reach the device in one
// transfer, a verify step's slices and a caller's tail (the draft chain's map) with them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/step_inputs.h"
#include "engine/model/forward_batch.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;

std::vector<int32_t> words(const int32_t* device, size_t n) {
  std::vector<int32_t> v(n);
  SPARKGLM_CUDA_CHECK(cudaMemcpy(v.data(), device, n * 4, cudaMemcpyDeviceToHost));
  return v;
}

// Two verify slices (3 rows in slot 1, 2 rows in slot 3), a tail of five words: the rows, the
// slices and the tail all arrive, and a later step without a tail leaves the tail's words alone.
// (A tail past kStepTailWords is an internal invariant: its one caller is bounded at compile time.)
TEST(CudaStepInputs, AVerifyStepsSlicesAndATailComeInTheStepsOneTransfer) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const StepCapacity capacity{64, 16, 8};
  cuda::StepInputs in(capacity, /*block_size=*/16, /*topk_pools=*/4, /*kpool=*/4);
  ForwardBatch b;
  b.add_sequence({5, 6, 7}, 20, 1, {0, 1}, true, true);
  b.add_sequence({9, 10}, 40, 3, {2, 3, 4}, true, true);
  for (SequenceSlice& s : b.seqs) s.decode = s.record_states = true;
  const std::vector<int32_t> tail = {11, 22, 33, 44, 55};
  cuda::DeviceBuffer to(tail.size() * 4);
  SPARKGLM_CUDA_CHECK(cudaMemset(to.data(), 0, to.bytes()));
  in.build(b);
  in.upload(nullptr, {tail.data(), int(tail.size()), static_cast<int32_t*>(to.data())});
  SPARKGLM_CUDA_CHECK(cudaDeviceSynchronize());

  ASSERT_EQ(in.rows(), 5);
  const auto tokens = words(in.tokens(), 5), positions = words(in.positions_device(), 5);
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(tokens[size_t(r)], b.tokens[size_t(in.batch_row(r))]) << "row " << r;
    EXPECT_EQ(positions[size_t(r)], b.positions[size_t(in.batch_row(r))]) << "row " << r;
  }
  // Slices: one a slot, its rows in position order, as the KDA verify kernels read them.
  ASSERT_EQ(in.slices(), 2);
  EXPECT_EQ(in.longest_slice(), 3);
  const auto slots = words(in.slice_slots(), 2), first = words(in.slice_first(), 3),
             rows = words(in.slice_rows(), 5);
  EXPECT_EQ(first, (std::vector<int32_t>{0, slots[0] == 1 ? 3 : 2, 5}));
  for (int s = 0; s < 2; ++s) {
    const int slot = slots[size_t(s)];
    EXPECT_TRUE(slot == 1 || slot == 3) << "slice " << s;
    int32_t last_position = -1;
    for (int i = first[size_t(s)]; i < first[size_t(s) + 1]; ++i) {
      const int row = rows[size_t(i)];
      EXPECT_EQ(b.seqs[size_t(b.row_seq[size_t(in.batch_row(row))])].state_slot, slot);
      EXPECT_GT(positions[size_t(row)], last_position) << "slice " << s << " out of order";
      last_position = positions[size_t(row)];
    }
  }
  EXPECT_EQ(words(static_cast<const int32_t*>(to.data()), tail.size()), tail);

  // A plain decode step after it, loaded without a tail: the tail's words stay as they were.
  ForwardBatch plain;
  plain.add_sequence({8}, 23, 1, {0, 1});
  in.load(plain, nullptr);
  SPARKGLM_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(in.slices(), 0);
  EXPECT_EQ(words(in.tokens(), 1), std::vector<int32_t>{8});
  EXPECT_EQ(words(static_cast<const int32_t*>(to.data()), tail.size()), tail);
}

}  // namespace
}  // namespace sparkglm
