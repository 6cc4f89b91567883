#include "harness/server_identity.h"

#include <openssl/evp.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"

namespace sparkglm::harness {
namespace {

// The text after `marker` on the first log line that holds it ("" when none does).
std::string after(const std::string& log, const std::string& marker) {
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  const size_t end = log.find('\n', start);
  return log.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// `binary --version` as key: value pairs, read through a pipe with the path quoted.
nlohmann::json version_fields(const std::string& binary) {
  std::string quoted = "'";
  for (char c : binary) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "' --version 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(quoted.c_str(), "r"), pclose);
  nlohmann::json out = nlohmann::json::object();
  if (!pipe) return out;
  std::array<char, 512> line{};
  while (fgets(line.data(), line.size(), pipe.get())) {
    std::string l(line.data());
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
    const size_t colon = l.find(": ");
    if (colon != std::string::npos) out[l.substr(0, colon)] = l.substr(colon + 2);
  }
  return out;
}

}  // namespace

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot read " + path);
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::array<char, 1 << 16> buf{};
  while (in.read(buf.data(), buf.size()) || in.gcount() > 0)
    EVP_DigestUpdate(ctx.get(), buf.data(), size_t(in.gcount()));
  std::array<unsigned char, 32> digest{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), digest.data(), &n);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : digest) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

ServerIdentity read_server_identity(const std::string& label, const std::vector<std::string>& argv,
                                    const std::string& log_text) {
  if (argv.empty()) throw Error(ErrorKind::kInvalidArgument, "server identity: empty command");
  ServerIdentity out;
  const std::string config = after(log_text, "effective config: ");
  const std::string model = after(log_text, "model identity: ");
  if (config.empty() || model.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "the server log of arm " + label +
                    " lacks its \"effective config:\" or \"model identity:\" line");
  out.effective_config = parse_json(config, "the \"effective config:\" line of arm " + label,
                                    ErrorKind::kInvalidArgument, json_limits::kServerReply);
  const nlohmann::json m = parse_json(model, "the \"model identity:\" line of arm " + label,
                                      ErrorKind::kInvalidArgument, json_limits::kServerReply);
  // The summary line: "profile NAME (sha256 HEX), config sha256 HEX" or "no profile, config
  // sha256 HEX" (override lines also say "profile", so the line is found by its tail).
  const size_t tail = log_text.find(", config sha256 ");
  if (tail == std::string::npos)
    throw Error(ErrorKind::kInvalidArgument,
                "the server log of arm " + label + " lacks its \"config sha256\" summary line");
  const std::string config_sha = log_text.substr(tail + 16, 64);
  const size_t line_start =
      log_text.rfind('\n', tail) == std::string::npos ? 0 : log_text.rfind('\n', tail) + 1;
  const std::string head = log_text.substr(line_start, tail - line_start);
  std::string profile, profile_sha;
  const size_t named = head.find(" profile ");
  if (named != std::string::npos) {
    const std::string rest = head.substr(named + 9);
    profile = rest.substr(0, rest.find(' '));
    const size_t at = rest.find("(sha256 ");
    if (at != std::string::npos) profile_sha = rest.substr(at + 8, 64);
  }
  const nlohmann::json version = version_fields(argv[0]);
  std::vector<std::string> args(argv.begin() + 1, argv.end());
  out.identity = {{"label", label},
                  {"commit", version.value("commit", "unknown")},
                  {"clean_tree", version.value("clean_tree", "unknown") == "true"},
                  {"binary_sha256", file_sha256(argv[0])},
                  {"profile", profile},
                  {"profile_sha256", profile_sha},
                  {"effective_config_sha256", config_sha},
                  {"model",
                   {{"preset", m.value("model_id", "")},
                    {"config_sha256", m.value("config_sha256", "")},
                    {"weights", m.value("weights", "")}}},
                  {"device", out.effective_config.value("device", "")},
                  {"args", args}};
  return out;
}

}  // namespace sparkglm::harness
