// G1 rows for the MoE experts of a prefill chunk (cuda/moe_prefill.h): 512, 2048 and 8192 tokens,
// the G1 model's routed experts (BF16, generated on the device with the dummy-weight function)
// with top-k choices from cpu::select_experts, the shared expert, and the combine. The CPU
// reference (cpu::swiglu_forward with the clamp, combined in cpu::moe_forward's order) covers every
// token: grouped by expert it is compute bound, 9 SwiGLUs of 50 MFLOP per token (3.7 TFLOP at 8192
// tokens, a few seconds on 16 AVX-512 cores), plus one host copy of each expert (14.5 GB).
#include <algorithm>
#include <cmath>
#include <map>

#include "bench/cuda/g1_expert_bank.h"
#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/expert_router.h"
#include "engine/backend/cpu/mlp.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "engine/backend/cuda/moe_prefill.h"
#include "engine/core/dtype.h"
#include "engine/model/config.h"

namespace sparkglm::g1 {

namespace {

void run_rows(Harness& h, ExpertBank& bank, int64_t rows) {
  const ModelConfig& config = h.model();
  const ExpertShape& geo = bank.shape;
  const auto xb = to_bf16(host_uniform("moe_prefill.x", rows * geo.hidden, 0.0f, 1.0f));
  const auto x = from_bf16(xb);  // the values both sides multiply
  const auto logits = host_uniform("moe_prefill.logits", rows * geo.experts, 0.0f, 4.0f);
  const auto bias = host_uniform("moe_prefill.bias", geo.experts, 0.0f, 0.05f);
  std::vector<int32_t> experts(size_t(rows * geo.top_k));
  std::vector<float> weights(size_t(rows * geo.top_k));
  std::map<int, int> used;
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<cpu::ExpertChoice> ch(size_t(geo.top_k));
    cpu::select_experts(config, &logits[size_t(t * geo.experts)], bias.data(), ch.data());
    for (int r = 0; r < geo.top_k; ++r) {
      experts[size_t(t * geo.top_k + r)] = ch[r].expert,
                                     weights[size_t(t * geo.top_k + r)] = ch[r].weight;
      if (ch[r].expert >= 0) used[ch[r].expert] = 1;
    }
  }
  // Reference for every token, run grouped by expert (cpu::linear is batch invariant: a token's
  // result is the one it gets alone) so each expert's weights are read once. y: [token, rank, D],
  // rank top_k the shared expert. pairs: expert (geo.experts: shared) -> t * (top_k + 1) + rank.
  std::map<int, std::vector<int64_t>> pairs;
  for (int64_t t = 0; t < rows; ++t) {
    for (int r = 0; r < geo.top_k; ++r)
      if (experts[size_t(t * geo.top_k + r)] >= 0)
        pairs[experts[size_t(t * geo.top_k + r)]].push_back(t * (geo.top_k + 1) + r);
    pairs[geo.experts].push_back(t * (geo.top_k + 1) + geo.top_k);
  }
  std::vector<float> y(size_t(rows * (geo.top_k + 1) * geo.hidden));
  for (const auto& [e, list] : pairs) {
    const int64_t m = int64_t(list.size());
    std::vector<float> xs(size_t(m * geo.hidden)), ys(size_t(m * geo.hidden));
    for (int64_t j = 0; j < m; ++j)
      std::copy_n(&x[size_t(list[size_t(j)] / (geo.top_k + 1) * geo.hidden)], geo.hidden,
                  &xs[size_t(j * geo.hidden)]);
    cpu::swiglu_forward(bank.weights(e), xs.data(), m, ys.data(), h.pool(), config.swiglu_limit);
    for (int64_t j = 0; j < m; ++j)
      std::copy_n(&ys[size_t(j * geo.hidden)], geo.hidden,
                  &y[size_t(list[size_t(j)] * geo.hidden)]);
  }
  // Combine: ranks in order, then the shared expert.
  std::vector<float> ref(size_t(rows * geo.hidden), 0.0f);
  for (int64_t t = 0; t < rows; ++t) {
    float* o = &ref[size_t(t * geo.hidden)];
    for (int r = 0; r < geo.top_k; ++r) {
      if (experts[size_t(t * geo.top_k + r)] < 0) continue;
      const float* yr = &y[size_t((t * (geo.top_k + 1) + r) * geo.hidden)];
      for (int64_t d = 0; d < geo.hidden; ++d) o[d] += weights[size_t(t * geo.top_k + r)] * yr[d];
    }
    const float* ys = &y[size_t((t * (geo.top_k + 1) + geo.top_k) * geo.hidden)];
    for (int64_t d = 0; d < geo.hidden; ++d) o[d] = o[d] + ys[d];
  }

  auto d_x = upload(xb), d_e = upload(experts), d_w = upload(weights);
  // About 1.5 GB at 8192 tokens (the grouping, h and the down outputs), as in the runner.
  auto d_ws = device_alloc(
      cuda::moe_prefill_workspace_bytes(rows, geo.top_k, geo.experts, geo.hidden, geo.width));
  auto d_out = device_alloc(size_t(rows * geo.hidden * 4));
  cuda::MoePrefillArgs a;
  a.tokens = rows;
  a.top_k = geo.top_k;
  a.n_experts = geo.experts;
  a.hidden = geo.hidden;
  a.width = geo.width;
  a.clamp_limit = config.swiglu_limit;
  a.x = ptr<uint16_t>(d_x);
  a.experts = ptr<int32_t>(d_e);
  a.weights = ptr<float>(d_w);
  for (int e = 0; e < geo.experts; ++e) {
    a.gate_up.push_back(ptr<uint16_t>(bank.gate_up) + int64_t(e) * geo.gate_up());
    a.down.push_back(ptr<uint16_t>(bank.down) + int64_t(e) * geo.down());
  }
  a.shared_gate_up = ptr<uint16_t>(bank.shared_gate_up);
  a.shared_down = ptr<uint16_t>(bank.shared_down);
  a.workspace = d_ws->data();
  a.out = ptr<float>(d_out);

  OperatorCase c;
  c.op = "moe.experts_prefill";
  c.shape = std::to_string(rows) + " tokens, " + geo.text() + ", bf16";
  c.rows = rows;
  c.decode = false;
  // h enters the down projection as BF16 (2^-9 relative), as in the decode rows.
  c.tolerance = 1e-5;
  c.bytes = double(used.size() + 1) * double(geo.gate_up() + geo.down()) * 2 +
            double(rows * geo.hidden * 6);
  c.flops = double(rows) * (geo.top_k + 1) * 2.0 * double(geo.gate_up() + geo.down());
  c.note =
      "grouped by expert on the device; one grouped tensor-core GEMM launch per projection "
      "over the " +
      std::to_string(used.size()) +
      " routed groups and the shared expert, SwiGLU in the gate/up epilogue, no host "
      "synchronisation; reference on every token";
  cuda::Gemm* gemm = &h.gemm();
  c.launch = [a, gemm](cudaStream_t s) { cuda::moe_experts_prefill(a, *gemm, s); };
  c.outputs.push_back({"out", a.out, rows * geo.hidden, false, 0, ref, {}});
  c.keep = {d_x, d_e, d_w, d_ws, d_out};
  h.run(c);
}

}  // namespace

void run_moe_prefill_cases(Harness& h) {
  ExpertBank bank = make_expert_bank(ExpertShape::of(h.model()), 0xf0f0, h.stream());
  for (int r : kPrefillRows)
    if (!(h.quick() && r == 8192)) run_rows(h, bank, r);
}

}  // namespace sparkglm::g1
