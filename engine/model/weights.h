#pragma once
// The model's weights, bound by name from a TensorSource and checked against the config. Every
// pointer refers either into the source (zero-copy for BF16/F32) or into `owned` (tensors the
// binder converted: FP32 vectors stored in BF16, dequantized FP8/FP4 matrices).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/model/config.h"
#include "engine/model/tensor_source.h"

namespace sparkglm {

// How a projection's elements are stored. The CPU binder turns every quantized checkpoint format
// into dense FP32 (kDense, dtype kF32); only the CUDA backend's DeviceWeights keeps the formats of
// MODEL.md section 7 as the checkpoint stores them, for kernels that dequantize in registers.
enum class LinearFormat : uint8_t {
  kDense,     // data: dtype (kBF16 or kF32) [rows, cols]
  kNvfp4,     // data: U8 [rows, cols/2], two E2M1 per byte, low nibble = even column;
              // scale: E4M3 [rows, cols/16]; global_scale: weight_scale_2
  kMxfp8,     // data: E4M3 [rows, cols]; scale: E8M0 [rows, cols/32]
  kFp8Block,  // data: E4M3 [rows, cols]; scale_inv: FP32 [ceil(rows/128), ceil(cols/128)]
};

// A projection stored as PyTorch stores nn.Linear: row-major [rows = out, cols = in].
// y = W x. Dense: dtype is kBF16 or kF32. Quantized (device weights only): dtype is kF8E4M3 or
// kU8 and the scale fields of `format` are set.
struct Linear {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  LinearFormat format = LinearFormat::kDense;
  const uint8_t* scale = nullptr;    // NVFP4 E4M3 or MXFP8 E8M0 block scales
  const float* scale_inv = nullptr;  // FP8 block scales
  float global_scale = 1.0f;         // NVFP4 weight_scale_2
  bool quantized() const { return format != LinearFormat::kDense; }
  const uint16_t* bf16() const { return static_cast<const uint16_t*>(data); }
  const float* f32() const { return static_cast<const float*>(data); }
  float at(int64_t r, int64_t c) const {  // for tests and references, not hot loops
    return dtype == DType::kBF16 ? bf16_to_f32(bf16()[r * cols + c]) : f32()[r * cols + c];
  }
};

struct HcSite {                  // one mHC site (MODEL.md section 2)
  const float* fn = nullptr;     // [hc_mix_count, hc_dim]
  const float* base = nullptr;   // [hc_mix_count]
  const float* scale = nullptr;  // [3]
};

struct HcHead {                  // the final stream reduction
  const float* fn = nullptr;     // [hc_mult, hc_dim]
  const float* base = nullptr;   // [hc_mult]
  const float* scale = nullptr;  // [1]
};

struct KdaWeights {                // MODEL.md section 3; H heads, K = V = head_dim, D = hidden
  Linear q_proj, k_proj, v_proj;   // [H*K, D]
  const float* q_conv = nullptr;   // [H*K, taps]: out[t] = sum_j w[c][j] * x[t - (taps-1) + j]
  const float* k_conv = nullptr;   // [H*K, taps]
  const float* v_conv = nullptr;   // [H*V, taps]
  Linear f_a, f_b;                 // [K, D], [H*K, K]
  const float* a_log = nullptr;    // [H]
  const float* dt_bias = nullptr;  // [H*K]
  Linear b_proj;                   // [H, D]
  Linear g_a, g_b;                 // [K, D], [H*V, K]
  const float* o_norm = nullptr;   // [V]
  Linear o_proj;                   // [D, H*V]
};

struct IndexerWeights {                  // MODEL.md section 4; I heads of width d_i
  Linear wq_b;                           // [I*d_i, q_lora_rank]
  Linear wk;                             // [d_i, D]
  const float* k_norm_weight = nullptr;  // [d_i]
  const float* k_norm_bias = nullptr;    // [d_i]
  Linear weights_proj;                   // [I, D]
  Linear kpool_gate;                     // [1, D]
  const float* kpool_ape = nullptr;      // [index_kpool]
};

struct MlaWeights {                  // MODEL.md section 4; H heads, nope dim dn, v dim dv
  Linear q_a;                        // [q_lora_rank, D]
  const float* q_a_norm = nullptr;   // [q_lora_rank]
  Linear q_b;                        // [H*dn, q_lora_rank]
  Linear kv_a;                       // [kv_lora_rank, D]
  const float* kv_a_norm = nullptr;  // [kv_lora_rank]
  Linear kv_b;    // [H*(dn+dv), kv_lora_rank]: per head dn rows of W_kb, then dv of W_vb
  Linear o_proj;  // [D, H*dv]
  IndexerWeights indexer;
};

struct SwiGluWeights {
  Linear gate, up;  // [width, D]
  Linear down;      // [D, width]
};

// The NVFP4 global scales a routed expert's activations are quantized with in spark mode
// (engine/model/precision_mode.h): its gate/up input, and its down input.
struct Fp4ActivationScales {
  float gate_up = 0.0f;
  float down = 0.0f;
};

struct MoeWeights {                     // MODEL.md section 5
  const float* router = nullptr;        // [E, D], FP32
  const float* score_bias = nullptr;    // [E]: e_score_correction_bias
  std::vector<SwiGluWeights> experts;   // E of width moe_intermediate_size
  std::optional<SwiGluWeights> shared;  // width moe_intermediate_size * n_shared_experts
  std::vector<Fp4ActivationScales> fp4_activations;  // [E] in spark mode; empty in strict
};

struct LayerWeights {
  LayerKind kind = LayerKind::kLinearAttention;
  bool dense_mlp = false;
  const float* input_norm = nullptr;      // [D]
  const float* post_attn_norm = nullptr;  // [D]
  HcSite hc_attn, hc_ffn;                 // unused by the MTP layer (plain residual)
  KdaWeights kda;                         // when kind is linear attention
  MlaWeights mla;                         // when kind is sparse attention
  SwiGluWeights mlp;                      // when dense_mlp
  MoeWeights moe;                         // otherwise
};

struct MtpWeights {                  // MODEL.md section 6
  const float* enorm = nullptr;      // [D]
  const float* hnorm = nullptr;      // [D]
  Linear eh_proj;                    // [D, 2D]: input is [enorm(embed) ; hnorm(h)]
  const float* head_norm = nullptr;  // [D]: shared_head.norm
  LayerWeights layer;                // MLA + MoE
};

struct ModelWeights {
  Linear embed;                       // [vocab, D]
  const float* final_norm = nullptr;  // [D]
  Linear lm_head;                     // [vocab, D]
  HcHead hc_head;
  std::vector<LayerWeights> layers;
  std::optional<MtpWeights> mtp;
  std::string identity;                        // the source's identity
  std::shared_ptr<const TensorSource> source;  // keeps zero-copy tensors alive
  std::vector<std::vector<float>> owned;  // converted tensors; moving a vector keeps its buffer

  // How bind treats a projection stored quantized (F8_E4M3 or U8, weight_formats.h):
  //   kDequantize  dense FP32 in `owned` (the CPU backend)
  //   kKeep        a Linear of its LinearFormat pointing at the stored bytes and scales, with
  //                global_scale read from weight_scale_2 (the source must hold that scalar in
  //                host memory; the element and scale bytes are never read): DeviceWeights
  enum class Quantized { kDequantize, kKeep };

  // Binds every tensor of checkpoint_tensors(config). A missing tensor, an unknown tensor, a
  // shape that does not match the config, or a dtype that cannot serve a role is an
  // Error(kInvalidCheckpoint) naming the tensor.
  static ModelWeights bind(const ModelConfig& config, std::shared_ptr<const TensorSource> source,
                           Quantized quantized = Quantized::kDequantize);
};

}  // namespace sparkglm
