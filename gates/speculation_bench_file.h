#pragma once
// A speculation_bench file ("sparkglm.speculation_bench/1", bench/speculation_bench.cpp) read and
// checked field by field: what `measure --speculation-bench` judges and what a speculation bundle
// carries. A file is refused, with an Error naming it and the field, when it is larger than
// 16 MiB, holds more than 256 cells, lacks the identity of the binary and model that wrote it
// (files written before the schema was stated are refused: run the bench again), was profiled
// (--profile-steps waits on the device every step), holds a cell
// twice, or holds a cell with k >= 1 whose k = 0 cell (same concurrency, rollback and
// draft_in_step) is not in the same file: speedup and output identity are judged against that one.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm::gates {

inline constexpr const char* kSpeculationBenchSchema = "sparkglm.speculation_bench/1";

struct SpeculationCell {
  int k = 0;  // draft tokens per verify step; 0 is plain decode
  int concurrency = 1;
  std::string rollback;  // records | recompute
  bool draft_in_step = true;
  std::vector<double> decode_tok_s;   // aggregate decode tok/s, one per repetition
  std::vector<double> acceptance;     // acceptance_by_position: k fractions
  double tokens_per_verify_step = 1;  // tokens committed per verify step
  std::string output_sha256;          // every request's greedy tokens

  // "c1-k1-records-instep" ("-outstep" when the drafter ran its first forward itself).
  std::string case_id() const;
};

struct SpeculationBench {
  std::string file;  // how errors and notes name it: the path given, or the bundle's artifact
  std::string device, model_dir, commit, binary_sha256, config_sha256;
  std::string weights;  // the loaded checkpoint's identity; "" when the file does not say
  bool clean_tree = false;
  int reps = 0;
  int waves = 1;    // rounds a repetition, each on the next `concurrency` prompts (--waves)
  int prompts = 0;  // distinct prompts the bench was given; 0 where the file does not say
  std::vector<SpeculationCell> cells;

  // The distinct prompts a repetition at `concurrency` ran (prompt i of round w is
  // (w * concurrency + i) mod prompts): 0 where the file does not say how many it was given.
  int prompts_run(int concurrency) const;

  std::string model() const;  // the model directory's name ("tinyglm-micro-trained")
  // The k = 0 cell of `c`'s concurrency, rollback and draft_in_step; parse_speculation_bench
  // refuses a file where it is missing, so null only for a bench built by hand.
  const SpeculationCell* k0_of(const SpeculationCell& c) const;
};

// Throws Error(kInvalidArgument) naming `file` and the field.
SpeculationBench parse_speculation_bench(const nlohmann::json& doc, const std::string& file);

// The file's bytes (at most 16 MiB), or Error(kInvalidArgument) naming `flag` and the path.
std::string read_speculation_bench_bytes(const std::filesystem::path& path,
                                         const std::string& flag);
SpeculationBench parse_speculation_bench_bytes(const std::string& bytes, const std::string& file);

}  // namespace sparkglm::gates
