#pragma once
// The dummy weights as a checkpoint format stores them (engine/model/checkpoint_format.h): in bf16
// the generator's tensors as they are; in fp4-local every projection the format quantizes is
// replaced by its stored tensors, quantized from the BF16 values by
// engine/model/weight_quantizer.h:
//   NVFP4      <stem>.weight U8 [rows, cols/2], .weight_scale F8_E4M3 [rows, cols/16],
//              .weight_scale_2 F32 [], .input_scale F32 [] (routed_expert_input_scale)
//   MXFP8      <stem>.weight F8_E4M3 [rows, cols], .weight_scale F8_E8M0 [rows, cols/32]
//   FP8 block  <stem>.weight F8_E4M3 [rows, cols], .weight_scale_inv F32 [ceil(rows/128),
//              ceil(cols/128)]
#include <memory>
#include <string>
#include <vector>

#include "engine/core/thread_pool.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/config.h"
#include "engine/model/tensor_source.h"

namespace sparkglm {

struct StoredWeights {
  std::shared_ptr<const TensorSource> tensors;
  std::vector<std::string> order;  // checkpoint order: each weight, then its scale tensors
};

// `source` holds checkpoint_tensors(config) as make_dummy_weights makes them (the projections a
// format quantizes in BF16): the dummy weights, or a checkpoint checked by checkpoint_quantizer.h.
StoredWeights stored_weights(const ModelConfig& config, std::shared_ptr<const TensorSource> source,
                             CheckpointFormat format, ThreadPool& pool);

}  // namespace sparkglm
