#include "gates/engine_inputs.h"

#include <functional>
#include <regex>
#include <string>
#include <string_view>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "receipts/bundle_file.h"

namespace sparkglm::gates {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Field checks whose errors name the file and the field's path.
struct Fields {
  std::string file;
  [[noreturn]] void bad(const std::string& at, const std::string& expected, const json& got) const {
    throw Error(ErrorKind::kInvalidArgument,
                file + ": field " + at + ": expected " + expected + ", got " +
                    (got.is_null() ? std::string("nothing") : got.dump().substr(0, 80)));
  }
  // Static, with the path by value: a member taking a temporary path would make g++ 13 warn that
  // the returned reference may dangle (-Wdangling-reference), though it refers into `o`.
  static const json& get(const json& o, std::string_view at) {
    const size_t dot = at.rfind('.');
    const std::string key(dot == std::string_view::npos ? at : at.substr(dot + 1));
    static const json missing;
    return o.is_object() && o.contains(key) ? o[key] : missing;
  }
  std::string text(const json& o, const std::string& at) const {
    const json& v = get(o, at);
    if (!v.is_string() || v.get<std::string>().empty()) bad(at, "a non-empty string", v);
    return v.get<std::string>();
  }
  double positive(const json& o, const std::string& at) const {
    const json& v = get(o, at);
    if (!v.is_number() || !(v.get<double>() > 0)) bad(at, "a positive number", v);
    return v.get<double>();
  }
  // A measured cell: tok/s, median, runs and one positive sample per run.
  void timings(const json& cell, const std::string& at) const {
    positive(cell, at + ".tokens_per_s");
    positive(cell, at + ".median_ms");
    const json& runs = get(cell, at + ".runs");
    if (!runs.is_number_integer() || runs.get<int64_t>() < 1)
      bad(at + ".runs", "an integer >= 1", runs);
    const json& s = get(cell, at + ".samples_ms");
    if (!s.is_array() || int64_t(s.size()) != runs.get<int64_t>())
      bad(at + ".samples_ms", "an array of `runs` (" + runs.dump() + ") numbers", s);
    for (size_t i = 0; i < s.size(); ++i)
      if (!s[i].is_number() || !(s[i].get<double>() > 0))
        bad(at + ".samples_ms[" + std::to_string(i) + "]", "a positive number", s[i]);
  }
  // A _schema cell (bench/runner/constrained_cell.h): its rows, the masks' time of every timed
  // step (>= 0), the unconstrained steps' timings and the grammar's bytes.
  void masks(const json& cell, const std::string& at) const {
    positive(cell, at + ".rows");
    positive(cell, at + ".grammar_bytes");
    const json& m = get(cell, at + ".mask_samples_us");
    const size_t runs = get(cell, at + ".samples_ms").size();
    if (!m.is_array() || m.size() != runs)
      bad(at + ".mask_samples_us", "an array of `runs` (" + std::to_string(runs) + ") numbers", m);
    for (size_t i = 0; i < m.size(); ++i)
      if (!m[i].is_number() || !(m[i].get<double>() >= 0))
        bad(at + ".mask_samples_us[" + std::to_string(i) + "]", "a number >= 0", m[i]);
    timings(get(cell, at + ".unconstrained"), at + ".unconstrained");
  }
  // cells: a non-empty array of objects with a `cell` name, each skipped or measured.
  void cells(const json& doc,
             const std::function<void(const json&, const std::string&)>& measured) const {
    const json& cs = get(doc, "cells");
    if (!cs.is_array() || cs.empty()) bad("cells", "a non-empty array", cs);
    for (size_t i = 0; i < cs.size(); ++i) {
      const std::string at = "cells[" + std::to_string(i) + "]";
      if (!cs[i].is_object()) bad(at, "an object", cs[i]);
      text(cs[i], at + ".cell");
      if (cs[i].contains("skipped"))
        text(cs[i], at + ".skipped");
      else
        measured(cs[i], at);
    }
  }
};

}  // namespace

// prefill_8k and prefill_8192 name one cell (the runner bench writes the first, the peer the
// second).
std::string canonical_cell(const std::string& name) {
  static const std::regex kilo("prefill_([0-9]{1,7})k");
  std::smatch m;
  return std::regex_match(name, m, kilo) ? "prefill_" + std::to_string(std::stoll(m[1]) * 1024)
                                         : name;
}

const json* find_cell(const json& doc, const std::string& name, const std::string& mode) {
  if (!doc.contains("cells") || !doc["cells"].is_array()) return nullptr;
  for (const json& c : doc["cells"])
    if (canonical_cell(c.value("cell", "")) == canonical_cell(name) &&
        (mode.empty() || c.value("mode", "") == mode))
      return &c;
  return nullptr;
}

bool measured(const json* c) {
  return c && !c->contains("skipped");
}

void check_runner_bench(const json& bench, const std::string& file) {
  const Fields f{file};
  if (bench.value("schema", "") != "sparkglm.runner_bench/1")
    f.bad("schema", "\"sparkglm.runner_bench/1\"", f.get(bench, "schema"));
  for (const char* k : {"device", "preset", "config_sha256", "weights", "commit"}) f.text(bench, k);
  f.positive(bench, "num_layers");
  f.positive(bench, "bandwidth_gbps");
  f.positive(bench, "peak_tflops");
  const std::string sha = f.text(bench, "binary_sha256");
  if (!std::regex_match(sha, std::regex("[0-9a-f]{64}")))
    f.bad("binary_sha256", "64 lowercase hex digits", sha);
  f.cells(bench, [&](const json& c, const std::string& at) {
    f.timings(c, at);
    f.positive(c, at + ".floor_ms");
    f.positive(c, at + ".fraction_of_floor");
    if (c.contains("mask_samples_us")) f.masks(c, at);
  });
}

void check_torch_peer(const json& peer, const std::string& file) {
  const Fields f{file};
  if (peer.value("schema", "") != "sparkglm.torch_peer/1")
    f.bad("schema", "\"sparkglm.torch_peer/1\"", f.get(peer, "schema"));
  for (const char* k : {"preset", "device", "torch"}) f.text(peer, k);
  f.cells(peer, [&](const json& c, const std::string& at) { f.timings(c, at); });
  for (size_t i = 0; i < peer["cells"].size(); ++i) {
    const std::string mode = f.text(peer["cells"][i], "cells[" + std::to_string(i) + "].mode");
    if (mode != "eager" && mode != "compile")
      f.bad("cells[" + std::to_string(i) + "].mode", "\"eager\" or \"compile\"", mode);
  }
}

json read_json(const fs::path& path, const std::string& flag) {
  return parse_json(receipts::read_file(path, json_limits::kReceipt.max_bytes),
                    flag + " " + path.string(), ErrorKind::kInvalidArgument, json_limits::kReceipt);
}

}  // namespace sparkglm::gates
