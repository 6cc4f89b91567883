#pragma once
// Short prompts in the trained tinyglm-micro's byte vocabulary (ids 0..255 are the bytes), on
// which its MTP head drafts right often enough for speculation tests to see a wrong draft: a
// copy, a key-value retrieval, a JSON object and prose. The CPU and CUDA speculation tests
// (tests/runtime/speculative_decoding_test.cpp, tests/cuda/speculation_cuda_test.cpp) use them.
#include <array>
#include <cstdint>

#include "engine/runtime/generation_request.h"

namespace sparkglm::byte_texts {

inline constexpr std::array<const char*, 4> kProbes = {
    "Task: repeat the following text exactly.\nThe river runs past the old mill and on to the "
    "sea.\n",
    "The code of item K7 is 40213377. The code of item B2 is 99120456. The code of item K7 is ",
    "Task: output one JSON object with the fields name and age.\n{\"name\": \"Ada\", \"age\": ",
    "Continue this text in the same style. The morning was cold and the streets were empty, "
    "and "};

// A greedy request for `text`, its bytes as tokens, that ignores EOS.
inline GenerationRequest greedy_request(const char* text, int max_tokens, bool logprobs = false) {
  GenerationRequest q;
  for (const char* c = text; *c; ++c) q.prompt.push_back(int32_t(static_cast<unsigned char>(*c)));
  q.sampling.temperature = 0.0f;
  q.sampling.max_tokens = max_tokens;
  q.sampling.ignore_eos = true;
  q.sampling.logprobs = logprobs;
  return q;
}

}  // namespace sparkglm::byte_texts
