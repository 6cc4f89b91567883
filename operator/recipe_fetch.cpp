#include "operator/recipe_fetch.h"

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"
#include "engine/core/utc_time.h"

namespace sparkglm::operator_tool {

namespace fs = std::filesystem;

namespace {

std::string read_local(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw Error(ErrorKind::kIo, path +
                                    ": no such recipe file (expected an http(s):// URL or a "
                                    "path to a JSON file)");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > max_bytes)
    throw Error(ErrorKind::kIo, path + ": the file is larger than the limit of " +
                                    std::to_string(max_bytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size_t(size), '\0');
  if (!in.read(bytes.data(), std::streamsize(bytes.size())))
    throw Error(ErrorKind::kIo, path + ": cannot read the recipe file");
  return bytes;
}

}  // namespace

std::string quote_start(const std::string& bytes, size_t max) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '"') {
      out += char(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, c == '"' ? "\\\"" : "\\x%02x", c);
      out += esc;
    }
  }
  return "\"" + out + (bytes.size() > max ? "...\"" : "\"");
}

FetchedRecipe fetch_recipe(const std::string& url_or_path, const HttpLimits& limits) {
  FetchedRecipe r;
  std::string content_type;
  if (is_http_url(url_or_path)) {
    r.source = url_or_path;
    HttpResult got = http_get(url_or_path, limits);
    if (got.status < 200 || got.status >= 300)
      throw Error(ErrorKind::kIo, url_or_path + ": HTTP status " + std::to_string(got.status) +
                                      " (expected 200); the body starts " + quote_start(got.body));
    r.bytes = std::move(got.body);
    content_type = got.content_type;
  } else {
    if (url_or_path.find("://") != std::string::npos)
      throw Error(ErrorKind::kInvalidArgument,
                  url_or_path + ": only http:// and https:// URLs or a local file path are read");
    r.source = fs::absolute(url_or_path).lexically_normal().string();
    r.bytes = read_local(url_or_path, limits.max_bytes);
  }
  r.sha256 = sha256_hex(r.bytes);
  r.fetched_at = utc_now_iso8601();
  // A recipe over the size or depth limit is refused by name; any other failure is "not JSON".
  check_json_bounds(r.bytes, r.source + ": the recipe", ErrorKind::kInvalidConfig,
                    json_limits::kRecipe);
  try {
    r.json = parse_json(r.bytes, r.source, ErrorKind::kInvalidConfig, json_limits::kRecipe);
  } catch (const Error&) {
    throw Error(ErrorKind::kInvalidConfig,
                r.source + ": the recipe is not JSON (" +
                    (content_type.empty() ? std::string("no content type")
                                          : "content type " + content_type) +
                    ", " + std::to_string(r.bytes.size()) + " bytes starting " +
                    quote_start(r.bytes) + ")");
  }
  if (!r.json.is_object())
    throw Error(
        ErrorKind::kInvalidConfig,
        r.source + ": the recipe is JSON but not an object (got " + quote_start(r.bytes) + ")");
  return r;
}

}  // namespace sparkglm::operator_tool
