// Exact prompt sizes (prompt_builder.h): a bracketing search over the number of filler units for
// the longest filler that stays at or under the target, then single-token pad pieces for the rest.
#include <algorithm>
#include <array>
#include <string>

#include "engine/core/error.h"
#include "workloads/prompt_builder.h"

namespace sparkglm::workloads {

using nlohmann::json;

namespace {

// Pieces that are one token in GLM's vocabulary (a space and a common word is its own
// pre-token) or in a byte vocabulary ("." and "a"); tried in order.
constexpr std::array<const char*, 8> kPadPieces = {" the", " a", " and", " of",
                                                   "\n",   ".",  "a",    " x"};
constexpr int kMaxCalls = 200;

using PromptCounter = std::function<int32_t(const Prompt&)>;

class Fitter {
 public:
  Fitter(Prompt& p, int32_t target, const PromptCounter& count)
      : p_(p), target_(target), count_(count) {}

  void run() {
    if (target_ < 1) fail("the target must be at least 1 token");
    p_.pad.clear();
    const int32_t base = at(0);
    base_ = base;
    if (base > target_)
      fail("the prompt's fixed text alone is " + std::to_string(base) +
           " tokens; raise the target (or prompt.min_tokens)");
    int64_t lo = 0;
    int32_t c_lo = base;
    if (c_lo < target_ && p_.filler) search(lo, c_lo);
    set(lo);
    pad(c_lo);
    p_.tokens = target_;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(ErrorKind::kInvalidArgument,
                "calibrating " + (p_.marker.empty() ? std::string("a prompt") : p_.marker) +
                    " to exactly " + std::to_string(target_) + " tokens: " + why);
  }

  void set(int64_t units) {
    p_.units = units;
    p_.render();
  }
  int32_t at(int64_t units) {
    set(units);
    return counted();
  }
  int32_t counted() {
    if (++calls_ > kMaxCalls) fail("no fit after " + std::to_string(kMaxCalls) + " counts");
    return count_(p_);
  }

  // The largest unit count whose prompt is <= target, by interpolation between the bracket's
  // ends, falling back to bisection when interpolation shrinks the bracket by less than half.
  void search(int64_t& lo, int32_t& c_lo) {
    int64_t hi = -1;  // unknown until some count exceeds the target
    int32_t c_hi = 0;
    bool bisect = false;
    while (hi < 0 || hi - lo > 1) {
      int64_t n;
      if (hi < 0) {
        // Grow: assume at least one token per unit at first, then extrapolate the observed rate.
        const double rate = lo == 0 ? 1.0 : double(c_lo - base_) / double(lo);
        n = lo + std::max<int64_t>(1, int64_t(double(target_ - c_lo) / std::max(rate, 1e-3)) + 1);
      } else if (bisect) {
        n = lo + (hi - lo) / 2;
      } else {
        n = lo + int64_t(double(target_ - c_lo) * double(hi - lo) / double(c_hi - c_lo));
      }
      n = hi < 0 ? n : std::clamp<int64_t>(n, lo + 1, hi - 1);
      const int64_t width = hi < 0 ? 0 : hi - lo;
      const int32_t c = at(n);
      if (c == target_) {
        lo = n, c_lo = c;
        return;
      }
      if (c < target_) {
        lo = n, c_lo = c;
      } else {
        hi = n, c_hi = c;
      }
      bisect = width > 0 && (hi - lo) * 2 > width;
    }
  }

  // Closes the gap (a unit can be several tokens) with pad pieces: all of the gap in one piece
  // repeated when that lands exactly, otherwise one piece at a time.
  void pad(int32_t current) {
    while (current < target_) {
      const int32_t gap = target_ - current;
      bool moved = false;
      for (const char* piece : kPadPieces) {
        const std::string before = p_.pad;
        std::string run;
        for (int32_t k = 0; k < gap; ++k) run += piece;
        p_.pad = before + run;
        p_.render();
        if (counted() == target_) return;
        if (gap == 1) {
          p_.pad = before;
          continue;
        }
        p_.pad = before + piece;
        p_.render();
        const int32_t c = counted();
        if (c > current && c <= target_) {
          current = c;
          moved = true;
          break;
        }
        p_.pad = before;
      }
      if (!moved) {
        p_.render();
        fail("reached " + std::to_string(current) + " tokens and no pad piece adds one token");
      }
    }
  }

  Prompt& p_;
  int32_t target_;
  const PromptCounter& count_;
  int calls_ = 0;
  int32_t base_ = -1;
};

}  // namespace

nlohmann::json tokenize_body(const json& request_body) {
  json out = json::object();
  auto copy = [&](const char* key) {
    if (request_body.contains(key)) out[key] = request_body[key];
  };
  copy("model");
  copy("add_special_tokens");
  if (request_body.contains("messages")) {
    for (const char* key :
         {"messages", "tools", "reasoning_effort", "chat_template_kwargs", "add_generation_prompt"})
      copy(key);
  } else {
    copy("prompt");
  }
  return out;
}

void calibrate(Prompt& prompt, int32_t target, const json& body_base, const TokenCounter& count) {
  const PromptCounter by_body = [&](const Prompt& p) {
    json body = body_base.is_object() ? body_base : json::object();
    const json fields = p.body_fields();
    for (const auto& [key, value] : fields.items()) body[key] = value;
    return count(body);
  };
  Fitter(prompt, target, by_body).run();
}

void calibrate(Prompt& prompt, int32_t target, const TextTokenCounter& count) {
  const PromptCounter by_text = [&](const Prompt& p) { return count(p.text()); };
  Fitter(prompt, target, by_text).run();
}

}  // namespace sparkglm::workloads
