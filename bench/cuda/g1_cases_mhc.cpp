// G1 rows for hyper-connections: the layer site's pre step (mixes, Sinkhorn, stream sum), its
// post step (in place on the streams) and the final head reduction. Reference: cpu::hc_pre,
// cpu::hc_post and cpu::hc_head on the glm-5.3-flash config.
#include <algorithm>
#include <cmath>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/hyper_connections.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/mhc.h"
#include "engine/model/config.h"

namespace sparkglm::g1 {

namespace {

constexpr int kS = cuda::kHcStreams, kD = cuda::kHcWidth, kM = cuda::kHcMixes;
constexpr int64_t kN = int64_t(kS) * kD;

std::string shape_of(int64_t rows) {
  return "X[" + std::to_string(rows) + "," + std::to_string(kS) + "," + std::to_string(kD) +
         "] f32";
}

void run_rows(Harness& h, const ModelConfig& config, int64_t rows, bool decode) {
  const cuda::HcConstants k{config.rms_norm_eps, config.hc_eps, config.hc_sinkhorn_iters};
  const auto x = host_uniform("hc.x", rows * kN, 0.0f, 1.0f);
  const auto fn = host_uniform("hc.fn", int64_t(kM) * kN, 0.0f, 0.03f);
  const auto base = host_uniform("hc.base", kM, 0.0f, 0.5f);
  const auto scale = host_uniform("hc.scale", 3, 1.0f, 0.5f);
  const auto head_fn = host_uniform("hc.head_fn", int64_t(kS) * kN, 0.0f, 0.03f);
  const auto head_base = host_uniform("hc.head_base", kS, 0.0f, 0.5f);
  const auto b = host_uniform("hc.b", rows * kD, 0.0f, 1.0f);
  auto d_x = upload(x), d_x0 = upload(x), d_fn = upload(fn), d_base = upload(base);
  auto d_scale = upload(scale), d_hfn = upload(head_fn), d_hbase = upload(head_base);
  auto d_b = upload(b);
  auto d_y = device_alloc(size_t(rows * kD * 4)), d_post = device_alloc(size_t(rows * kS * 4));
  auto d_comb = device_alloc(size_t(rows * 16 * 4));
  // The engine's scratch: with it every row count takes the split (many blocks per row) form.
  auto d_part = device_alloc(size_t(cuda::hc_partials_floats(rows)) * 4);
  float* part = ptr<float>(d_part);

  std::vector<float> y(size_t(rows * kD)), post(size_t(rows * kS)), comb(size_t(rows * 16));
  cpu::hc_pre(config, HcSite{fn.data(), base.data(), scale.data()}, x.data(), rows, y.data(),
              post.data(), comb.data(), h.pool());
  {
    OperatorCase c;
    c.op = "mhc.pre";
    c.shape = shape_of(rows);
    c.rows = rows;
    c.decode = decode;
    c.tolerance = 1e-10;
    c.bytes = double(rows * kN * 4 + kM * kN * 4 + rows * (kD + kS + 16) * 4);
    c.flops = double(rows) * (2.0 * (kM + 1) * kN + 2.0 * kN);
    c.flops_on_tensor_cores = false;
    c.note = decode ? "split form: 32 blocks per row stream fn, partial sums added in slice order; "
                      "why under the floor: a decode row is ~0.2 MB, so two launches' latency"
                    : "split form at every row count (batch invariance: one order for decode and "
                      "prefill rows); fn is re-read from L2 by every row (a GEMM over rows with "
                      "the same slice order is the prefill fix)";
    const float *xp = ptr<float>(d_x), *fp = ptr<float>(d_fn), *bp = ptr<float>(d_base);
    const float* sp = ptr<float>(d_scale);
    float *yp = ptr<float>(d_y), *pp = ptr<float>(d_post), *cp = ptr<float>(d_comb);
    c.launch = [=](cudaStream_t st) {
      cuda::hc_pre(k, fp, bp, sp, xp, rows, yp, pp, cp, st, part);
    };
    c.outputs.push_back({"y", yp, rows * kD, false, kD, y, {}});
    c.outputs.push_back({"post", pp, rows * kS, false, kS, post, {}});
    c.outputs.push_back({"comb", cp, rows * 16, false, 16, comb, {}});
    h.run(c);
  }
  {
    // hc_post on the CPU's own post and comb, so this row checks the update alone.
    std::vector<float> xo(x);
    cpu::hc_post(config, xo.data(), b.data(), post.data(), comb.data(), rows, h.pool());
    auto d_post_ref = upload(post), d_comb_ref = upload(comb);
    OperatorCase c;
    c.op = "mhc.post";
    c.shape = shape_of(rows);
    c.rows = rows;
    c.decode = decode;
    c.tolerance = 1e-12;
    c.bytes = double(rows * kN * 8 + rows * kD * 4);
    c.flops = double(rows * kN) * 10.0;
    c.flops_on_tensor_cores = false;
    c.note = "16 column slices per row; why under the floor at decode rows: launch latency";
    float* xp = ptr<float>(d_x);
    const float* x0 = ptr<float>(d_x0);
    const float *bp = ptr<float>(d_b), *pp = ptr<float>(d_post_ref), *cp = ptr<float>(d_comb_ref);
    const size_t bytes = x.size() * 4;
    c.reset = [=](cudaStream_t st) {
      SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(xp, x0, bytes, cudaMemcpyDeviceToDevice, st));
    };
    c.launch = [=](cudaStream_t st) { cuda::hc_post(bp, pp, cp, xp, rows, st); };
    c.outputs.push_back({"X", xp, rows * kN, false, kN, xo, {}});
    c.keep = {d_post_ref, d_comb_ref};
    h.run(c);
    SPARKGLM_CUDA_CHECK(cudaMemcpy(xp, x0, bytes, cudaMemcpyDeviceToDevice));
  }
  {
    std::vector<float> hout(size_t(rows * kD));
    const float head_scale = scale[0];
    cpu::hc_head(config, HcHead{head_fn.data(), head_base.data(), &head_scale}, x.data(), rows,
                 hout.data(), h.pool());
    OperatorCase c;
    c.op = "mhc.head";
    c.shape = shape_of(rows);
    c.rows = rows;
    c.decode = decode;
    c.tolerance = 1e-10;
    c.bytes = double(rows * kN * 4 + kS * kN * 4 + rows * kD * 4);
    c.flops = double(rows) * 2.0 * (kS + 1) * kN;
    c.flops_on_tensor_cores = false;
    c.note = "why under the floor at decode rows: 256 KB a row, one launch's latency";
    const float *xp = ptr<float>(d_x), *fp = ptr<float>(d_hfn), *bp = ptr<float>(d_hbase);
    const float* sp = ptr<float>(d_scale);  // scale[0] is the head's single scale
    float* yp = ptr<float>(d_y);
    c.launch = [=](cudaStream_t st) { cuda::hc_head(k, fp, bp, sp, xp, rows, yp, st, part); };
    c.outputs.push_back({"h", yp, rows * kD, false, kD, hout, {}});
    h.run(c);
  }
}

}  // namespace

void run_mhc_cases(Harness& h) {
  const ModelConfig& config = h.model();  // its hc_mult and width are kS and kD (Harness checks)
  for (int r : kDecodeRows) run_rows(h, config, r, true);
  for (int r : kPrefillRows)
    if (!(h.quick() && r == 8192)) run_rows(h, config, r, false);
}

}  // namespace sparkglm::g1
