// The KDA attention block of the CUDA runner (MODEL.md section 3; cpu::kda_layer_forward): the
// projections over every row, then the recurrence per group of rows (all decode rows as one batch
// of one-row sequences, or a verify step's decode rows slice by slice in one set of launches
// (kda_verify_slices); each prefill chunk as one sequence), then the gated output and W_o.
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/kda.h"
#include "engine/backend/cuda/kda_chunked.h"
#include "engine/backend/cuda/norms.h"
#include "engine/backend/cuda/projection.h"

namespace sparkglm::cuda {

void CudaModelRunner::kda_block(int kda_index, const KdaWeights& w, float* out) {
  const int64_t T = step_->rows(), D = config_.hidden_size;
  const int H = config_.kda.num_heads, K = config_.kda.head_dim;
  const int64_t HK = int64_t(H) * K;
  const uint16_t* x = ws_.normed_bf16;
  profile_.mark("kda.proj", stream_);
  // q_proj, k_proj and v_proj sit back to back in the arena (checkpoint order, elements and
  // scales): one [3*H*K, D] product streams all three. The products of x go in one group (one
  // launch for tinyglm-micro's decode rows, projection.h), then the two low-rank factors' second
  // halves.
  const DequantWorkspace dq = weights_->dequant_workspace();
  const int64_t dec = step_->decode_rows();
  float* f_low = ws_.low;
  float* g_low = ws_.low + T * K;  // ws_.low holds both: [2][T, K]
  const uint16_t* f_low_bf16 = ws_.low_bf16;
  const uint16_t* g_low_bf16 = ws_.low_bf16 + T * K;
  const ProjectionPart f_a{&w.f_a, x, f_low}, g_a{&w.g_a, x, g_low}, b{&w.b_proj, x, ws_.b_logit};
  if (options_.precision_mode != PrecisionMode::kSpark) {
    const Linear qkv = fused({&w.q_proj, &w.k_proj, &w.v_proj}, "KDA q/k/v");
    SPARKGLM_ASSERT(qkv.rows == 3 * HK && qkv.cols == D, "KDA q/k/v: [3*H*K, D]");
    project_step_group(gemm_, dq, {{&qkv, x, ws_.raw_q}, f_a, g_a, b}, dec, T, stream_);
  } else {
    // Spark converted q, k and v each with its own NVFP4 global scale (precision_mode.h), so
    // they cannot share one product: each goes through ws_.f (free until f_b below) into its
    // third of the [T, 3*H*K] rows.
    const Linear* parts[3] = {&w.q_proj, &w.k_proj, &w.v_proj};
    for (int i = 0; i < 3; ++i) {
      project_step(gemm_, dq, *parts[i], x, dec, T, ws_.f, stream_);  // [T, H*K]
      SPARKGLM_CUDA_CHECK(cudaMemcpy2DAsync(ws_.raw_q + i * HK, 3 * HK * sizeof(float), ws_.f,
                                            HK * sizeof(float), HK * sizeof(float), size_t(T),
                                            cudaMemcpyDeviceToDevice, stream_));
    }
    project_step_group(gemm_, dq, {f_a, g_a, b}, dec, T, stream_);
  }
  cast_f32_to_bf16(ws_.low, 2 * T * K, ws_.low_bf16, stream_);  // both factors' [T, K]
  project_step_group(gemm_, dq, {{&w.f_b, f_low_bf16, ws_.f}, {&w.g_b, g_low_bf16, ws_.gate}}, dec,
                     T, stream_);  // [T, H*K] each

  // The three conv weights sit back to back in the arena: kda_prepare's [3][H*K, taps] operand.
  const int64_t conv_w = HK * kKdaTaps;
  SPARKGLM_ASSERT(w.k_conv == w.q_conv + conv_w && w.v_conv == w.k_conv + conv_w,
                  "device weights: q/k/v conv weights must be contiguous");
  const int64_t slots = options_.num_state_slots;
  float* state = caches_.kda_state + kda_index * slots * HK * K;  // slot 0 of this layer
  float* conv = caches_.kda_conv + kda_index * slots * 3 * (kKdaTaps - 1) * HK;

  // The prepare's arguments for rows from `r` on.
  auto prepare_args = [&](int64_t r) {
    KdaPrepareArgs a;
    a.raw_q = ws_.raw_q + r * 3 * HK;
    a.raw_k = ws_.raw_k + r * 3 * HK;
    a.raw_v = ws_.raw_v + r * 3 * HK;
    a.raw_stride = 3 * HK;
    a.f = ws_.f + r * HK;
    a.b_logit = ws_.b_logit + r * H;
    a.conv_w = w.q_conv;
    a.conv_hist = conv;
    a.a_log = w.a_log;
    a.dt_bias = w.dt_bias;
    a.gate_lower_bound = config_.kda.gate_lower_bound;
    a.q = ws_.q + r * HK;
    a.k = ws_.k + r * HK;
    a.v = ws_.v + r * HK;
    a.decay = ws_.decay + r * HK;
    a.beta = ws_.beta + r * H;
    return a;
  };
  // Decode rows run the token-by-token recurrence, prompt pieces (one-row pieces too) the chunked
  // form on the absolute 64-row grid, as on the CPU: a row's path never depends on how the
  // scheduler cut its prompt. (At K = 32 every row runs the recurrence, also cut-independent.)
  auto run_group = [&](int first_row, int num_seqs, int rows_per_seq, int seq_index, int start,
                       bool decode) {
    KdaBatch b;
    b.num_seqs = num_seqs;
    b.rows_per_seq = rows_per_seq;
    b.heads = H;
    b.slots = step_->slots() + seq_index;
    b.head_dim = K;
    const int64_t r = first_row;
    const KdaPrepareArgs a = prepare_args(r);
    kda_prepare(b, a, stream_);
    kda_advance_conv_history(b, a.raw_q, a.raw_k, a.raw_v, conv, stream_, a.raw_stride);
    // The chunked form is specialised to K = 128: at tinyglm-micro's K = 32 prompt pieces take the
    // token-by-token recurrence too, one tiling for every row count (kda.h).
    if (decode || K != kKdaHeadDim) {
      kda_recurrent(b, a.q, a.k, a.v, a.decay, a.beta, state, ws_.o + r * HK, stream_);
    } else {
      kda_chunked_prefill(b, start, a.q, a.k, a.v, a.decay, a.beta, state, ws_.o + r * HK, stream_);
    }
  };
  profile_.mark("kda.recur", stream_);
  // Decode rows: one batch, or in a verify step slice by slice in one set of launches (each
  // slice's rows in order inside the kernels, which keep the KDA state records it asks for).
  if (step_->slices() > 0) {
    KdaBatch b;
    b.num_seqs = step_->slices();
    b.rows_per_seq = step_->longest_slice();
    b.heads = H;
    b.slots = step_->slice_slots();
    b.head_dim = K;
    b.slice_rows = step_->slice_rows();
    b.slice_first = step_->slice_first();
    KdaRowRecords records;
    records.after = step_->record_after();
    records.before = step_->record_before();
    records.records = caches_.records;
    if (caches_.records > 0) {
      records.record_state = caches_.record_state + kda_index * slots * caches_.records * HK * K;
      records.record_conv =
          caches_.record_conv + kda_index * slots * caches_.records * 3 * (kKdaTaps - 1) * HK;
    }
    kda_verify_slices(b, prepare_args(0), conv, state, ws_.o, records, stream_);
  } else {
    for (const StepGroup& g : step_->layout().decode_groups())
      run_group(g.first_row, g.rows, 1, g.first_row, 0, true);
  }
  for (const StepSequence& s : step_->seqs())
    if (!s.decode) run_group(s.first_row, 1, s.rows, s.index, s.start, false);

  profile_.mark("kda.out", stream_);
  KdaBatch all;
  all.num_seqs = int(T);
  all.rows_per_seq = 1;
  all.heads = H;
  all.head_dim = K;
  kda_output_gate(all, ws_.o, ws_.gate, w.o_norm, config_.rms_norm_eps, ws_.raw_q, ws_.o_bf16,
                  stream_);
  project_step(gemm_, dq, w.o_proj, ws_.o_bf16, dec, T, out, stream_);  // [T, D]
}

}  // namespace sparkglm::cuda
