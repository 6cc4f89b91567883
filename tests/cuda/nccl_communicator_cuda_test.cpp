// The NCCL communicator of tensor-parallel CUDA ranks: one rank leaves its data as it is (the
// single-rank path that runs on one GPU), two ranks on two GPUs sum every element and hold the
// same bits, and a peer whose control connection closes ends the other rank's wait with a device
// fault instead of a hang. The two-rank cases need two visible GPUs and skip otherwise.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/nccl_communicator.h"
#include "engine/core/error.h"
#include "engine/dist/socket_communicator.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using cuda::DeviceBuffer;
using cuda::NcclCommunicator;
using cuda_test::to_device;
using cuda_test::to_host;
using cuda_test::uniform;

constexpr double kTimeoutS = 120.0;

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

bool skip_unless_gpus(int n) {
  return !cuda::nccl_available() || device_count() < n;
}

// Runs body(rank) on one thread per rank with the device of that rank current; rethrows the first
// failure on the calling thread.
template <typename Body>
void on_ranks(int world, Body body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        SPARKGLM_CUDA_CHECK(cudaSetDevice(r));
        body(r);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

TEST(CudaNccl, OneRankKeepsItsDataAndCopiesItsPart) {
  if (skip_unless_gpus(1)) GTEST_SKIP() << "needs a CUDA device and NCCL";
  SPARKGLM_CUDA_CHECK(cudaSetDevice(0));
  auto control = dist::SocketCommunicator::local_group(1);
  cudaStream_t stream = nullptr;
  SPARKGLM_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    NcclCommunicator nccl(*control[0], 0, stream, kTimeoutS);
    EXPECT_EQ(nccl.rank(), 0);
    EXPECT_EQ(nccl.world_size(), 1);
    const std::vector<float> x = uniform(0xacc1, 4099, 0.0f, 3.0f);
    DeviceBuffer d = to_device(x);
    nccl.all_reduce_sum(static_cast<float*>(d.data()), x.size());
    nccl.broadcast(d.data(), x.size() * sizeof(float), 0);
    DeviceBuffer gathered(x.size() * sizeof(float));
    nccl.all_gather(d.data(), x.size() * sizeof(float), gathered.data());
    nccl.synchronize();
    EXPECT_EQ(to_host<float>(d, x.size()), x);
    EXPECT_EQ(to_host<float>(gathered, x.size()), x);
    EXPECT_FALSE(nccl.peer_lost());
  }
  SPARKGLM_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(CudaNccl, TwoRanksSumEveryElementAndHoldTheSameBits) {
  if (skip_unless_gpus(2)) GTEST_SKIP() << "needs two CUDA devices and NCCL";
  constexpr size_t n = 1 << 20;
  const std::vector<float> part[2] = {uniform(0xa0, n, 0.0f, 5.0f), uniform(0xa1, n, 0.0f, 5.0f)};
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = part[0][i] + part[1][i];
  auto control = dist::SocketCommunicator::local_group(2);
  std::vector<float> sum[2], gathered[2], broadcast[2];
  on_ranks(2, [&](int r) {
    cudaStream_t stream = nullptr;
    SPARKGLM_CUDA_CHECK(cudaStreamCreate(&stream));
    {
      NcclCommunicator nccl(*control[size_t(r)], r, stream, kTimeoutS);
      DeviceBuffer d = to_device(part[r]);
      DeviceBuffer g(2 * n * sizeof(float));
      DeviceBuffer b = to_device(part[r]);
      nccl.all_gather(d.data(), n * sizeof(float), g.data());
      nccl.all_reduce_sum(static_cast<float*>(d.data()), n);
      nccl.broadcast(b.data(), n * sizeof(float), 1);
      nccl.synchronize();
      sum[r] = to_host<float>(d, n);
      gathered[r] = to_host<float>(g, 2 * n);
      broadcast[r] = to_host<float>(b, n);
    }
    SPARKGLM_CUDA_CHECK(cudaStreamDestroy(stream));
  });
  EXPECT_EQ(sum[0], want);  // two addends: the order cannot change a bit
  EXPECT_EQ(sum[1], sum[0]);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(std::equal(part[0].begin(), part[0].end(), gathered[r].begin())) << r;
    EXPECT_TRUE(std::equal(part[1].begin(), part[1].end(), gathered[r].begin() + n)) << r;
    EXPECT_EQ(broadcast[r], part[1]) << r;
  }
}

TEST(CudaNccl, APeerThatLeavesEndsTheWaitWithADeviceFault) {
  if (skip_unless_gpus(2)) GTEST_SKIP() << "needs two CUDA devices and NCCL";
  auto control = dist::SocketCommunicator::local_group(2);
  std::string failure;
  on_ranks(2, [&](int r) {
    cudaStream_t stream = nullptr;
    SPARKGLM_CUDA_CHECK(cudaStreamCreate(&stream));
    auto nccl = std::make_unique<NcclCommunicator>(*control[size_t(r)], r, stream, kTimeoutS);
    if (r == 1) {
      // Rank 1 never joins the all-reduce: it leaves, and its control connection closes.
      nccl.reset();
      control[1].reset();
    } else {
      DeviceBuffer d = to_device(std::vector<float>(4096, 1.0f));
      nccl->all_reduce_sum(static_cast<float*>(d.data()), 4096);
      try {
        nccl->synchronize();
        failure = "synchronize returned";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kDeviceFatal);
        failure = e.what();
      }
      nccl.reset();
    }
    cudaStreamDestroy(stream);  // the aborted collective may have left the stream in error
  });
  EXPECT_NE(failure.find("a peer rank is gone"), std::string::npos) << failure;
}

}  // namespace
}  // namespace sparkglm
