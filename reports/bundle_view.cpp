#include "reports/bundle_view.h"

#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"

namespace sparkglm::reports {

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, path.string() + ": cannot open");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw Error(ErrorKind::kIo, path.string() + ": read failed");
  return bytes.str();
}

nlohmann::json parse_json(const std::string& text, const std::string& where) {
  return sparkglm::parse_json(text, where, ErrorKind::kInvalidArgument, json_limits::kReceipt);
}

}  // namespace

BundleView load_bundle(const std::filesystem::path& dir) {
  BundleView bundle;
  bundle.dir = dir;
  if (!std::filesystem::is_directory(dir))
    throw Error(ErrorKind::kIo, dir.string() + ": not a bundle folder (expected a directory)");
  const std::filesystem::path manifest = dir / "qualification.json";
  if (!std::filesystem::exists(manifest))
    throw Error(ErrorKind::kIo, manifest.string() + ": missing (every bundle has one)");
  const std::string bytes = read_file(manifest);
  bundle.qualification_sha256 = sha256_hex(bytes);
  bundle.record = parse_json(bytes, manifest.string());
  if (!bundle.record.is_object())
    throw Error(ErrorKind::kInvalidArgument, manifest.string() + ": expected a JSON object");

  const std::filesystem::path requests = dir / "requests.jsonl";
  if (std::filesystem::exists(requests)) {
    std::istringstream lines(read_file(requests));
    std::string line;
    for (int line_no = 1; std::getline(lines, line); ++line_no) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = requests.string() + " line " + std::to_string(line_no);
      try {
        bundle.requests.push_back(harness::record_from_json(parse_json(line, where)));
      } catch (const Error& e) {
        throw Error(e.kind(), where + ": " + e.message());
      }
    }
  }
  return bundle;
}

std::optional<nlohmann::json> read_bundle_json(const BundleView& bundle, const std::string& path) {
  const std::filesystem::path file = bundle.dir / path;
  if (!std::filesystem::exists(file)) return std::nullopt;
  return parse_json(read_file(file), file.string());
}

const nlohmann::json* find_path(const nlohmann::json& j, std::string_view dotted) {
  const nlohmann::json* at = &j;
  while (!dotted.empty()) {
    const size_t dot = dotted.find('.');
    const std::string key(dotted.substr(0, dot));
    if (!at->is_object()) return nullptr;
    const auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
    dotted = dot == std::string_view::npos ? std::string_view() : dotted.substr(dot + 1);
  }
  return at;
}

std::string display(const nlohmann::json* value, const std::string& fallback) {
  if (!value || value->is_null()) return fallback;
  if (value->is_string()) return value->get<std::string>();
  return value->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string text_at(const nlohmann::json& j, std::string_view dotted, const std::string& fallback) {
  return display(find_path(j, dotted), fallback);
}

std::string gate_headline(const nlohmann::json& record) {
  const nlohmann::json* gates = find_path(record, "gates");
  if (!gates || !gates->is_array() || gates->empty()) return "INCOMPLETE";
  bool failed = false, incomplete = false, passed = false;
  for (const nlohmann::json& gate : *gates) {
    const std::string status = text_at(gate, "status", "");
    if (status == "fail")
      failed = true;
    else if (status == "pass")
      passed = true;
    else if (status != "not-applicable")
      incomplete = true;
  }
  if (failed) return "FAIL";
  if (incomplete || !passed) return "INCOMPLETE";
  return "PASS";
}

bool has_baseline(const nlohmann::json& record) {
  const nlohmann::json* baseline = find_path(record, "change.baseline");
  return baseline && baseline->is_object();
}

}  // namespace sparkglm::reports
