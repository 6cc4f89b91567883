#pragma once
// `sparkglm checkpoint quantize`: the fp4-local copy of a checkpoint directory whose projections
// are BF16 (a BF16 export, or the trained tinyGLM). Every projection the fp4-local layout quantizes
// (engine/model/checkpoint_format.h) is quantized from its BF16 values exactly as `sparkglm tinyglm
// make --weight-format fp4-local` quantizes dummy weights (tinyglm/stored_weights.h), so the two
// paths make the same bytes from the same values; every other tensor is copied as stored, and so
// are tokenizer.json and tokenizer_config.json where the source has them. The source is read
// through its mapping; the quantized copy is held in memory until it is written (about a quarter of
// the source's bytes).
//
// A source with a training record (training.json, the trained tinyGLM) gives the one-shard copy
// its own: the same record bound to the quantized shard, with "derived_from" naming the trained
// shard and the build that quantized it, so `sparkglm-qualify quality --out` can bundle the copy.
//
// Refused before anything is written, naming the tensor: a tensor of the config's layout that is
// missing or has another shape, a projection to quantize that is not BF16 (FP32 would be rounded
// twice; an FP8 or FP4 tensor is already quantized), a scale tensor (the source is quantized) or
// any other tensor the layout does not have.
#include <string>

#include "engine/core/thread_pool.h"
#include "tinyglm/checkpoint_writer.h"

namespace sparkglm {

struct QuantizedCheckpoint {
  int shards = 0;
  std::string weights_identity;  // "fp4-local:<the source's identity>", in the shards' metadata
};

// options.format must be fp4-local (Error(kInvalidArgument) otherwise).
QuantizedCheckpoint quantize_checkpoint(const std::string& source_dir, const std::string& dir,
                                        const CheckpointWriteOptions& options, ThreadPool& pool);

}  // namespace sparkglm
