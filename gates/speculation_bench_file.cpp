#include "gates/speculation_bench_file.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <system_error>
#include <tuple>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/runtime/speculation/speculator.h"
#include "receipts/bundle_file.h"
#include "receipts/qualification_record.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxBytes = size_t(16) << 20;
constexpr size_t kMaxCells = 256;
// The bench's own options bound these (--reps 1..100, --concurrency 1..64, --waves 1..64); a
// little room above; prompts far above any held-out file's.
constexpr int64_t kMaxReps = 100, kMaxConcurrency = 1024, kMaxWaves = 64, kMaxPrompts = 1 << 20;

// Field checks whose errors name the file and the field's path.
struct Fields {
  const std::string& file;

  [[noreturn]] void bad(const std::string& at, const std::string& expected, const json& got) const {
    const std::string shown = got.is_null() ? "nothing" : got.dump().substr(0, 80);
    throw Error(ErrorKind::kInvalidArgument,
                file + ": field " + at + ": expected " + expected + ", got " + shown);
  }
  static const json& get(const json& o, const char* key) {
    static const json missing;
    return o.is_object() && o.contains(key) ? o[key] : missing;
  }
  std::string text(const json& o, const std::string& at, const char* key) const {
    const json& v = get(o, key);
    if (!v.is_string() || v.get<std::string>().empty()) bad(at + key, "a non-empty string", v);
    return v.get<std::string>();
  }
  std::string sha256(const json& o, const std::string& at, const char* key) const {
    const json& v = get(o, key);
    if (!v.is_string() || !receipts::is_sha256_hex(v.get<std::string>()))
      bad(at + key, "64 lowercase hex digits", v);
    return v.get<std::string>();
  }
  int64_t integer(const json& o, const std::string& at, const char* key, int64_t lo,
                  int64_t hi) const {
    const json& v = get(o, key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      bad(at + key, "an integer in " + std::to_string(lo) + ".." + std::to_string(hi), v);
    return v.get<int64_t>();
  }
  bool boolean(const json& o, const std::string& at, const char* key) const {
    const json& v = get(o, key);
    if (!v.is_boolean()) bad(at + key, "true or false", v);
    return v.get<bool>();
  }
  double number(const json& o, const std::string& at, const char* key, double lo, double hi) const {
    const json& v = get(o, key);
    if (!v.is_number() || !(v.get<double>() >= lo && v.get<double>() <= hi))
      bad(at + key, "a number in [" + json(lo).dump() + ", " + json(hi).dump() + "]", v);
    return v.get<double>();
  }
  std::vector<double> numbers(const json& o, const std::string& at, const char* key, size_t n,
                              double lo, double hi) const {
    const json& v = get(o, key);
    if (!v.is_array() || v.size() != n)
      bad(at + key, "an array of " + std::to_string(n) + " numbers", v);
    std::vector<double> out;
    for (size_t i = 0; i < n; ++i) {
      if (!v[i].is_number() || !(v[i].get<double>() >= lo && v[i].get<double>() <= hi))
        bad(at + key + "[" + std::to_string(i) + "]",
            "a number in [" + json(lo).dump() + ", " + json(hi).dump() + "]", v[i]);
      out.push_back(v[i].get<double>());
    }
    return out;
  }
};

SpeculationCell parse_cell(const Fields& f, const json& c, const std::string& at,
                           const std::string& device, int reps) {
  if (!c.is_object()) f.bad(at, "an object", c);
  if (f.text(c, at + ".", "device") != device)
    f.bad(at + ".device", "the file's device \"" + device + "\"", c["device"]);
  SpeculationCell cell;
  cell.k = int(f.integer(c, at + ".", "k", 0, kMaxSpeculativeTokens));
  cell.concurrency = int(f.integer(c, at + ".", "concurrency", 1, kMaxConcurrency));
  cell.rollback = f.text(c, at + ".", "rollback");
  cell.draft_in_step = f.boolean(c, at + ".", "draft_in_step");
  const double inf = HUGE_VAL;
  cell.decode_tok_s = f.numbers(c, at + ".", "decode_tok_s", size_t(reps), 1e-9, 1e12);
  // The bench's median is the sorted samples' element n / 2: a file whose median is another
  // number was not written by it.
  std::vector<double> sorted = cell.decode_tok_s;
  std::sort(sorted.begin(), sorted.end());
  const double median = f.number(c, at + ".", "median_decode_tok_s", 0, inf);
  const double want = sorted[sorted.size() / 2];
  if (std::fabs(median - want) > 1e-9 * want)
    f.bad(at + ".median_decode_tok_s", "the middle of decode_tok_s, " + json(want).dump(),
          c["median_decode_tok_s"]);
  cell.acceptance = f.numbers(c, at + ".", "acceptance_by_position", size_t(cell.k), 0.0, 1.0);
  cell.tokens_per_verify_step =
      f.number(c, at + ".", "tokens_per_verify_step", 1.0, double(cell.k + 1));
  cell.output_sha256 = f.sha256(c, at + ".", "output_sha256");
  return cell;
}

}  // namespace

std::string SpeculationCell::case_id() const {
  return "c" + std::to_string(concurrency) + "-k" + std::to_string(k) + "-" + rollback +
         (draft_in_step ? "-instep" : "-outstep");
}

std::string SpeculationBench::model() const {
  fs::path p = fs::path(model_dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/" names dir
  return p.filename().string();
}

int SpeculationBench::prompts_run(int concurrency) const {
  return int(std::min<int64_t>(int64_t(waves) * concurrency, prompts));
}

const SpeculationCell* SpeculationBench::k0_of(const SpeculationCell& c) const {
  for (const SpeculationCell& z : cells)
    if (z.k == 0 && z.concurrency == c.concurrency && z.rollback == c.rollback &&
        z.draft_in_step == c.draft_in_step)
      return &z;
  return nullptr;
}

SpeculationBench parse_speculation_bench(const json& doc, const std::string& file) {
  const Fields f{file};
  if (!doc.is_object()) f.bad("(top level)", "an object", doc);
  if (!doc.contains("schema"))
    throw Error(ErrorKind::kInvalidArgument,
                file +
                    ": no \"schema\": a speculation_bench file written before the bench "
                    "stated its schema and identity (commit, binary_sha256, config_sha256, "
                    "model_dir); run bench/speculation_bench again to measure with a bundle");
  if (doc["schema"] != kSpeculationBenchSchema)
    f.bad("schema", std::string("\"") + kSpeculationBenchSchema + "\"", doc["schema"]);
  SpeculationBench b;
  b.file = file;
  b.device = f.text(doc, "", "device");
  b.model_dir = f.text(doc, "", "model_dir");
  b.commit = f.text(doc, "", "commit");
  b.binary_sha256 = f.sha256(doc, "", "binary_sha256");
  b.config_sha256 = f.sha256(doc, "", "config_sha256");
  if (doc.contains("weights")) b.weights = f.text(doc, "", "weights");
  b.clean_tree = f.boolean(doc, "", "clean_tree");
  b.reps = int(f.integer(doc, "", "reps", 1, kMaxReps));
  // Both written since 2026-12-05 (waves) and 2026-12-06 (prompts); earlier files ran one round.
  if (doc.contains("waves")) b.waves = int(f.integer(doc, "", "waves", 1, kMaxWaves));
  if (doc.contains("prompts")) b.prompts = int(f.integer(doc, "", "prompts", 1, kMaxPrompts));
  // --profile-steps synchronises every step: its tok/s are not the engine's.
  if (doc.contains("profile_steps") && doc["profile_steps"] != false)
    f.bad("profile_steps", "false (a profiled run's tok/s include a wait per step)",
          doc["profile_steps"]);
  const json& cells = Fields::get(doc, "cells");
  if (!cells.is_array() || cells.empty() || cells.size() > kMaxCells)
    f.bad("cells", "an array of 1.." + std::to_string(kMaxCells) + " cells", cells);
  std::map<std::tuple<int, int, std::string, bool>, size_t> seen;  // cell -> its index
  for (size_t i = 0; i < cells.size(); ++i) {
    const std::string at = "cells[" + std::to_string(i) + "]";
    SpeculationCell c = parse_cell(f, cells[i], at, b.device, b.reps);
    const auto key = std::make_tuple(c.concurrency, c.k, c.rollback, c.draft_in_step);
    if (!seen.emplace(key, i).second)
      throw Error(ErrorKind::kInvalidArgument, file + ": " + at + " (" + c.case_id() +
                                                   ") repeats cells[" + std::to_string(seen[key]) +
                                                   "]");
    b.cells.push_back(std::move(c));
  }
  for (size_t i = 0; i < b.cells.size(); ++i) {
    const SpeculationCell& c = b.cells[i];
    if (c.k > 0 && !seen.count(std::make_tuple(c.concurrency, 0, c.rollback, c.draft_in_step)))
      throw Error(ErrorKind::kInvalidArgument,
                  file + ": cells[" + std::to_string(i) + "] (" + c.case_id() +
                      ") has no k = 0 cell of the same concurrency, rollback and draft_in_step "
                      "in this file: its speedup and output identity are judged against that "
                      "one (run speculation_bench with --k 0,...)");
  }
  return b;
}

std::string read_speculation_bench_bytes(const fs::path& path, const std::string& flag) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || !fs::is_regular_file(path, ec))
    throw Error(ErrorKind::kInvalidArgument, flag + " " + path.string() + ": cannot be read");
  if (size > kMaxBytes)
    throw Error(ErrorKind::kInvalidArgument, flag + " " + path.string() + ": " +
                                                 std::to_string(size) +
                                                 " bytes, larger than a speculation_bench "
                                                 "file's 16 MiB");
  return receipts::read_file(path);
}

SpeculationBench parse_speculation_bench_bytes(const std::string& bytes, const std::string& file) {
  return parse_speculation_bench(
      parse_json_unique_keys(bytes, file, ErrorKind::kInvalidArgument, JsonLimits{kMaxBytes, 16}),
      file);
}

}  // namespace sparkglm::gates
