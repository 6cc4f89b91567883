#include "reports/progress_line.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>

namespace sparkglm::reports {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  return buf;
}

ProgressLine::ProgressLine(std::ostream& out, bool terminal, double plain_interval_s)
    : out_(out), terminal_(terminal), plain_interval_s_(plain_interval_s) {}

ProgressLine ProgressLine::for_stderr(double plain_interval_s) {
  return ProgressLine(std::cerr, isatty(STDERR_FILENO) == 1, plain_interval_s);
}

std::string ProgressLine::describe(const Progress& p) {
  std::string rep = p.repetition < 0 ? "warmup " + std::to_string(-p.repetition)
                                     : "rep " + std::to_string(p.repetition + 1) + "/" +
                                           std::to_string(p.repetitions);
  std::string line = p.case_id + "  " + rep + "  requests " + std::to_string(p.done) + "/" +
                     std::to_string(p.total) + "  elapsed " + format_duration(p.elapsed_s);
  // The ETA assumes the remaining requests go at the average pace so far.
  if (p.done > 0 && p.total >= p.done)
    line += "  ETA " + format_duration(p.elapsed_s / static_cast<double>(p.done) *
                                       static_cast<double>(p.total - p.done));
  else
    line += "  ETA ?";
  return line;
}

void ProgressLine::update(const Progress& p) {
  const std::string line = describe(p);
  if (terminal_) {
    out_ << '\r' << line;
    if (line.size() < last_width_) out_ << std::string(last_width_ - line.size(), ' ');
    out_.flush();
    last_width_ = line.size();
    open_ = true;
    return;
  }
  const bool finished = p.total > 0 && p.done == p.total && last_plain_done_ != p.done;
  const bool milestone =
      last_plain_s_ < 0 || p.case_id != last_case_ || p.repetition != last_repetition_ || finished;
  if (milestone || p.elapsed_s - last_plain_s_ >= plain_interval_s_) {
    out_ << line << '\n';
    out_.flush();
    last_plain_s_ = p.elapsed_s;
    last_plain_done_ = p.done;
  }
  last_case_ = p.case_id;
  last_repetition_ = p.repetition;
}

void ProgressLine::finish() {
  if (terminal_ && open_) {
    out_ << '\n';
    out_.flush();
  }
  open_ = false;
  last_width_ = 0;
}

}  // namespace sparkglm::reports
