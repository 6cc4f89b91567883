// `sparkglm tinyglm make --weight-format fp4-local`: the checkpoint stores every tensor in its
// MODEL.md section 7 format, the loader's dequantization gives back the BF16 dummy weights within
// each format's precision. (tests/python/test_fp4_local_checkpoint.py serves it and compares its
// logits with the BF16 checkpoint's.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/model/checkpoint.h"
#include "engine/model/weight_formats.h"
#include "tinyglm/checkpoint_writer.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

namespace fs = std::filesystem;

struct Checkpoints {
  std::string bf16, fp4;
};

// Both formats of tinyglm-micro, written once for the suite.
const Checkpoints& written() {
  static const Checkpoints dirs = [] {
    const fs::path root =
        fs::temp_directory_path() / ("fp4_local_test_" + std::to_string(::getpid()));
    fs::remove_all(root);
    ThreadPool pool(2);
    const ModelConfig c = preset_config("tinyglm-micro");
    Checkpoints d{(root / "bf16").string(), (root / "fp4").string()};
    CheckpointWriteOptions o;
    o.seed = kDefaultDummySeed;
    write_dummy_checkpoint(c, d.bf16, o, pool);
    o.format = CheckpointFormat::kFp4Local;
    write_dummy_checkpoint(c, d.fp4, o, pool);
    return d;
  }();
  return dirs;
}

std::vector<float> bf16_values(const TensorView& v) {
  std::vector<float> out(size_t(v.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, v.data + 2 * i, 2);
    out[i] = bf16_to_f32(h);
  }
  return out;
}

TEST(Fp4LocalCheckpoint, StoresEachTensorInItsSectionSevenFormat) {
  const auto ckpt = Checkpoint::open(written().fp4);
  auto dtype = [&](const std::string& name) {
    const auto v = ckpt->find(name);
    return v ? std::string(dtype_name(v->dtype)) : std::string("missing");
  };
  const std::string expert = "model.layers.1.mlp.experts.3.down_proj.";
  EXPECT_EQ(dtype(expert + "weight"), "U8");
  EXPECT_EQ(dtype(expert + "weight_scale"), "F8_E4M3");
  EXPECT_EQ(dtype(expert + "weight_scale_2"), "F32");
  EXPECT_EQ(dtype(expert + "input_scale"), "F32");
  for (const std::string kda : {"q_proj", "f_b_proj", "b_proj", "o_proj"}) {
    EXPECT_EQ(dtype("model.layers.0.self_attn." + kda + ".weight"), "F8_E4M3") << kda;
    EXPECT_EQ(dtype("model.layers.0.self_attn." + kda + ".weight_scale"), "F8_E8M0") << kda;
  }
  EXPECT_EQ(dtype("model.layers.0.mlp.up_proj.weight_scale"), "F8_E8M0");  // dense MLP
  EXPECT_EQ(dtype("lm_head.weight_scale"), "F8_E8M0");
  for (const std::string mla :
       {"self_attn.q_a_proj", "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa",
        "self_attn.kv_b_proj", "self_attn.o_proj", "self_attn.indexer.wq_b", "self_attn.indexer.wk",
        "mlp.shared_experts.gate_proj", "mlp.shared_experts.down_proj"}) {
    EXPECT_EQ(dtype("model.layers.3." + mla + ".weight"), "F8_E4M3") << mla;
    EXPECT_EQ(dtype("model.layers.3." + mla + ".weight_scale_inv"), "F32") << mla;
    EXPECT_EQ(dtype("model.layers.4." + mla + ".weight_scale_inv"), "F32") << "MTP " << mla;
  }
  EXPECT_EQ(dtype("model.embed_tokens.weight"), "BF16");
  EXPECT_EQ(dtype("model.layers.3.self_attn.indexer.weights_proj.weight"), "BF16");
  EXPECT_EQ(dtype("model.layers.4.eh_proj.weight"), "BF16");
  EXPECT_EQ(dtype("model.layers.1.mlp.gate.weight"), "F32");  // the router

  std::ifstream in(written().fp4 + "/config.json");
  const auto config = nlohmann::json::parse(in);
  const auto& q = config.at("quantization_config");
  EXPECT_EQ(q.at("quant_algo"), "MIXED_PRECISION");
  const auto& layers = q.at("quantized_layers");
  EXPECT_EQ(layers.at("model.layers.1.mlp.experts.*").at("quant_algo"), "NVFP4");
  EXPECT_EQ(layers.at("model.layers.0.self_attn.o_proj").at("quant_algo"), "MXFP8");
  EXPECT_EQ(layers.at("model.layers.3.self_attn.o_proj").at("quant_algo"), "FP8_BLOCK");
  EXPECT_EQ(layers.at("lm_head").at("group_size"), 32);
  EXPECT_FALSE(layers.contains("model.layers.4.eh_proj"));
}

// Every quantized projection dequantizes (through the loader's weight_formats) to its BF16 dummy
// values with each format's error: NMSE per format, worst tensor.
TEST(Fp4LocalCheckpoint, DequantizesToTheBf16WeightsWithinEachFormatsPrecision) {
  const auto fp4 = Checkpoint::open(written().fp4);
  const auto bf16 = Checkpoint::open(written().bf16);
  std::map<std::string, double> worst;  // stored dtype of the weight -> worst NMSE
  for (const std::string& name : bf16->names()) {
    const TensorView ref = *bf16->find(name);
    const TensorView got = *fp4->find(name);
    if (got.dtype == ref.dtype) continue;  // stored as laid out
    const int64_t rows = ref.shape[0], cols = ref.shape[1];
    const auto want = bf16_values(ref);
    const auto deq = dequantize_linear(*fp4, name, rows, cols);
    double err = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      err += (double(deq[i]) - want[i]) * (double(deq[i]) - want[i]);
      norm += double(want[i]) * want[i];
    }
    const std::string key =
        std::string(dtype_name(got.dtype)) +
        (fp4->find(name.substr(0, name.size() - 6) + "weight_scale_inv") ? " block" : "");
    worst[key] = std::max(worst[key], err / norm);
    ASSERT_GT(err, 0.0) << name << " came back exactly: was it quantized?";
  }
  for (const auto& [format, nmse] : worst)
    std::printf("%-13s worst NMSE %.3g\n", format.c_str(), nmse);
  ASSERT_EQ(worst.size(), 3u);
  // E2M1 (1 mantissa bit) on uniform weights: about 1e-2; E4M3 (3 bits): about 1e-3.
  EXPECT_LT(worst.at("U8"), 2e-2);
  EXPECT_LT(worst.at("F8_E4M3"), 2e-3);
  EXPECT_LT(worst.at("F8_E4M3 block"), 2e-3);
}

}  // namespace
}  // namespace sparkglm
