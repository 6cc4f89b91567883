// The presets of MODEL.md section 8.
#include "engine/core/error.h"
#include "engine/model/config.h"
#include "engine/text/byte_tokenizer.h"

namespace sparkglm {

namespace {

// tinyGLM presets use the byte-level vocabulary; its end-of-text, user and observation tokens
// play the role of GLM's three eos ids.
void use_byte_vocabulary(ModelConfig& c) {
  c.vocab_size = ByteTokenizer::kVocabSize;
  c.eos_token_ids = {ByteTokenizer::kEndOfText, ByteTokenizer::kUser, ByteTokenizer::kObservation};
}

ModelConfig tinyglm() {
  ModelConfig c;  // production geometry
  c.num_hidden_layers = 4;
  c.layer_types = default_layer_types(4);  // KDA, KDA, KDA, DSA
  c.first_k_dense_replace = 1;
  c.n_routed_experts = 16;
  use_byte_vocabulary(c);
  return c;
}

ModelConfig tinyglm_micro() {
  ModelConfig c = tinyglm();
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.kda.num_heads = 4;
  c.kda.head_dim = 32;
  c.num_attention_heads = 4;
  c.q_lora_rank = 64;
  c.kv_lora_rank = 64;
  c.qk_nope_head_dim = 32;
  c.v_head_dim = 32;
  c.index_n_heads = 4;
  c.index_head_dim = 32;
  c.index_topk = 16;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 64;
  return c;
}

// tinyglm-micro widened where retrieval needs it (docs/trained-tinyglm.md): more and wider MLA
// heads, more indexer heads, a larger selection, two MLA layers. Every dimension the CUDA kernels'
// micro instantiation fixes stays (CudaModelRunner::check_config). tinyglm/train/train_wide.py
// trains it; tests/python/test_train_wide.py checks that its WIDE is this.
ModelConfig tinyglm_wide() {
  ModelConfig c = tinyglm_micro();
  c.num_attention_heads = 16;
  c.qk_nope_head_dim = 64;
  c.index_n_heads = 16;
  c.index_topk = 64;
  c.num_hidden_layers = 8;
  c.layer_types = default_layer_types(8);  // MLA at layers 3 and 7
  return c;
}

}  // namespace

std::vector<std::string> preset_names() {
  return {"glm-5.3-flash", "tinyglm", "tinyglm-micro", "tinyglm-wide"};
}

ModelConfig preset_config(const std::string& name) {
  ModelConfig c;
  if (name == "glm-5.3-flash") {
    c.layer_types = default_layer_types(c.num_hidden_layers);
  } else if (name == "tinyglm") {
    c = tinyglm();
  } else if (name == "tinyglm-micro") {
    c = tinyglm_micro();
  } else if (name == "tinyglm-wide") {
    c = tinyglm_wide();
  } else {
    throw Error(ErrorKind::kInvalidArgument,
                "unknown preset \"" + name +
                    "\": expected glm-5.3-flash, tinyglm, tinyglm-micro or tinyglm-wide");
  }
  c.validate();
  return c;
}

}  // namespace sparkglm
