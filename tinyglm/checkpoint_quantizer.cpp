#include "tinyglm/checkpoint_quantizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/build_info.h"
#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/model/checkpoint.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/config.h"
#include "engine/model/tensor_layout.h"
#include "engine/model/tensor_source.h"
#include "engine/model/weight_formats.h"
#include "tinyglm/stored_weights.h"

namespace sparkglm {

namespace fs = std::filesystem;

namespace {

// The file's bytes; empty when it does not exist.
std::string read_text(const fs::path& path) {
  if (!fs::exists(path)) return {};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every tensor of the source is one of the layout's, with its shape; those fp4-local quantizes are
// BF16.
void check_source(const ModelConfig& config, const TensorSource& source) {
  std::set<std::string> expected;
  for (const TensorSpec& spec : checkpoint_tensors(config)) {
    expected.insert(spec.name);
    const auto view = source.find(spec.name);
    if (!view) throw Error(ErrorKind::kInvalidCheckpoint, "tensor '" + spec.name + "' is missing");
    if (view->shape != spec.shape)
      throw Error(ErrorKind::kInvalidCheckpoint,
                  "tensor '" + spec.name + "' has shape " + shape_string(view->shape) +
                      ", the config needs " + shape_string(spec.shape));
    const bool quantized =
        weight_format(config, spec, CheckpointFormat::kFp4Local) != WeightFormat::kAsLaidOut;
    if (quantized && view->dtype != DType::kBF16)
      throw Error(ErrorKind::kInvalidCheckpoint,
                  "tensor '" + spec.name + "' is " + std::string(dtype_name(view->dtype)) +
                      ": fp4-local quantizes it from BF16 values (an FP32 tensor would be rounded "
                      "twice, an FP8 or FP4 one is already quantized)");
  }
  for (const std::string& name : source.names())
    if (!expected.count(name))
      throw Error(ErrorKind::kInvalidCheckpoint,
                  "tensor '" + name + "': " +
                      (is_auxiliary_tensor_name(name)
                           ? std::string("a scale tensor: the checkpoint is already quantized")
                           : std::string("not a tensor of this config's layout")));
}

// The source's training record, re-bound to the quantized shard: what `sparkglm-qualify quality
// --out` binds (gates/quality_bundle.h), with "derived_from" naming the trained shard and the
// build that quantized it. Only a one-shard copy gets one (the record binds one shard).
void write_derived_record(const fs::path& source_record, const std::string& dir,
                          const QuantizedCheckpoint& q) {
  if (q.shards != 1) return;
  nlohmann::json t =
      parse_json_file(source_record.string(), ErrorKind::kInvalidCheckpoint, json_limits::kReceipt);
  if (!t.is_object() || !t.contains("shard_sha256"))
    throw Error(ErrorKind::kInvalidCheckpoint,
                source_record.string() + ": expected a training record with shard_sha256");
  const std::string identity = Checkpoint::open(dir)->identity();  // "sha256:<shard>=<hex>"
  const BuildInfo& b = build_info();
  t["derived_from"] = {{"shard_sha256", t["shard_sha256"]},
                       {"weights_identity", t.value("weights_identity", "")},
                       {"transform", "sparkglm checkpoint quantize --weight-format fp4-local"},
                       {"quantized_by", std::string("sparkglm ") + b.version + " " + b.commit}};
  t["shard_sha256"] = identity.substr(identity.find('=') + 1);
  t["weights_identity"] = q.weights_identity;
  std::ofstream out(fs::path(dir) / "training.json", std::ios::binary);
  out << t.dump(2) << "\n";
  if (!out) throw Error(ErrorKind::kIo, "failed writing " + dir + "/training.json");
}

}  // namespace

QuantizedCheckpoint quantize_checkpoint(const std::string& source_dir, const std::string& dir,
                                        const CheckpointWriteOptions& options, ThreadPool& pool) {
  if (options.format != CheckpointFormat::kFp4Local)
    throw Error(ErrorKind::kInvalidArgument,
                std::string("checkpoint quantize writes fp4-local, not ") +
                    checkpoint_format_name(options.format));
  const fs::path src(source_dir);
  // --out replaces its folder (with --force): never the source or a folder holding it.
  const fs::path from = fs::weakly_canonical(src), to = fs::weakly_canonical(fs::path(dir));
  if (std::mismatch(to.begin(), to.end(), from.begin(), from.end()).first == to.end())
    throw Error(ErrorKind::kInvalidArgument, "--out " + dir + " is --model " + source_dir +
                                                 " or holds it; choose another --out");
  const ModelConfig config = ModelConfig::load((src / "config.json").string());
  const std::shared_ptr<Checkpoint> source = Checkpoint::open(source_dir);
  check_source(config, *source);
  const TokenizerFiles tokenizer{read_text(src / "tokenizer.json"),
                                 read_text(src / "tokenizer_config.json")};
  QuantizedCheckpoint q;
  q.weights_identity = std::string("fp4-local:") + source->identity();
  const StoredWeights stored = stored_weights(config, source, options.format, pool);
  q.shards = write_checkpoint(config, stored, q.weights_identity, tokenizer, dir, options);
  if (fs::exists(src / "training.json")) write_derived_record(src / "training.json", dir, q);
  return q;
}

}  // namespace sparkglm
