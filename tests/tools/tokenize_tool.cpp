// Drives BpeTokenizer for tests/python/test_hf_tokenizer.py, which compares it with the
// `tokenizers` package:
//   tokenize_tool TOKENIZER_JSON [--no-special] [--time] < strings.jsonl > ids.jsonl
//     one JSON string per line in, one JSON list of ids per line out; --no-special encodes with
//     parse_special=false; --time reports the encode throughput on stderr.
//   tokenize_tool TOKENIZER_JSON --decode [--skip-special] < ids.jsonl > bytes.txt
//     one JSON list of ids per line in, the decoded bytes as lowercase hex per line out (hex,
//     because decoded bytes need not be valid UTF-8 and JSON strings must be).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/text/bpe_tokenizer.h"

namespace {

std::string hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: tokenize_tool TOKENIZER_JSON [--no-special] [--time] < in.jsonl\n"
                 "       tokenize_tool TOKENIZER_JSON --decode [--skip-special] < in.jsonl\n");
    return 2;
  }
  bool parse_special = true, decode = false, skip_special = false, time = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-special") {
      parse_special = false;
    } else if (a == "--decode") {
      decode = true;
    } else if (a == "--skip-special") {
      skip_special = true;
    } else if (a == "--time") {
      time = true;
    } else {
      std::fprintf(stderr, "tokenize_tool: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  const auto tokenizer = sparkglm::BpeTokenizer::load(argv[1]);
  std::string line, out;
  double seconds = 0;
  size_t bytes = 0;
  while (std::getline(std::cin, line)) {
    const auto input = nlohmann::json::parse(line);
    if (decode) {
      out += hex(tokenizer.decode(input.get<std::vector<int32_t>>(), skip_special));
      out += '\n';
      continue;
    }
    const auto text = input.get<std::string>();
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tokenizer.encode(text, parse_special);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bytes += text.size();
    out += nlohmann::json(ids).dump();
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (time)
    std::fprintf(stderr, "encode: %zu bytes in %.3f s (%.1f MB/s)\n", bytes, seconds,
                 seconds > 0 ? static_cast<double>(bytes) / seconds / 1e6 : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenize_tool: %s\n", e.what());
    return 1;
  }
}
