// Feeds arbitrary bytes to every JSON file the project reads, through each reader's real entry
// point: byte 0 picks the reader, the rest is the document. A sparkglm::Error is the reader
// refusing the input, which is correct; anything else (a crash, a stack overflow on deep nesting,
// a sanitizer report, another exception) is a bug. The request body and the JSON inside its
// strings have their own target, request_parser_fuzz.
//
// Readers that take a path get the document written to a scratch file first: what is fuzzed is
// then exactly what `generate`, `serve`, `recipe apply`, `verify` and `qualify` run.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "engine/core/error.h"
#include "engine/model/config.h"
#include "engine/options/profile.h"
#include "engine/text/bpe_tokenizer.h"
#include "gates/gate_definition.h"
#include "operator/http_get.h"
#include "operator/recipe.h"
#include "operator/recipe_fetch.h"
#include "receipts/qualification_record.h"
#include "workloads/workload_spec.h"

namespace {

namespace fs = std::filesystem;

// One scratch folder per fuzzing process (libFuzzer may run several with -jobs).
const fs::path& scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("sparkglm_json_fuzz_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string write_scratch(const std::string& name, std::string_view bytes) {
  const fs::path p = scratch() / name;
  std::ofstream(p, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), std::streamsize(bytes.size()));
  return p.string();
}

void read_one(uint8_t reader, std::string_view doc) {
  using namespace sparkglm;
  using namespace sparkglm::operator_tool;
  using sparkglm::gates::load_gate;
  using sparkglm::workloads::load_workload;
  switch (reader % 7) {
    case 0:  // a checkpoint's config.json (generate, serve)
      (void)ModelConfig::load(write_scratch("config.json", doc));
      break;
    case 1:  // tokenizer.json (serve, tokenize)
      (void)BpeTokenizer::load(write_scratch("tokenizer.json", doc));
      break;
    case 2: {  // a recipe (recipe apply; a fetched one arrives as the same bytes)
      const std::string path = write_scratch("recipe.json", doc);
      const FetchedRecipe fetched = fetch_recipe(path, HttpLimits{});
      (void)parse_recipe(fetched.json, path);
      break;
    }
    case 3:  // a bundle's qualification.json (verify, verify-all, report, sign, promote)
      (void)receipts::check_record(receipts::parse_record_text(doc, "qualification.json"));
      break;
    case 4:  // a profile (serve --profile, promote)
      (void)Profile::parse(doc, "fuzz.json");
      break;
    case 5:  // a workload spec (qualify)
      (void)load_workload(write_scratch("fuzz.json", doc));
      break;
    case 6:  // a gate definition (qualify)
      write_scratch("G2.json", doc);
      (void)load_gate(scratch().string(), "G2");
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  try {
    read_one(data[0], std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  } catch (const sparkglm::Error&) {
    // the reader refused the document, naming why: the correct outcome
  }
  return 0;
}
