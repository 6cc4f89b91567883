// The shared expert beside the routed ones (moe_experts.h: moe_shared_expert_beside): the MoE's
// output carries the bits of the serial path, eagerly and replayed from a graph, and the combine
// waits for the side stream even when the side stream is held back (a host callback that sleeps
// before the shared expert's launches, so a combine that did not wait would read stale values).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/moe_experts.h"
#include "engine/core/dtype.h"
#include "tests/cuda/cuda_test_support.h"
#include "tests/cuda/moe_decode_workspace.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;
using cuda_test::to_device;
using cuda_test::to_host;
using cuda_test::uniform;

constexpr int64_t kD = 256, kW = 128, kT = 3;  // tinyglm-micro's widths, a verify slice's rows
constexpr int kE = 8, kK = 4;

std::vector<uint16_t> bf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
  return b;
}

// Experts, a shared expert, a routing and the workspaces, all on the device.
struct Moe {
  std::vector<cuda::DeviceBuffer> gate_up, down;
  cuda::DeviceBuffer gate_up_ptrs, down_ptrs, shared_gate_up, shared_down, x, experts, weights;
  cuda_test::MoeDecodeWorkspace ws{kT, kK, kD, kW};
  Moe() {
    std::vector<const uint16_t*> gu_ptrs, d_ptrs;
    for (int e = 0; e < kE; ++e) {
      gate_up.push_back(to_device(bf16(uniform(100 + e, size_t(2 * kW * kD), 0.0f, 0.05f))));
      down.push_back(to_device(bf16(uniform(200 + e, size_t(kD * kW), 0.0f, 0.05f))));
      gu_ptrs.push_back(static_cast<const uint16_t*>(gate_up.back().data()));
      d_ptrs.push_back(static_cast<const uint16_t*>(down.back().data()));
    }
    gate_up_ptrs = to_device(gu_ptrs);
    down_ptrs = to_device(d_ptrs);
    shared_gate_up = to_device(bf16(uniform(300, size_t(2 * kW * kD), 0.0f, 0.05f)));
    shared_down = to_device(bf16(uniform(301, size_t(kD * kW), 0.0f, 0.05f)));
    x = to_device(bf16(uniform(302, size_t(kT * kD), 0.0f, 1.0f)));
    std::vector<int32_t> ex;
    std::vector<float> w;
    for (int64_t t = 0; t < kT; ++t)
      for (int r = 0; r < kK; ++r) {
        ex.push_back(int32_t((t + 3 * r) % kE));
        w.push_back(0.1f + 0.05f * float(r));
      }
    experts = to_device(ex);
    weights = to_device(w);
  }
  cuda::MoeExpertArgs args() const {
    cuda::MoeExpertArgs a;
    a.tokens = kT;
    a.top_k = kK;
    a.n_experts = kE;
    a.hidden = kD;
    a.width = kW;
    a.clamp_limit = 7.0f;
    a.x = static_cast<const uint16_t*>(x.data());
    a.experts = static_cast<const int32_t*>(experts.data());
    a.weights = static_cast<const float*>(weights.data());
    a.gate_up = static_cast<const uint16_t* const*>(gate_up_ptrs.data());
    a.down = static_cast<const uint16_t* const*>(down_ptrs.data());
    a.shared_gate_up = static_cast<const uint16_t*>(shared_gate_up.data());
    a.shared_down = static_cast<const uint16_t*>(shared_down.data());
    ws.fill(a);
    return a;
  }
  // Clears what both paths write, the shared expert's output to NaN.
  void clear() {
    SPARKGLM_CUDA_CHECK(cudaMemset(ws.out.data(), 0, ws.out.bytes()));
    SPARKGLM_CUDA_CHECK(cudaMemset(ws.shared_y.data(), 0xff, ws.shared_y.bytes()));
    SPARKGLM_CUDA_CHECK(cudaDeviceSynchronize());
  }
};

void hold_back(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

struct Streams {
  cudaStream_t main = nullptr;
  cuda::StreamBranch side;
  Streams() { SPARKGLM_CUDA_CHECK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking)); }
  ~Streams() { cudaStreamDestroy(main); }
  // The shared expert beside (the side stream held back first when `slow`), then the routed
  // experts and the combine on main.
  void beside(const cuda::MoeExpertArgs& args, bool slow) {
    if (slow) SPARKGLM_CUDA_CHECK(cudaLaunchHostFunc(side.stream(), hold_back, nullptr));
    cuda::moe_shared_expert_beside(args, main, side);
    cuda::MoeExpertArgs a = args;
    a.shared_done = side.closed();
    cuda::moe_experts_decode(a, main);
  }
};

TEST(CudaMoeSharedBeside, TheSharedExpertBesideGivesTheSerialBitsAndIsWaitedFor) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  Moe moe;
  Streams s;
  const size_t n = size_t(kT * kD);
  moe.clear();
  cuda::moe_experts_decode(moe.args(), s.main);
  const std::vector<float> serial = to_host<float>(moe.ws.out, n);
  for (float v : serial) ASSERT_TRUE(std::isfinite(v));

  for (bool slow : {false, true}) {
    SCOPED_TRACE(slow ? "side stream held back" : "side stream free");
    moe.clear();
    s.beside(moe.args(), slow);
    EXPECT_EQ(to_host<float>(moe.ws.out, n), serial) << "eager";
  }

  // Captured on main (the side stream joins the capture through the fork), then replayed.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  SPARKGLM_CUDA_CHECK(cudaStreamBeginCapture(s.main, cudaStreamCaptureModeThreadLocal));
  s.beside(moe.args(), false);
  SPARKGLM_CUDA_CHECK(cudaStreamEndCapture(s.main, &graph));
  SPARKGLM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 2; ++rep) {
    moe.clear();
    SPARKGLM_CUDA_CHECK(cudaGraphLaunch(exec, s.main));
    SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(s.main));
    EXPECT_EQ(to_host<float>(moe.ws.out, n), serial) << "graph replay " << rep;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace
}  // namespace sparkglm
