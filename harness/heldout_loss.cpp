#include "harness/heldout_loss.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/model/forward_batch.h"

namespace sparkglm::harness {

namespace {

constexpr size_t kMaxExamples = 4096;
constexpr JsonLimits kHeldoutLimits{64 * json_limits::kMiB, 8};

Error bad(const std::string& path, const std::string& what) {
  return Error(ErrorKind::kInvalidArgument, path + ": " + what);
}

// -log softmax(row)[target] in double, and whether target is the row's argmax (lowest id first).
std::pair<double, bool> score_row(const float* row, int vocab, int32_t target) {
  int best = 0;
  for (int v = 1; v < vocab; ++v)
    if (row[v] > row[best]) best = v;
  const double mx = row[best];
  double sum = 0;
  for (int v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
  return {std::log(sum) + mx - double(row[target]), best == target};
}

}  // namespace

HeldoutSet read_heldout(const std::string& path, int vocab_size, int64_t max_tokens) {
  const nlohmann::json j = parse_json_file(path, ErrorKind::kInvalidArgument, kHeldoutLimits);
  if (!j.is_object() || !j.contains("schema") || j["schema"] != "sparkglm.heldout/1")
    throw bad(path, "expected an object with \"schema\": \"sparkglm.heldout/1\"");
  if (!j.contains("generator") || !j["generator"].is_string())
    throw bad(path, "\"generator\" must be a string");
  if (!j.contains("examples") || !j["examples"].is_array() || j["examples"].empty())
    throw bad(path, "\"examples\" must be a non-empty array");
  if (j["examples"].size() > kMaxExamples)
    throw bad(path, "more than " + std::to_string(kMaxExamples) + " examples");
  HeldoutSet set;
  set.generator = j["generator"];
  for (size_t i = 0; i < j["examples"].size(); ++i) {
    const nlohmann::json& e = j["examples"][i];
    const std::string where = "example " + std::to_string(i);
    if (!e.is_object() || !e.contains("task") || !e["task"].is_string() || e["task"] == "")
      throw bad(path, where + ": \"task\" must be a non-empty string");
    if (!e.contains("tokens") || !e["tokens"].is_array())
      throw bad(path, where + ": \"tokens\" must be an array of token ids");
    if (!e.contains("reply_from") || !e["reply_from"].is_number_integer())
      throw bad(path, where + ": \"reply_from\" must be an integer");
    HeldoutExample x;
    x.task = e["task"];
    const int64_t n = int64_t(e["tokens"].size()), from = e["reply_from"];
    if (n > max_tokens)
      throw bad(path, where + ": " + std::to_string(n) + " tokens, more than the " +
                          std::to_string(max_tokens) + " this runner holds");
    if (from < 1 || from >= n)
      throw bad(path, where + ": \"reply_from\" " + std::to_string(from) +
                          " leaves no prompt or no reply in " + std::to_string(n) + " tokens");
    x.reply_from = int(from);
    for (const nlohmann::json& t : e["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size)
        throw bad(path,
                  where + ": a token is not an id in [0, " + std::to_string(vocab_size) + ")");
      x.tokens.push_back(t.get<int32_t>());
    }
    set.examples.push_back(std::move(x));
  }
  return set;
}

nlohmann::json HeldoutLoss::to_json() const {
  nlohmann::json t = nlohmann::json::object();
  for (const TaskLoss& l : tasks)
    t[l.task] = {{"examples", l.examples},
                 {"exact", l.exact},
                 {"tokens", l.tokens},
                 {"nll", l.nll},
                 {"accuracy", l.accuracy}};
  return {{"nll", nll}, {"accuracy", accuracy}, {"tasks", t}};
}

HeldoutLoss HeldoutLoss::of_tasks(std::vector<TaskLoss> tasks) {
  std::sort(tasks.begin(), tasks.end(),
            [](const TaskLoss& a, const TaskLoss& b) { return a.task < b.task; });
  HeldoutLoss r;
  for (const TaskLoss& l : tasks) {
    r.nll += l.nll / double(tasks.size());
    r.accuracy += l.accuracy / double(tasks.size());
  }
  r.tasks = std::move(tasks);
  return r;
}

HeldoutLoss score_heldout(ModelRunner& runner, const HeldoutSet& set, int chunk,
                          const SlotForChunk& slot_for, std::vector<double>* token_nll) {
  SPARKGLM_ASSERT(chunk > 0, "score_heldout: chunk must be positive");
  const int vocab = runner.config().vocab_size;
  const int bs = runner.cache_geometry().block_size;
  std::map<std::string, TaskLoss> by_task;
  for (const HeldoutExample& x : set.examples) {
    const int n = int(x.tokens.size());
    std::vector<int32_t> table(size_t((n + bs - 1) / bs));
    for (size_t b = 0; b < table.size(); ++b) table[b] = int32_t(b);
    TaskLoss& l = by_task[x.task];
    l.task = x.task;
    ++l.examples;
    bool exact = true;
    ForwardOutput out;
    for (int at = 0, c = 0; at < n - 1; at += chunk, ++c) {  // the last token predicts nothing
      const int end = std::min(n - 1, at + chunk);
      ForwardBatch b;
      b.add_sequence({x.tokens.begin() + at, x.tokens.begin() + end}, at,
                     slot_for ? slot_for(c) : 0,
                     {table.begin(), table.begin() + (end + bs - 1) / bs}, true,
                     /*all_logits=*/true);
      runner.forward(b, out);
      for (int t = std::max(at, x.reply_from - 1); t < end; ++t) {
        const auto [nll, hit] =
            score_row(out.logits.data() + int64_t(t - at) * vocab, vocab, x.tokens[size_t(t + 1)]);
        l.nll += nll;
        if (token_nll) token_nll->push_back(nll);
        l.accuracy += hit;
        exact = exact && hit;
        ++l.tokens;
      }
    }
    l.exact += exact;
  }
  std::vector<TaskLoss> tasks;
  for (auto& [name, l] : by_task) {
    l.nll /= double(l.tokens);
    l.accuracy /= double(l.tokens);
    tasks.push_back(l);
  }
  return HeldoutLoss::of_tasks(std::move(tasks));
}

}  // namespace sparkglm::harness
