#include "operator/recipe_fetch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/core/sha256.h"

namespace sparkglm::operator_tool {
namespace {

namespace fs = std::filesystem;

std::string temp_file(const std::string& name, const std::string& bytes) {
  const fs::path p =
      fs::temp_directory_path() / ("sparkglm-fetch-" + std::to_string(getpid()) + "-" + name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

std::string error_of(const std::string& source, const HttpLimits& limits = {}) {
  try {
    fetch_recipe(source, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RecipeFetch, ReadsALocalFileWithItsShaAndTime) {
  const std::string bytes = R"({"command": "serve"})";
  const std::string path = temp_file("ok.json", bytes);
  const FetchedRecipe r = fetch_recipe(path, {});
  EXPECT_EQ(r.source, path);
  EXPECT_EQ(r.bytes, bytes);
  EXPECT_EQ(r.sha256, sha256_hex(bytes));
  EXPECT_EQ(r.fetched_at.size(), 20u);
  EXPECT_EQ(r.json["command"], "serve");
  fs::remove(path);
}

TEST(RecipeFetch, RefusesABodyThatIsNotJsonQuotingWhatCameBack) {
  const std::string path = temp_file("page.html", "<!doctype html><title>Not found</title>");
  const std::string e = error_of(path);
  EXPECT_NE(e.find("not JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("<!doctype html>"), std::string::npos) << e;
  fs::remove(path);
  const std::string array = temp_file("array.json", "[1, 2]");
  EXPECT_NE(error_of(array).find("not an object"), std::string::npos);
  fs::remove(array);
}

// Issue 14: a recipe nested 100,000 deep fits in the 1 MiB fetch limit and crashed `recipe apply`;
// it is refused by name before anything walks it.
TEST(RecipeFetch, RefusesADeeplyNestedRecipeByName) {
  const std::string path =
      temp_file("deep.json", R"({"serve_command": "vllm serve m", "notes": )" +
                                 std::string(100000, '[') + std::string(100000, ']') + "}");
  EXPECT_EQ(error_of(path),
            "invalid config: " + path + ": the recipe: JSON nested deeper than 32 levels");
  fs::remove(path);
}

TEST(RecipeFetch, RefusesAFileOverTheLimit) {
  const std::string path = temp_file("big.json", std::string(2048, ' ') + "{}");
  HttpLimits limits;
  limits.max_bytes = 1024;
  EXPECT_NE(error_of(path, limits).find("larger than the limit"), std::string::npos);
  fs::remove(path);
}

TEST(RecipeFetch, NamesAMissingFileAndOtherSchemes) {
  EXPECT_NE(error_of("/nonexistent/recipe.json").find("no such recipe file"), std::string::npos);
  EXPECT_NE(error_of("ftp://example.test/r.json").find("only http:// and https://"),
            std::string::npos);
  EXPECT_NE(error_of("file:///etc/passwd").find("only http:// and https://"), std::string::npos);
}

TEST(RecipeFetch, AnUnreachableUrlIsAnIoErrorNamingIt) {
  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  try {
    fetch_recipe("http://127.0.0.1:1/recipe.json", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(e.what()).find("http://127.0.0.1:1/recipe.json"), std::string::npos);
  }
}

TEST(RecipeFetch, QuoteStartEscapesControlBytes) {
  EXPECT_EQ(quote_start("a\x01\"b", 80), "\"a\\x01\\\"b\"");
  EXPECT_EQ(quote_start("abcdef", 3), "\"abc...\"");
}

}  // namespace
}  // namespace sparkglm::operator_tool
