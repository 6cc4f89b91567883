// G1 rows for the MoE router's expert choice and greedy sampling, with their boundary cases (all
// experts tied, NaN logits; tied maxima across the vocabulary).
#include <algorithm>
#include <cmath>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/expert_router.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/moe_router.h"
#include "engine/backend/cuda/sampling.h"
#include "engine/model/config.h"

namespace sparkglm::g1 {

namespace {

void run_router(Harness& h, int64_t rows, bool decode, const std::string& variant,
                std::vector<float> logits, const std::vector<float>& bias) {
  const ModelConfig& config = h.model();
  const int experts = config.n_routed_experts, top_k = config.num_experts_per_tok;
  auto d_logits = upload(logits), d_bias = upload(bias);
  auto d_experts = device_alloc(size_t(rows * top_k * 4)),
       d_weights = device_alloc(size_t(rows * top_k * 4));
  std::vector<float> ref_e(size_t(rows * top_k)), ref_w(size_t(rows * top_k));
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<cpu::ExpertChoice> out(static_cast<size_t>(top_k));
    cpu::select_experts(config, &logits[size_t(r * experts)], bias.data(), out.data());
    for (int i = 0; i < top_k; ++i) {
      ref_e[size_t(r * top_k + i)] = float(out[i].expert);
      ref_w[size_t(r * top_k + i)] = out[i].weight;
    }
  }
  OperatorCase c;
  c.op = "moe.router" + variant;
  c.shape = "logits[" + std::to_string(rows) + "," + std::to_string(experts) + "] f32, top-" +
            std::to_string(top_k);
  c.rows = rows;
  c.decode = decode;
  c.tolerance = 1e-12;  // expert ids must match exactly; weights to FP32 rounding
  c.bytes = double(rows * (experts * 4 + top_k * 8));
  c.flops = double(rows * experts) * 10;
  c.flops_on_tensor_cores = false;
  c.note = "sigmoid + bias, top-" + std::to_string(top_k) +
           " by (value desc, index asc), NaN never chosen; why under the floor: at decode a few "
           "KB, one launch's latency";
  const float *lp = ptr<float>(d_logits), *bp = ptr<float>(d_bias);
  int32_t* ep = ptr<int32_t>(d_experts);
  float* wp = ptr<float>(d_weights);
  const float scale = config.routed_scaling_factor;
  c.launch = [=](cudaStream_t s) {
    cuda::route_experts(lp, bp, rows, experts, top_k, true, scale, ep, wp, s);
  };
  c.outputs.push_back({"experts", ep, rows * top_k, true, top_k, ref_e, {}});
  c.outputs.push_back({"weights", wp, rows * top_k, false, top_k, ref_w, {}});
  c.keep = {d_logits, d_bias, d_experts, d_weights};
  h.run(c);
}

void run_greedy(Harness& h, int64_t rows, bool decode, const std::string& variant,
                const std::vector<float>& logits) {
  const int64_t vocab = h.model().vocab_size;
  auto d_logits = upload(logits), d_tokens = device_alloc(size_t(rows * 4));
  std::vector<float> ref(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = -1;
    for (int64_t i = 0; i < vocab; ++i) {
      const float v = logits[size_t(r * vocab + i)];
      if (std::isnan(v) || v == -INFINITY) continue;
      if (best < 0 || v > logits[size_t(r * vocab + best)]) best = i;
    }
    ref[size_t(r)] = float(best);
  }
  OperatorCase c;
  c.op = "sampling.greedy" + variant;
  c.shape = "logits[" + std::to_string(rows) + "," + std::to_string(vocab) + "] f32";
  c.rows = rows;
  c.decode = decode;
  c.tolerance = 0;
  c.bytes = double(rows * vocab * 4);
  c.flops = double(rows * vocab);
  c.flops_on_tensor_cores = false;
  c.note =
      "lowest id among the maxima; NaN as -inf; the runner's split form (up to 64 blocks a row, "
      "merged by a 64-bit atomicMax on an order-preserving key), plus a launch that hands out the "
      "tokens: two launches, latency-bound at these sizes";
  auto d_keys = device_alloc(size_t(rows) * sizeof(unsigned long long));
  SPARKGLM_CUDA_CHECK(cudaMemset(d_keys->data(), 0, d_keys->bytes()));
  const float* lp = ptr<float>(d_logits);
  int32_t* tp = ptr<int32_t>(d_tokens);
  auto* kp = static_cast<unsigned long long*>(d_keys->data());
  c.launch = [=](cudaStream_t s) { cuda::sample_greedy(lp, rows, vocab, tp, s, kp); };
  c.outputs.push_back({"token", tp, rows, true, 1, ref, {}});
  c.keep = {d_logits, d_tokens, d_keys};
  h.run(c);
}

}  // namespace

void run_router_and_sampling_cases(Harness& h) {
  const int experts = h.model().n_routed_experts;
  const int64_t vocab = h.model().vocab_size;
  const auto bias = host_uniform("router.bias", experts, 0.0f, 0.05f);
  std::vector<int> rows(std::begin(kDecodeRows), std::end(kDecodeRows));
  for (int r : kPrefillRows)
    if (!(h.quick() && r == 8192)) rows.push_back(r);
  for (int r : rows) {
    const auto logits = host_uniform("router.logits", int64_t(r) * experts, 0.0f, 4.0f);
    run_router(h, r, r <= 32, "", logits, bias);
  }
  // Boundary: every expert tied (the lowest top-k indices win), and NaN logits scattered in.
  {
    const int r = 64;
    std::vector<float> tied(size_t(r * experts), 0.25f);
    run_router(h, r, false, ".all_tied", tied, std::vector<float>(size_t(experts), 0.0f));
    auto with_nan = host_uniform("router.nan", int64_t(r) * experts, 0.0f, 4.0f);
    for (size_t i = 0; i < with_nan.size(); i += 5) with_nan[i] = NAN;
    run_router(h, r, false, ".nan", with_nan, bias);
  }
  for (int r : kDecodeRows) {
    auto logits = host_uniform("greedy.logits", int64_t(r) * vocab, 0.0f, 8.0f);
    run_greedy(h, r, true, "", logits);
  }
  {
    // Boundary: the maximum repeated at several ids (lowest wins), NaN and -inf logits around it.
    const int r = 8;
    auto logits = host_uniform("greedy.ties", int64_t(r) * vocab, 0.0f, 8.0f);
    for (int64_t row = 0; row < r; ++row) {
      float* x = &logits[size_t(row * vocab)];
      x[100 + row] = 20.0f;
      x[vocab - 1 - row] = 20.0f;
      x[7 + row] = NAN;
      x[50000] = INFINITY * -1.0f;
    }
    run_greedy(h, r, false, ".ties", logits);
  }
}

}  // namespace sparkglm::g1
