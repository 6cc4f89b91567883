#include "engine/backend/cuda/moe_quant_table.h"

#include <string>
#include <vector>

#include "engine/backend/cuda/projection.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "MoeQuantTable: " + what);
}

bool aligned(const void* p, uintptr_t to) {
  return reinterpret_cast<uintptr_t>(p) % to == 0;
}

// Checks expert e's projection `l` against the operand's format (the first expert's) and shape.
void check(const Linear& l, int e, const char* name, QuantFormat format, int64_t rows,
           int64_t cols) {
  const std::string where = std::string("expert ") + std::to_string(e) + " " + name + ": ";
  if (!l.quantized()) refuse(where + "is dense; the layer's routed experts must all be quantized");
  const QuantizedWeight w = quantized_weight(l);
  if (w.format != format)
    refuse(where + quant_format_name(w.format) + ", but the operand's format is " +
           quant_format_name(format));
  if (l.rows != rows || l.cols != cols)
    refuse(where + "shape [" + std::to_string(l.rows) + ", " + std::to_string(l.cols) +
           "], expected [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  if (!l.data || !aligned(l.data, 16)) refuse(where + "data missing or not 16-byte aligned");
  if (format == QuantFormat::kNvfp4 && (!l.scale || !aligned(l.scale, 2)))
    refuse(where + "NVFP4 scales missing or not 2-byte aligned");
  if (format == QuantFormat::kMxfp8 && !l.scale) refuse(where + "MXFP8 scales missing");
  if (format == QuantFormat::kFp8Block && !l.scale_inv)
    refuse(where + "FP8 block scale_inv missing");
}

void check_shared(const Linear& l, const char* name, int64_t rows, int64_t cols) {
  if (l.rows != rows || l.cols != cols)
    refuse(std::string("shared expert ") + name + ": shape [" + std::to_string(l.rows) + ", " +
           std::to_string(l.cols) + "], expected [" + std::to_string(rows) + ", " +
           std::to_string(cols) + "]");
  if (!l.quantized() && l.dtype != DType::kBF16)
    refuse(std::string("shared expert ") + name + ": dense but not BF16");
}

}  // namespace

bool MoeQuantTable::quantized(const MoeWeights& moe) {
  return !moe.experts.empty() && moe.experts[0].gate.quantized();
}

MoeQuantTable MoeQuantTable::build(const MoeWeights& moe, int64_t hidden, int64_t width) {
  const int64_t E = int64_t(moe.experts.size());
  if (E == 0 || !quantized(moe)) refuse("the layer has no quantized routed experts");
  // Host image: for operand o (gate, up, down): data [E], scale [E], scale_inv [E] pointers,
  // then the global scales [3][E] as floats.
  const size_t ptr_bytes = size_t(9 * E) * sizeof(void*);
  std::vector<char> image(ptr_bytes + size_t(3 * E) * sizeof(float));
  auto ptrs = [&](int o, int which) {  // which: 0 data, 1 scale, 2 scale_inv
    return reinterpret_cast<const void**>(image.data()) + (3 * o + which) * E;
  };
  auto scales = [&](int o) { return reinterpret_cast<float*>(image.data() + ptr_bytes) + o * E; };
  const char* names[3] = {"gate_proj", "up_proj", "down_proj"};
  const QuantizedWeight first = quantized_weight(moe.experts[0].gate);
  QuantFormat formats[3] = {first.format, first.format, first.format};
  if (moe.experts[0].down.quantized()) formats[2] = quantized_weight(moe.experts[0].down).format;
  for (int64_t e = 0; e < E; ++e) {
    const SwiGluWeights& x = moe.experts[size_t(e)];
    const Linear* ops[3] = {&x.gate, &x.up, &x.down};
    for (int o = 0; o < 3; ++o) {
      const Linear& l = *ops[o];
      check(l, int(e), names[o], formats[o], o == 2 ? hidden : width, o == 2 ? width : hidden);
      ptrs(o, 0)[e] = l.data;
      ptrs(o, 1)[e] = l.scale;
      ptrs(o, 2)[e] = l.scale_inv;
      scales(o)[e] = l.global_scale;
    }
  }
  if (moe.shared) {
    check_shared(moe.shared->gate, "gate_proj", width, hidden);
    check_shared(moe.shared->up, "up_proj", width, hidden);
    check_shared(moe.shared->down, "down_proj", hidden, width);
  }

  MoeQuantTable t;
  t.arrays_ = DeviceBuffer(image.size());
  t.arrays_.copy_from_host(image.data(), image.size());
  char* base = static_cast<char*>(t.arrays_.data());
  MoeQuantOperand* out[3] = {&t.experts_.gate, &t.experts_.up, &t.experts_.down};
  for (int o = 0; o < 3; ++o) {
    auto dev = [&](int which) { return base + size_t((3 * o + which) * E) * sizeof(void*); };
    out[o]->format = formats[o];
    out[o]->data = reinterpret_cast<const uint8_t* const*>(dev(0));
    out[o]->scale = formats[o] == QuantFormat::kFp8Block
                        ? nullptr
                        : reinterpret_cast<const uint8_t* const*>(dev(1));
    out[o]->scale_inv = formats[o] == QuantFormat::kFp8Block
                            ? reinterpret_cast<const float* const*>(dev(2))
                            : nullptr;
    out[o]->global_scale = formats[o] == QuantFormat::kNvfp4
                               ? reinterpret_cast<const float*>(base + ptr_bytes) + o * E
                               : nullptr;
  }
  if (moe.shared) {
    t.experts_.shared_gate = &moe.shared->gate;
    t.experts_.shared_up = &moe.shared->up;
    t.experts_.shared_down = &moe.shared->down;
  }
  return t;
}

}  // namespace sparkglm::cuda
