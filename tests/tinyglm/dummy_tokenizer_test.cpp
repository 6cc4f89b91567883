// A checkpoint whose vocabulary is not the byte vocabulary gets a byte-level BPE tokenizer.json of
// its own size beside it (tinyglm/dummy_tokenizer.h): the server's codec loads it, and every id the
// model can sample decodes to text. tests/python/test_dummy_tokenizer.py checks the glm-5.3-flash
// file against the `tokenizers` package.
#include "tinyglm/dummy_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/core/error.h"
#include "engine/server/token_codec.h"
#include "tinyglm/checkpoint_writer.h"

namespace sparkglm {
namespace {

// tinyglm-micro with a 4,096-id vocabulary whose specials start at 4,000.
ModelConfig micro_with_bpe_vocabulary() {
  ModelConfig c = preset_config("tinyglm-micro");
  c.vocab_size = 4096;
  c.eos_token_ids = {4000, 4007, 4009};
  return c;
}

TEST(DummyTokenizer, CheckpointOfABpeSizedVocabularyDecodesEveryIdToText) {
  const ModelConfig c = micro_with_bpe_vocabulary();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("dummy_tokenizer_test_" + std::to_string(::getpid()));
  ThreadPool pool(2);
  write_dummy_checkpoint(c, dir.string(), {}, pool);
  const auto codec = server::codec_for_model_dir(dir.string(), c.vocab_size);
  EXPECT_STREQ(codec->kind(), "bpe");
  ASSERT_EQ(codec->vocab_size(), c.vocab_size);
  for (int32_t id = 0; id < c.vocab_size; ++id)
    ASSERT_FALSE(codec->token_bytes(id).empty()) << "id " << id << " decodes to nothing";
  EXPECT_EQ(codec->token_bytes(4000), "<|endoftext|>");
  EXPECT_EQ(codec->token_bytes(4007), "<|user|>");
  EXPECT_EQ(codec->token_bytes(4009), "<|observation|>");
  EXPECT_EQ(codec->token_bytes(4095), "<|reserved_59|>");
  const std::string text = "[gMASK]<sop><|user|>\nhi, 世界<|assistant|>";
  EXPECT_EQ(codec->decode(codec->encode(text), false), text);
  std::filesystem::remove_all(dir);
}

// What sparkglm-serve --preset glm-5.3-flash serves with: the generated vocabulary, parsed in
// memory.
TEST(DummyTokenizer, Glm53FlashPresetCodecHasTheFullVocabularyAndGlmsSpecialIds) {
  const ModelConfig c = preset_config("glm-5.3-flash");
  const auto codec = server::make_bpe_codec_from_json(dummy_tokenizer_json(c), "glm-5.3-flash");
  ASSERT_EQ(codec->vocab_size(), c.vocab_size);
  for (int32_t id = 0; id < c.vocab_size; ++id)
    ASSERT_FALSE(codec->token_bytes(id).empty()) << "id " << id << " decodes to nothing";
  for (int32_t eos : c.eos_token_ids) EXPECT_TRUE(codec->is_control(eos)) << eos;
  EXPECT_EQ(codec->prefix(), (std::vector<int32_t>{154822, 154824}));  // [gMASK]<sop>
  const std::string text = "<|user|>\nПривет, 世界! the weather<|assistant|><think>";
  EXPECT_EQ(codec->decode(codec->encode(text), false), text);
}

TEST(DummyTokenizer, RefusesAVocabularyWithoutRoomForTheSpecials) {
  ModelConfig c = micro_with_bpe_vocabulary();
  c.eos_token_ids = {4090};  // 36 specials do not fit below 4,096
  EXPECT_THROW(dummy_tokenizer_json(c), Error);
  c.eos_token_ids = {100};  // the 256 bytes do not fit below it
  EXPECT_THROW(dummy_tokenizer_json(c), Error);
}

}  // namespace
}  // namespace sparkglm
