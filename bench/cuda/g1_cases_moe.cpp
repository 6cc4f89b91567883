// G1 rows for the MoE experts of a decode batch: the G1 model's routed experts (BF16, generated on
// the device with the dummy-weight function), top-k choices from cpu::select_experts, the shared
// expert, and the combine. Boundary: every token routed to the same top-k experts. Reference:
// cpu::swiglu_forward per (token, expert) with the clamp, combined in cpu::moe_forward's order.
#include <algorithm>
#include <cmath>
#include <map>

#include "bench/cuda/g1_expert_bank.h"
#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/expert_router.h"
#include "engine/backend/cpu/mlp.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "engine/backend/cuda/moe_experts.h"
#include "engine/core/dtype.h"
#include "engine/model/config.h"

namespace sparkglm::g1 {

namespace {

void run_rows(Harness& h, ExpertBank& bank, int64_t rows, bool tied) {
  const ModelConfig& config = h.model();
  const ExpertShape& geo = bank.shape;
  const auto xf = host_uniform("moe.x", rows * geo.hidden, 0.0f, 1.0f);
  const auto xb = to_bf16(xf);
  const auto x = from_bf16(xb);  // the values both sides multiply
  auto logits = host_uniform("moe.logits", rows * geo.experts, 0.0f, 4.0f);
  if (tied) std::fill(logits.begin(), logits.end(), 0.3f);
  const auto bias = host_uniform("moe.bias", geo.experts, 0.0f, 0.05f);
  std::vector<int32_t> experts(size_t(rows * geo.top_k));
  std::vector<float> weights(size_t(rows * geo.top_k));
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<cpu::ExpertChoice> ch(size_t(geo.top_k));
    cpu::select_experts(config, &logits[size_t(t * geo.experts)], tied ? nullptr : bias.data(),
                        ch.data());
    for (int r = 0; r < geo.top_k; ++r)
      experts[size_t(t * geo.top_k + r)] = ch[r].expert,
                                     weights[size_t(t * geo.top_k + r)] = ch[r].weight;
  }
  // Reference: per token, ranks in order, then the shared expert.
  std::vector<float> ref(size_t(rows * geo.hidden), 0.0f), y(static_cast<size_t>(geo.hidden));
  double distinct = 1;  // the shared expert
  std::map<int, int> used;
  for (int64_t t = 0; t < rows; ++t) {
    float* o = &ref[size_t(t * geo.hidden)];
    for (int r = 0; r < geo.top_k; ++r) {
      const int e = experts[size_t(t * geo.top_k + r)];
      if (e < 0) continue;
      used[e] = 1;
      cpu::swiglu_forward(bank.weights(e), &x[size_t(t * geo.hidden)], 1, y.data(), h.pool(),
                          config.swiglu_limit);
      for (int64_t d = 0; d < geo.hidden; ++d)
        o[d] += weights[size_t(t * geo.top_k + r)] * y[size_t(d)];
    }
    cpu::swiglu_forward(bank.weights(geo.experts), &x[size_t(t * geo.hidden)], 1, y.data(),
                        h.pool(), config.swiglu_limit);
    for (int64_t d = 0; d < geo.hidden; ++d) o[d] += y[size_t(d)];
  }
  distinct += double(used.size());

  auto d_x = upload(xb), d_e = upload(experts), d_w = upload(weights);
  auto d_h = device_alloc(size_t(rows * geo.top_k * geo.width * 2)),
       d_y = device_alloc(size_t(rows * geo.top_k * geo.hidden * 4));
  auto d_sgu = device_alloc(size_t(rows * 2 * geo.width * 4)),
       d_sh = device_alloc(size_t(rows * geo.width * 2));
  auto d_sy = device_alloc(size_t(rows * geo.hidden * 4)),
       d_out = device_alloc(size_t(rows * geo.hidden * 4));
  auto d_groups = device_alloc(size_t(cuda::moe_decode_group_ints(rows, geo.top_k)) * 4);
  cuda::MoeExpertArgs a;
  a.tokens = rows;
  a.top_k = geo.top_k;
  a.n_experts = geo.experts;
  a.groups = ptr<int32_t>(d_groups);
  a.hidden = geo.hidden;
  a.width = geo.width;
  a.clamp_limit = config.swiglu_limit;
  a.x = ptr<uint16_t>(d_x);
  a.experts = ptr<int32_t>(d_e);
  a.weights = ptr<float>(d_w);
  a.gate_up = ptr<const uint16_t*>(bank.ptrs);
  a.down = ptr<const uint16_t*>(bank.ptrs) + geo.experts;
  a.shared_gate_up = ptr<uint16_t>(bank.shared_gate_up);
  a.shared_down = ptr<uint16_t>(bank.shared_down);
  a.h = ptr<uint16_t>(d_h);
  a.y = ptr<float>(d_y);
  a.shared_gu = ptr<float>(d_sgu);
  a.shared_h = ptr<uint16_t>(d_sh);
  a.shared_y = ptr<float>(d_sy);
  a.out = ptr<float>(d_out);

  OperatorCase c;
  c.op = tied ? "moe.experts.one_expert_set" : "moe.experts";
  c.shape = std::to_string(rows) + " tokens, " + geo.text() + ", bf16";
  c.rows = rows;
  c.decode = !tied;
  // h enters the down projection as BF16 (2^-9 relative): about 1e-6 seen in practice.
  c.tolerance = 1e-5;
  c.bytes = distinct * double(geo.gate_up() + geo.down()) * 2 + double(rows * geo.hidden * 6);
  c.flops = double(rows) * (geo.top_k + 1) * 2.0 * double(geo.gate_up() + geo.down());
  c.note = "pairs grouped by expert (8 per group), one weight stream per group on tensor cores; " +
           std::to_string(used.size()) +
           " distinct routed experts; why under the HBM floor: each group's [2W, D] and "
           "[D, W] streams are GEMV-shaped (64 B of 16 rows per load instruction, the linear "
           "rows' pattern) and the three launches (gate/up, SwiGLU, down + combine) each ramp";
  c.launch = [a](cudaStream_t s) { cuda::moe_experts_decode(a, s); };
  c.outputs.push_back({"out", a.out, rows * geo.hidden, false, geo.hidden, ref, {}});
  c.keep = {d_x, d_e, d_w, d_h, d_y, d_sgu, d_sh, d_sy, d_out, d_groups};
  h.run(c);
}

}  // namespace

void run_moe_cases(Harness& h) {
  ExpertBank bank = make_expert_bank(ExpertShape::of(h.model()), 0xe0e0, h.stream());
  for (int r : kDecodeRows) run_rows(h, bank, r, false);
  run_rows(h, bank, 32, true);
}

}  // namespace sparkglm::g1
