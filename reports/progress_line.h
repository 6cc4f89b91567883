#pragma once
// Progress of a long run. On a terminal one line is rewritten in place with "\r" (case,
// repetition, requests done / total, elapsed, ETA); into a file or a pipe, where "\r" would only
// pile up, a plain line is printed at milestones (a new case or repetition, the last request) and
// otherwise at most every `plain_interval_s`. The caller passes the elapsed time, so the line
// itself reads no clock and its output is reproducible.
#include <cstdint>
#include <ostream>
#include <string>

namespace sparkglm::reports {

struct Progress {
  std::string case_id;
  int32_t repetition = 0;   // 0-based; negative for a warmup
  int32_t repetitions = 0;  // of this case
  int64_t done = 0;         // requests finished over the whole run
  int64_t total = 0;        // requests the whole run will send
  double elapsed_s = 0;     // since the run started
};

class ProgressLine {
 public:
  ProgressLine(std::ostream& out, bool terminal, double plain_interval_s = 30);
  // Writes to stderr, as a terminal line when stderr is one (isatty).
  static ProgressLine for_stderr(double plain_interval_s = 30);

  void update(const Progress& p);
  // Ends the rewritten line with a newline (a terminal) so that later output starts clean.
  void finish();

  // The text of one update: "decode_c1  rep 2/3  requests 12/36  elapsed 1m05s  ETA 2m10s".
  static std::string describe(const Progress& p);

 private:
  std::ostream& out_;
  bool terminal_;
  double plain_interval_s_;
  double last_plain_s_ = -1;  // elapsed time of the last plain line; < 0 before the first
  int64_t last_plain_done_ = -1;
  std::string last_case_;
  int32_t last_repetition_ = 0;
  size_t last_width_ = 0;  // of the line on the terminal, to blank what a shorter one leaves
  bool open_ = false;      // a terminal line is showing and not yet ended
};

// "45s", "3m07s", "2h05m".
std::string format_duration(double seconds);

}  // namespace sparkglm::reports
