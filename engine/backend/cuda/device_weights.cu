#include "engine/backend/cuda/device_weights.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_quantizer.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "engine/core/error.h"
#include "engine/model/precision_mode.h"
#include "engine/model/tensor_layout.h"
#include "engine/model/weight_formats.h"
#include "tinyglm/dummy_hash.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm::cuda {

namespace {

constexpr size_t kAlign = 256;      // BF16/FP32 tensors, and each section
constexpr size_t kQuantAlign = 16;  // quantized elements: what quantized_gemv's loads need
constexpr size_t kStagingBytes = size_t(64) << 20;  // each of the two pinned upload buffers

size_t align_up(size_t bytes, size_t a) {
  return (bytes + a - 1) / a * a;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string stem_of(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string(".weight").size());
}

int64_t rows_of(const TensorSpec& s) {
  return s.shape.at(0);
}
int64_t cols_of(const TensorSpec& s) {
  return s.shape.at(1);
}

// One tensor's place in the arena and what the binder is told about it.
struct ArenaEntry {
  TensorSpec spec;
  WeightFormat stored = WeightFormat::kAsLaidOut;  // as the checkpoint (or the preset) stores it
  WeightFormat kept = WeightFormat::kAsLaidOut;    // as the arena keeps it
  size_t data = 0, data_bytes = 0;                 // elements
  size_t scale = 0, scale_bytes = 0;               // E4M3/E8M0 scales or FP32 scale_inv
  float global_scale = 1.0f;                       // NVFP4 weight_scale_2
  std::optional<float> input_scale;                // kept beside the weight when stored
  bool convert = false;  // spark converts it (kept NVFP4, written from a scratch copy)
};

size_t element_bytes(const TensorSpec& s, WeightFormat f) {
  const size_t n = size_t(s.numel());
  if (f == WeightFormat::kAsLaidOut) return n * size_t(dtype_size(s.dtype));
  return f == WeightFormat::kNvfp4 ? n / 2 : n;
}

size_t scale_bytes(const TensorSpec& s, WeightFormat f) {
  const size_t n = size_t(s.numel());
  if (f == WeightFormat::kNvfp4) return n / 16;
  if (f == WeightFormat::kMxfp8) return n / 32;
  if (f == WeightFormat::kFp8Block)
    return 4 * size_t((rows_of(s) + 127) / 128) * size_t((cols_of(s) + 127) / 128);
  return 0;
}

// A scale tensor's alignment: its element size, and 2 bytes for NVFP4's E4M3 scales (what the
// MoE kernels' paired loads need, moe_quant_table.h). The scales of parts stored back to back
// still follow one another whenever the earlier part's scale bytes are a multiple of it.
size_t scale_align(WeightFormat f) {
  return f == WeightFormat::kFp8Block ? sizeof(float) : (f == WeightFormat::kNvfp4 ? 2 : 1);
}

// MLA's kv_b is read per head as BF16 by the absorption kernels: the arena keeps it dense.
bool kept_dense(const TensorSpec& s) {
  return ends_with(s.name, "self_attn.kv_b_proj.weight");
}

// The dense path's projections the workspace must hold, fused operands whole: everything
// quantized but the routed experts (MoE kernels) and the LM head (decode rows only).
int64_t workspace_elems(const ArenaEntry& e) {
  if (e.kept == WeightFormat::kAsLaidOut || e.spec.name == "lm_head.weight" ||
      e.spec.name.find(".mlp.experts.") != std::string::npos)
    return 0;
  const int64_t parts = ends_with(e.spec.name, "self_attn.q_proj.weight") ? 3
                        : ends_with(e.spec.name, "gate_proj.weight")      ? 2
                                                                          : 1;
  return parts * e.spec.numel();
}

struct ArenaLayout {
  std::vector<ArenaEntry> entries;
  size_t workspace = 0;  // offset of the BF16 workspace
  int64_t workspace_elems = 0;
  size_t bytes = 0;
};

// The one walk: entries come with their stored format (and scalars) already set. Spark keeps the
// projections it converts in NVFP4, whatever they are stored in.
ArenaLayout lay_out(const ModelConfig& config, std::vector<ArenaEntry> entries,
                    PrecisionMode mode) {
  ArenaLayout l;
  size_t off = 0;
  for (ArenaEntry& e : entries) {
    e.kept = kept_dense(e.spec) ? WeightFormat::kAsLaidOut : e.stored;
    e.convert = mode == PrecisionMode::kSpark && spark_converts(config, e.spec.name);
    if (e.convert) e.kept = WeightFormat::kNvfp4;
    off = align_up(off, e.kept == WeightFormat::kAsLaidOut ? kAlign : kQuantAlign);
    e.data = off;
    e.data_bytes = element_bytes(e.spec, e.kept);
    off += e.data_bytes;
  }
  off = align_up(off, kAlign);
  for (ArenaEntry& e : entries) {
    if (e.kept == WeightFormat::kAsLaidOut) continue;
    off = align_up(off, scale_align(e.kept));
    e.scale = off;
    e.scale_bytes = scale_bytes(e.spec, e.kept);
    off += e.scale_bytes;
    l.workspace_elems = std::max(l.workspace_elems, workspace_elems(e));
  }
  l.workspace = align_up(off, kAlign);
  l.bytes = l.workspace + size_t(l.workspace_elems) * sizeof(uint16_t);
  l.entries = std::move(entries);
  return l;
}

ArenaLayout preset_layout(const ModelConfig& config, CheckpointFormat format, PrecisionMode mode) {
  std::vector<ArenaEntry> entries;
  for (const TensorSpec& s : checkpoint_tensors(config)) {
    ArenaEntry e;
    e.spec = s;
    e.stored = weight_format(config, s, format);
    if (e.stored == WeightFormat::kNvfp4) e.input_scale = routed_expert_input_scale(config, s.name);
    entries.push_back(std::move(e));
  }
  return lay_out(config, std::move(entries), mode);
}

[[noreturn]] void unsupported(const std::string& name, const std::string& what) {
  throw Error(ErrorKind::kUnsupported, "tensor `" + name + "`: " + what);
}

// The stored format of every tensor of `host`, checked (shapes, scales, what the kernels read)
// without reading an element.
ArenaLayout checkpoint_layout(const ModelConfig& config, const TensorSource& host,
                              PrecisionMode mode) {
  std::vector<ArenaEntry> entries;
  std::map<std::string, bool> known;
  for (const TensorSpec& s : checkpoint_tensors(config)) {
    const auto view = host.find(s.name);
    if (!view) throw Error(ErrorKind::kInvalidCheckpoint, "tensor `" + s.name + "`: missing");
    known[s.name] = true;
    ArenaEntry e;
    e.spec = s;
    const bool quantized = view->dtype == DType::kF8E4M3 || view->dtype == DType::kU8;
    if (!quantized) {
      if (mode == PrecisionMode::kSpark && spark_converts(config, s.name) && s.shape[1] % 16 != 0)
        unsupported(s.name, "--precision-mode spark cannot convert it to NVFP4 (cols " +
                                std::to_string(s.shape[1]) + " not a multiple of 16)");
      if (view->dtype != s.dtype || view->shape != s.shape)
        unsupported(s.name, "stored as " + std::string(dtype_name(view->dtype)) + " " +
                                shape_string(view->shape) + "; the CUDA backend loads " +
                                std::string(dtype_name(s.dtype)) + " " + shape_string(s.shape) +
                                " or, for a projection, MXFP8, FP8 block or NVFP4");
      entries.push_back(std::move(e));
      continue;
    }
    const bool projection = s.dtype == DType::kBF16 && s.shape.size() == 2;
    if (!projection || s.name == "model.embed_tokens.weight")
      unsupported(s.name, "stored as " + std::string(dtype_name(view->dtype)) +
                              "; the CUDA backend keeps only projections quantized (this "
                              "tensor is read as " +
                              std::string(dtype_name(s.dtype)) + ")");
    const Linear l = stored_linear(host, s.name, rows_of(s), cols_of(s));  // checks the scales
    if (l.cols % 16 != 0)
      unsupported(s.name, "the CUDA kernels read quantized rows in chunks of 16 values; cols " +
                              std::to_string(l.cols));
    e.stored = l.format == LinearFormat::kNvfp4   ? WeightFormat::kNvfp4
               : l.format == LinearFormat::kMxfp8 ? WeightFormat::kMxfp8
                                                  : WeightFormat::kFp8Block;
    e.global_scale = l.global_scale;
    const std::string stem = stem_of(s.name);
    for (const char* aux : {".weight_scale", ".weight_scale_inv", ".weight_scale_2"})
      if (host.find(stem + aux)) known[stem + aux] = true;
    if (const auto in = host.find(stem + ".input_scale")) {  // checked by stored_linear
      float v;
      std::memcpy(&v, in->data, sizeof(v));
      e.input_scale = v;
      known[stem + ".input_scale"] = true;
    }
    entries.push_back(std::move(e));
  }
  for (const std::string& name : host.names())
    if (!known.count(name))
      throw Error(ErrorKind::kInvalidCheckpoint,
                  "tensor `" + name + "`: unknown to this config (no layer of the model uses it)");
  return lay_out(config, std::move(entries), mode);
}

// Tensors that live in the arena, found by name: what ModelWeights::bind reads (shapes, dtypes,
// pointers) without ever touching the device bytes behind them. The FP32 scalars beside a
// quantized weight (weight_scale_2, input_scale) are host values: bind reads them.
class ArenaTensors : public TensorSource {
 public:
  explicit ArenaTensors(std::string identity) : identity_(std::move(identity)) {}
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::byte* data) {
    TensorView v{dtype, std::move(shape), data, 0};
    v.nbytes = size_t(v.numel()) * size_t(dtype_size(dtype));
    tensors_[name] = v;
  }
  void add_scalar(const std::string& name, float value) {
    scalars_[name] = value;  // map nodes never move: the view's pointer stays valid
    tensors_[name] =
        TensorView{DType::kF32, {}, reinterpret_cast<const std::byte*>(&scalars_[name]), 4};
  }
  std::optional<TensorView> find(const std::string& name) const override {
    const auto it = tensors_.find(name);
    if (it == tensors_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, view] : tensors_) out.push_back(name);
    return out;
  }
  std::string identity() const override { return identity_; }

 private:
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, float> scalars_;
  std::string identity_;
};

// What the binder sees of one entry placed at `base`.
void expose(const ArenaEntry& e, std::byte* base, ArenaTensors& out) {
  const std::string& name = e.spec.name;
  if (e.kept == WeightFormat::kAsLaidOut) {
    out.add(name, e.spec.dtype, e.spec.shape, base + e.data);
    return;
  }
  const int64_t r = rows_of(e.spec), c = cols_of(e.spec);
  const std::string stem = stem_of(name);
  switch (e.kept) {
    case WeightFormat::kAsLaidOut:
      break;
    case WeightFormat::kMxfp8:
      out.add(name, DType::kF8E4M3, {r, c}, base + e.data);
      out.add(stem + ".weight_scale", DType::kF8E8M0, {r, c / 32}, base + e.scale);
      break;
    case WeightFormat::kFp8Block:
      out.add(name, DType::kF8E4M3, {r, c}, base + e.data);
      out.add(stem + ".weight_scale_inv", DType::kF32, {(r + 127) / 128, (c + 127) / 128},
              base + e.scale);
      break;
    case WeightFormat::kNvfp4:
      out.add(name, DType::kU8, {r, c / 2}, base + e.data);
      out.add(stem + ".weight_scale", DType::kF8E4M3, {r, c / 16}, base + e.scale);
      out.add_scalar(stem + ".weight_scale_2", e.global_scale);
      break;
  }
  if (e.input_scale) out.add_scalar(stem + ".input_scale", *e.input_scale);
}

// A quantized tensor's stored bytes somewhere on the device, described for dequantize_to_bf16.
Linear stored_view(const ArenaEntry& e, const std::byte* data, const std::byte* scale) {
  Linear l;
  l.rows = rows_of(e.spec);
  l.cols = cols_of(e.spec);
  l.data = data;
  l.dtype = e.stored == WeightFormat::kNvfp4 ? DType::kU8 : DType::kF8E4M3;
  l.global_scale = e.global_scale;
  if (e.stored == WeightFormat::kFp8Block) {
    l.format = LinearFormat::kFp8Block;
    l.scale_inv = reinterpret_cast<const float*>(scale);
  } else {
    l.format = e.stored == WeightFormat::kNvfp4 ? LinearFormat::kNvfp4 : LinearFormat::kMxfp8;
    l.scale = reinterpret_cast<const uint8_t*>(scale);
  }
  return l;
}

// A stored tensor's bytes somewhere on the device as a Linear: dense BF16/FP32 as laid out, or
// quantized (stored_view).
Linear source_view(const ArenaEntry& e, const std::byte* data, const std::byte* scale) {
  if (e.stored != WeightFormat::kAsLaidOut) return stored_view(e, data, scale);
  return Linear{e.spec.dtype, rows_of(e.spec), cols_of(e.spec), data};
}

// Spark's conversion: the tensor as stored (scratch `data`, `scale`) into the arena's NVFP4
// (precision_mode.cpp's convert_to_fp4, device_quantizer.h). Synchronises before the scratch goes.
void convert_for_spark(ArenaEntry& e, const std::byte* data, const std::byte* scale,
                       std::byte* base, cudaStream_t stream) {
  e.global_scale =
      quantize_linear_nvfp4(source_view(e, data, scale), reinterpret_cast<uint8_t*>(base + e.data),
                            reinterpret_cast<uint8_t*>(base + e.scale), stream);
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Host bytes to the device through two pinned buffers: the host read of one piece overlaps the
// asynchronous copy of the previous one.
class Stager {
 public:
  Stager() {
    SPARKGLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (int b = 0; b < 2; ++b) {
      SPARKGLM_CUDA_CHECK(cudaMallocHost(&pinned_[b], kStagingBytes));
      SPARKGLM_CUDA_CHECK(cudaEventCreateWithFlags(&done_[b], cudaEventDisableTiming));
    }
  }
  ~Stager() {
    cudaStreamSynchronize(stream_);  // unchecked: a destructor must not throw
    for (int b = 0; b < 2; ++b) {
      cudaEventDestroy(done_[b]);
      cudaFreeHost(pinned_[b]);
    }
    cudaStreamDestroy(stream_);
  }
  Stager(const Stager&) = delete;
  Stager& operator=(const Stager&) = delete;

  void copy(std::byte* device, const std::byte* host, size_t bytes) {
    for (size_t off = 0; off < bytes; off += kStagingBytes) {
      const size_t n = std::min(kStagingBytes, bytes - off);
      SPARKGLM_CUDA_CHECK(cudaEventSynchronize(done_[next_]));  // its previous copy is done
      std::memcpy(pinned_[next_], host + off, n);
      SPARKGLM_CUDA_CHECK(
          cudaMemcpyAsync(device + off, pinned_[next_], n, cudaMemcpyHostToDevice, stream_));
      SPARKGLM_CUDA_CHECK(cudaEventRecord(done_[next_], stream_));
      next_ = 1 - next_;
    }
  }
  cudaStream_t stream() const { return stream_; }
  void finish() { SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
  void* pinned_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};
  int next_ = 0;
};

// The preset's dummy tensor in its stored format at data / scale (device pointers); returns the
// NVFP4 global scale (1 otherwise).
float quantize_dummy(const ArenaEntry& e, uint64_t seed, std::byte* data, std::byte* scale) {
  const DummyMatrix m{rows_of(e.spec), cols_of(e.spec), dummy::tensor_key(seed, e.spec.name),
                      e.spec.init.center, e.spec.init.half_width};
  auto* values = reinterpret_cast<uint8_t*>(data);
  switch (e.stored) {
    case WeightFormat::kMxfp8:
      quantize_dummy_mxfp8(m, values, reinterpret_cast<uint8_t*>(scale), nullptr);
      return 1.0f;
    case WeightFormat::kFp8Block:
      quantize_dummy_fp8_block(m, values, reinterpret_cast<float*>(scale), nullptr);
      return 1.0f;
    case WeightFormat::kNvfp4:
      return quantize_dummy_nvfp4(m, values, reinterpret_cast<uint8_t*>(scale), nullptr);
    case WeightFormat::kAsLaidOut:
      break;
  }
  SPARKGLM_ASSERT(false, "quantize_dummy: a tensor laid out as is");
  return 1.0f;
}

}  // namespace

size_t DeviceWeights::arena_bytes(const ModelConfig& config, CheckpointFormat format,
                                  PrecisionMode mode) {
  return preset_layout(config, format, mode).bytes;
}

size_t DeviceWeights::arena_bytes(const ModelConfig& config, const TensorSource& host,
                                  PrecisionMode mode) {
  return checkpoint_layout(config, host, mode).bytes;
}

namespace {

// Allocates the arena of `layout`, lets `fill` write each entry, and binds (spark: with the
// routed experts' activation scales, set_fp4_activation_scales).
void build(const ModelConfig& config, ArenaLayout& layout, const std::string& identity,
           DeviceBuffer& arena, const std::function<void(ArenaEntry&, std::byte*)>& fill,
           PrecisionMode mode, ModelWeights& weights, DequantWorkspace& workspace) {
  arena = DeviceBuffer(layout.bytes);
  auto* base = static_cast<std::byte*>(arena.data());
  auto source = std::make_shared<ArenaTensors>(identity);
  for (ArenaEntry& e : layout.entries) {
    fill(e, base);
    expose(e, base, *source);
  }
  SPARKGLM_CUDA_CHECK(cudaDeviceSynchronize());
  workspace = DequantWorkspace{reinterpret_cast<uint16_t*>(base + layout.workspace),
                               layout.workspace_elems};
  weights = ModelWeights::bind(config, source, ModelWeights::Quantized::kKeep);
  if (mode == PrecisionMode::kSpark) set_fp4_activation_scales(config, weights);
}

}  // namespace

std::unique_ptr<DeviceWeights> DeviceWeights::generate(const ModelConfig& config, uint64_t seed,
                                                       CheckpointFormat format,
                                                       PrecisionMode mode) {
  auto out = std::unique_ptr<DeviceWeights>(new DeviceWeights());
  out->identity_ = dummy_identity(seed);
  if (format != CheckpointFormat::kBf16)  // load_model_preset's identity for the same weights
    out->identity_ += std::string(",format=") + checkpoint_format_name(format);
  ArenaLayout layout = preset_layout(config, format, mode);
  auto fill = [&](ArenaEntry& e, std::byte* base) {
    const TensorSpec& s = e.spec;
    std::byte* at = base + e.data;
    if (e.convert && e.stored != WeightFormat::kAsLaidOut) {  // spark: stored quantized
      DeviceBuffer data(element_bytes(s, e.stored)), scale(scale_bytes(s, e.stored));
      auto* d = static_cast<std::byte*>(data.data());
      auto* sc = static_cast<std::byte*>(scale.data());
      e.global_scale = quantize_dummy(e, seed, d, sc);
      convert_for_spark(e, d, sc, base, nullptr);
    } else if (e.convert) {
      // spark: the BF16 dummy tensor, converted
      DeviceBuffer data(element_bytes(s, e.stored));
      auto* d = static_cast<std::byte*>(data.data());
      SPARKGLM_ASSERT(s.dtype == DType::kBF16, "spark converts BF16 projections");
      fill_dummy_bf16(reinterpret_cast<uint16_t*>(d), s.numel(), dummy::tensor_key(seed, s.name),
                      s.init.center, s.init.half_width, nullptr);
      convert_for_spark(e, d, nullptr, base, nullptr);
    } else if (e.stored == WeightFormat::kAsLaidOut) {
      const uint64_t key = dummy::tensor_key(seed, s.name);
      if (s.dtype == DType::kBF16) {
        fill_dummy_bf16(reinterpret_cast<uint16_t*>(at), s.numel(), key, s.init.center,
                        s.init.half_width, nullptr);
      } else {
        SPARKGLM_ASSERT(s.dtype == DType::kF32, "dummy tensors are BF16 or FP32");
        fill_dummy_f32(reinterpret_cast<float*>(at), s.numel(), key, s.init.center,
                       s.init.half_width, nullptr);
      }
    } else if (e.kept == WeightFormat::kAsLaidOut) {  // stored quantized, kept BF16 (kv_b)
      DeviceBuffer data(element_bytes(s, e.stored)), scale(scale_bytes(s, e.stored));
      auto* d = static_cast<std::byte*>(data.data());
      auto* sc = static_cast<std::byte*>(scale.data());
      e.global_scale = quantize_dummy(e, seed, d, sc);
      dequantize_to_bf16(stored_view(e, d, sc), reinterpret_cast<uint16_t*>(at), nullptr);
      SPARKGLM_CUDA_CHECK(cudaDeviceSynchronize());  // before the scratch is freed
    } else {
      e.global_scale = quantize_dummy(e, seed, at, base + e.scale);
    }
  };
  build(config, layout, out->identity_, out->arena_, fill, mode, out->weights_, out->workspace_);
  return out;
}

std::unique_ptr<DeviceWeights> DeviceWeights::upload(const ModelConfig& config,
                                                     const TensorSource& host, PrecisionMode mode) {
  auto out = std::unique_ptr<DeviceWeights>(new DeviceWeights());
  out->identity_ = host.identity();
  ArenaLayout layout = checkpoint_layout(config, host, mode);  // every check before a byte moves
  Stager stager;
  auto fill = [&](ArenaEntry& e, std::byte* base) {
    const TensorSpec& s = e.spec;
    const TensorView view = *host.find(s.name);
    if (e.convert && e.stored == WeightFormat::kAsLaidOut) {  // spark: converted from BF16/FP32
      DeviceBuffer data(view.nbytes);
      stager.copy(static_cast<std::byte*>(data.data()), view.data, view.nbytes);
      stager.finish();
      convert_for_spark(e, static_cast<std::byte*>(data.data()), nullptr, base, stager.stream());
      return;
    }
    if (e.stored == WeightFormat::kAsLaidOut) {
      stager.copy(base + e.data, view.data, view.nbytes);
      return;
    }
    const std::string stem = stem_of(s.name);
    const TensorView sv = *host.find(
        stem + (e.stored == WeightFormat::kFp8Block ? ".weight_scale_inv" : ".weight_scale"));
    SPARKGLM_ASSERT(
        view.nbytes == element_bytes(s, e.stored) && sv.nbytes == scale_bytes(s, e.stored),
        "checked stored sizes disagree with the arena's");
    if (e.convert) {  // stored quantized, converted
      DeviceBuffer data(view.nbytes), scale(sv.nbytes);
      auto* d = static_cast<std::byte*>(data.data());
      auto* sc = static_cast<std::byte*>(scale.data());
      stager.copy(d, view.data, view.nbytes);
      stager.copy(sc, sv.data, sv.nbytes);
      stager.finish();
      convert_for_spark(e, d, sc, base, stager.stream());
      return;
    }
    if (e.kept == WeightFormat::kAsLaidOut) {  // stored quantized, kept BF16 (kv_b)
      DeviceBuffer data(view.nbytes), scale(sv.nbytes);
      auto* d = static_cast<std::byte*>(data.data());
      auto* sc = static_cast<std::byte*>(scale.data());
      stager.copy(d, view.data, view.nbytes);
      stager.copy(sc, sv.data, sv.nbytes);
      dequantize_to_bf16(stored_view(e, d, sc), reinterpret_cast<uint16_t*>(base + e.data),
                         stager.stream());
      stager.finish();  // before the scratch is freed
      return;
    }
    stager.copy(base + e.data, view.data, view.nbytes);
    stager.copy(base + e.scale, sv.data, sv.nbytes);
  };
  auto fill_and_finish = [&](ArenaEntry& e, std::byte* base) {
    fill(e, base);
    if (&e == &layout.entries.back()) stager.finish();
  };
  build(config, layout, out->identity_, out->arena_, fill_and_finish, mode, out->weights_,
        out->workspace_);
  return out;
}

}  // namespace sparkglm::cuda
