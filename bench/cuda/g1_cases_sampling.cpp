// G1 rows for seeded top-k / top-p / min-p sampling on the device (cuda/sampling_topk_topp.h),
// against runtime/sampler.h's SequenceSampler on the same logits, seed and draw index: the token
// must be the CPU's exactly, not merely one of the kept set. Each row of a batch has its own seed,
// draw index and (in the .mixed rows) its own filters; rows depend only on their index, so the
// decode batches are checked against the 32-row batch bit for bit.
#include <cmath>
#include <functional>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cuda/sampling_topk_topp.h"
#include "engine/runtime/sampler.h"

namespace sparkglm::g1 {

namespace {

using ParamsOf = std::function<cuda::SampleParams(int64_t row)>;

cuda::SampleParams seeded(int64_t row, float t, int32_t k, float p, float min_p) {
  cuda::SampleParams s;
  s.temperature = t;
  s.top_k = k;
  s.top_p = p;
  s.min_p = min_p;
  s.seed = 0x5eed0000ull + uint64_t(row) * 7919u;
  s.index = uint64_t(row % 5);
  return s;
}

void run_case(Harness& h, const std::string& variant, int64_t rows, bool decode,
              const std::vector<float>& logits, const ParamsOf& params_of,
              const std::string& note) {
  const int64_t vocab = h.model().vocab_size;
  std::vector<cuda::SampleParams> params(static_cast<size_t>(rows));
  std::vector<float> ref(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    params[size_t(r)] = params_of(r);
    ref[size_t(r)] =
        float(cuda::cpu_sampler_token(params[size_t(r)], &logits[size_t(r * vocab)], vocab));
  }
  auto d_logits = upload(logits), d_params = upload(params);
  auto d_scratch = device_alloc(cuda::sample_scratch_bytes(rows, vocab));
  auto d_tokens = device_alloc(size_t(rows * 4));
  OperatorCase c;
  c.op = "sampling.seeded" + variant;
  c.shape = "logits[" + std::to_string(rows) + "," + std::to_string(vocab) + "] f32";
  c.rows = rows;
  c.decode = decode;
  c.tolerance = 0;  // the CPU sampler's token exactly
  c.bytes = double(rows * vocab * 4);
  // About 20 passes over the vocab (max, weights, 2 x 8 radix passes, mask, block sums).
  c.flops = double(rows * vocab) * 60;
  c.flops_on_tensor_cores = false;
  c.note = note +
           "; why under the floor: one 512-thread block per row makes ~20 passes over the "
           "vocabulary (two 8-pass radix descents), latency-bound and the same for 1 and 32 rows";
  const float* lp = ptr<float>(d_logits);
  const cuda::SampleParams* pp = ptr<cuda::SampleParams>(d_params);
  void* sp = d_scratch->data();
  int32_t* tp = ptr<int32_t>(d_tokens);
  c.launch = [=](cudaStream_t s) { cuda::sample_top_k_top_p(lp, rows, vocab, pp, sp, tp, s); };
  c.outputs.push_back({"token", tp, rows, true, 1, ref, {}});
  c.keep = {d_logits, d_params, d_scratch, d_tokens};
  h.run(c);
}

}  // namespace

void run_sampling_cases(Harness& h) {
  const int64_t vocab = h.model().vocab_size;
  struct Variant {
    std::string name;
    ParamsOf params_of;
    std::string note;
  };
  const Variant variants[] = {
      {".top_k", [](int64_t r) { return seeded(r, 1.0f, 50, 1.0f, 0.0f); },
       "T 1, top_k 50; per-row seed and draw index; token equals runtime/sampler's"},
      {".top_p", [](int64_t r) { return seeded(r, 0.8f, 0, 0.9f, 0.0f); },
       "T 0.8, top_p 0.9 over the whole vocab; token equals runtime/sampler's"},
      {".top_k_top_p_min_p", [](int64_t r) { return seeded(r, 1.2f, 400, 0.95f, 0.02f); },
       "T 1.2, top_k 400, top_p 0.95, min_p 0.02; token equals runtime/sampler's"},
      {".mixed",
       [vocab](int64_t r) {
         const float ts[] = {0.0f, 0.6f, 1.0f, 1.5f};
         const int32_t ks[] = {0, 1, 20, 2000, int32_t(vocab)};
         const float ps[] = {1.0f, 0.5f, 0.99f};
         const float mins[] = {0.0f, 0.1f};
         return seeded(r, ts[r % 4], ks[r % 5], ps[r % 3], mins[r % 2]);
       },
       "every row its own T (incl. 0 = greedy), top_k (incl. 1 and vocab), top_p, min_p"},
  };
  for (const Variant& v : variants)
    for (int r : kDecodeRows) {
      // Logits over 16 nats, so that every filter removes tokens and the rest stay in play.
      const auto logits = host_uniform("sampling.logits", int64_t(r) * vocab, 0.0f, 8.0f);
      run_case(h, v.name, r, true, logits, v.params_of, v.note);
    }
  {
    // Boundary: tied weights across the top-k and top-p cuts (ties go to the lower id), NaN and
    // -inf logits, a +inf logit (it takes all the mass), and a peaked row where top_p keeps one.
    const int r = 8;
    auto logits = host_uniform("sampling.ties", int64_t(r) * vocab, 0.0f, 8.0f);
    for (int64_t row = 0; row < r; ++row) {
      float* x = &logits[size_t(row * vocab)];
      for (int64_t i = 0; i < 64; ++i) x[1000 + 997 * i] = 9.0f;  // 64 tied maxima
      for (int64_t i = 0; i < vocab; i += 7) x[i] = NAN;
      for (int64_t i = 3; i < vocab; i += 11) x[i] = -INFINITY;
      if (row == 6) x[vocab - 1] = INFINITY;
      if (row == 7) x[12345] = 40.0f;
    }
    run_case(
        h, ".ties_nan_inf", r, false, logits,
        [](int64_t row) {
          return seeded(row, 1.0f, row % 2 ? 20 : 0, row % 3 ? 0.3f : 1.0f, row == 5 ? 0.5f : 0.0f);
        },
        "64 tied maxima cut by top_k 20 / top_p 0.3 (lower ids win), NaN, -inf, +inf, "
        "one peaked row");
  }
}

}  // namespace sparkglm::g1
