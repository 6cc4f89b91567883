#include "workloads/prompt_builder.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/core/error.h"
#include "workloads/filler_text.h"
#include "workloads/probe_prompts.h"

namespace sparkglm::workloads {

using nlohmann::json;

namespace {

// Stream tags, so that one case seed gives independent streams per purpose.
constexpr uint64_t kTagRequest = 1, kTagSystem = 2, kTagValues = 3, kTagTable = 4;

std::function<std::string(int64_t)> prose_filler(uint64_t seed) {
  return [seed](int64_t n) { return prose_words(seed, n); };
}

std::string echo_instruction(const Prompt& p, bool echo) {
  return echo ? "Begin your reply with the tag " + p.marker + " exactly as written here.\n" : "";
}

// The two-hop needle: rows of "key -> code" then "code -> value", the needle's row in each table
// at `depth` of it (negative: 37 % and 61 %); distractors never reuse the needle's key, code or
// value.
struct Needle {
  std::string key, code, value;
};

std::function<std::string(int64_t)> needle_filler(uint64_t seed, Needle needle, double depth) {
  return [seed, needle, depth](int64_t n) {
    const int64_t first = (n + 1) / 2, second = n / 2;
    const int64_t at1 = depth < 0 ? first * 37 / 100 : std::llround(double(first) * depth);
    const int64_t at2 = depth < 0 ? second * 61 / 100 : std::llround(double(second) * depth);
    std::string out = "Table 1 (key -> code):\n";
    for (int64_t i = 0; i <= first; ++i) {
      if (i == at1) out += "key " + needle.key + " -> code " + needle.code + "\n";
      if (i == first) break;
      std::string key = letter_tag(seed, uint64_t(2 * i), 6);
      if (key == needle.key) key[0] = key[0] == 'a' ? 'b' : 'a';
      out += "key " + key + " -> code " + letter_tag(seed, uint64_t(2 * i + 1), 4) + "-" +
             std::to_string(draw_between(seed, uint64_t(i), 1000, 9999)) + "\n";
    }
    out += "\nTable 2 (code -> value):\n";
    for (int64_t i = 0; i <= second; ++i) {
      if (i == at2) out += "code " + needle.code + " -> value " + needle.value + "\n";
      if (i == second) break;
      const uint64_t k = uint64_t(1000000 + i);
      std::string value = std::to_string(draw_between(seed, k, 10000000, 99999999));
      if (value == needle.value) value[0] = value[0] == '1' ? '2' : '1';
      out += "code " + letter_tag(seed, 2 * k, 4) + "-" +
             std::to_string(draw_between(seed, k + 500000, 1000, 9999)) + " -> value " + value +
             "\n";
    }
    return out;
  };
}

// One request's prompt for every builder but conversation.
Prompt build_single(const CaseSpec& spec, const RequestIdentity& id) {
  const std::string& b = spec.prompt.builder;
  const uint64_t seed = mix_seed(spec.prompt.seed, kTagRequest, uint64_t(id.index));
  Prompt p;
  p.endpoint = spec.endpoint;
  p.marker = make_marker(id);
  p.messages = {{"user", ""}};
  p.head = p.marker + "\n" + echo_instruction(p, spec.prompt.echo_marker);
  if (b == "prose" || b == "filler") {
    p.head += "Continue this text in the same style.\n\n";
    p.filler = prose_filler(seed);
  } else if (b == "code") {
    p.head += "// Continue this C++ function in the same style.\nint mix(int v0) {\n";
    p.filler = [seed](int64_t n) { return code_lines(seed, n); };
  } else if (b == "structured") {
    p.head += "Background notes, not needed for the task:\n";
    p.filler = prose_filler(seed);
    p.tail =
        "\n\nTask: output a JSON array of exactly 50 objects {\"index\": i, \"square\": i*i} for "
        "i = 1, 2, ..., 50 in order, and nothing else.\n";
  } else if (b == "counting") {
    p.head += "Background notes, not needed for the task:\n";
    p.filler = prose_filler(seed);
    p.tail = "\n\nTask: count upward from 1, one number per line, and do not stop.\n";
  } else if (b == "arithmetic") {
    const uint64_t v = mix_seed(seed, kTagValues);
    const int64_t a = draw_between(v, 0, 1000, 9999), bb = draw_between(v, 1, 13, 97);
    const int64_t c = draw_between(v, 2, 1000, 9999), d = draw_between(v, 3, 13, 97);
    const int64_t e = draw_between(v, 4, 100, 999);
    p.expected = std::to_string(a * bb - c * d + e);
    p.head += "Background notes, not needed for the task:\n";
    p.filler = prose_filler(seed);
    p.tail = "\n\nTask: compute a*b - c*d + e for a = " + std::to_string(a) +
             ", b = " + std::to_string(bb) + ", c = " + std::to_string(c) +
             ", d = " + std::to_string(d) + ", e = " + std::to_string(e) +
             ". Work it out step by step, then end with a line of the form \"Answer: <n>\".\n";
  } else if (b == "needle") {
    const uint64_t v = mix_seed(seed, kTagValues);
    Needle needle{letter_tag(v, 0, 6),
                  letter_tag(v, 1, 4) + "-" + std::to_string(draw_between(v, 2, 1000, 9999)),
                  std::to_string(draw_between(v, 3, 10000000, 99999999))};
    p.expected = needle.value;
    p.head += "Two lookup tables follow.\n\n";
    p.filler = needle_filler(mix_seed(seed, kTagTable), needle, spec.prompt.depth);
    p.tail = "\nQuestion: what is the value for key " + needle.key +
             "? Find its code in Table 1, then that code's value in Table 2. Reply with the "
             "8-digit value.\n";
  } else if (b == "tool_call") {
    tool_call_prompt(p, seed);
  } else if (b == "json_schema") {
    json_schema_prompt(p, seed, spec.prompt.constrained);
  } else {
    SPARKGLM_ASSERT(false, "build_single: unknown builder " + b);
  }
  p.render();
  return p;
}

// Estimate mode: about four bytes a token, good enough to size a prompt without a server.
int32_t estimate_tokens(const json& body) {
  size_t bytes = 0;
  if (body.contains("prompt")) bytes = body["prompt"].get<std::string>().size();
  if (body.contains("messages"))
    for (const json& m : body["messages"]) bytes += m["content"].get<std::string>().size() + 2;
  return int32_t(bytes / 4);
}

void fit(Prompt& p, int32_t target, const json& body_base, const TokenCounter& count) {
  if (count) return calibrate(p, target, body_base, count);
  try {
    calibrate(p, target, body_base, estimate_tokens);
  } catch (const Error&) {
    p.units = 0;  // an estimate that does not fit is still a prompt; the runner calibrates for real
    p.pad.clear();
    p.render();
  }
  p.tokens = -1;
}

// Conversation turns: every request resends its session's history (earlier calibrated turns and
// a fixed assistant reply) and adds one user message calibrated to the request's total.
std::vector<Prompt> build_conversation(const CaseSpec& spec, int32_t repetition,
                                       const json& body_base, const TokenCounter& count) {
  std::vector<PromptMessage> system;
  if (spec.prompt.system_tokens > 0) {
    Prompt s;
    s.endpoint = Endpoint::kChat;
    s.messages = {{"system", ""}};
    s.head = "<<salt " + spec.salt + ">>\nYou are a careful assistant. Reference notes:\n";
    s.filler = prose_filler(mix_seed(spec.prompt.seed, kTagSystem));
    fit(s, spec.prompt.system_tokens, body_base, count);
    system = s.messages;
  }
  std::map<int32_t, size_t> last;  // session -> the index of its latest turn in `prompts`
  std::vector<Prompt> prompts;
  prompts.reserve(size_t(spec.requests));
  for (int32_t i = 0; i < spec.requests; ++i) {
    const int32_t session = spec.prompt.sessions.empty() ? 0 : spec.prompt.sessions[i];
    Prompt p;
    p.endpoint = Endpoint::kChat;
    p.marker = make_marker({spec.salt, i, repetition, spec.fresh_each_repetition});
    int32_t turn = 0;
    if (auto it = last.find(session); it != last.end()) {
      p.messages = prompts[it->second].messages;
      turn = int32_t(std::count_if(p.messages.begin(), p.messages.end(),
                                   [](const PromptMessage& m) { return m.role == "user"; }));
      p.messages.push_back({"assistant", "Noted part " + std::to_string(turn) + "."});
    } else {
      p.messages = system;
    }
    p.messages.push_back({"user", ""});
    p.slot = p.messages.size() - 1;
    p.head = p.marker + "\n" + echo_instruction(p, spec.prompt.echo_marker) + "Part " +
             std::to_string(turn + 1) + ":\n";
    p.filler = prose_filler(mix_seed(spec.prompt.seed, kTagRequest, uint64_t(i)));
    p.tail = "\n\nReply in one line.";
    fit(p, spec.prompt.tokens_for(i), body_base, count);
    prompts.push_back(std::move(p));
    last[session] = prompts.size() - 1;
  }
  return prompts;
}

}  // namespace

void Prompt::render() {
  SPARKGLM_ASSERT(slot < messages.size(), "Prompt::render: slot outside messages");
  messages[slot].content = head + (filler ? filler(units) : std::string()) + pad + tail;
}

json Prompt::body_fields() const {
  json fields = body_extra;
  if (endpoint == Endpoint::kCompletions) {
    fields["prompt"] = messages.at(slot).content;
    return fields;
  }
  json list = json::array();
  for (const PromptMessage& m : messages)
    list.push_back({{"role", m.role}, {"content", m.content}});
  fields["messages"] = std::move(list);
  return fields;
}

std::string make_marker(const RequestIdentity& id) {
  std::string tag = std::to_string(id.index);
  if (id.tag_repetition)
    tag = (id.repetition < 0 ? "w" + std::to_string(-id.repetition)
                             : "r" + std::to_string(id.repetition)) +
          ":" + tag;
  return "[[sg:" + id.salt + ":" + tag + "]]";
}

bool is_marker_text(const std::string& text) {
  if (text.size() < 9 || text.rfind("[[sg:", 0) != 0 || text.substr(text.size() - 2) != "]]")
    return false;
  for (size_t i = 5; i + 2 < text.size(); ++i) {
    const char c = text[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == ':')) return false;
  }
  return true;
}

const std::vector<std::string>& builder_names() {
  static const std::vector<std::string> names = {
      "prose",      "filler", "code",         "structured", "counting",
      "arithmetic", "needle", "conversation", "tool_call",  "json_schema"};
  return names;
}

bool is_builder(const std::string& name) {
  const auto& n = builder_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

std::vector<Prompt> build_case_prompts(const CaseSpec& spec, int32_t repetition,
                                       const json& body_base, const TokenCounter& count) {
  try {
    if (spec.prompt.builder == "conversation")
      return build_conversation(spec, repetition, body_base, count);
    std::vector<Prompt> prompts;
    for (int32_t i = 0; i < spec.requests; ++i) {
      if (spec.warm_replay && i % 2 == 1) {
        prompts.push_back(prompts.back());  // byte for byte, marker included: a prefix-cache hit
        continue;
      }
      Prompt p = build_single(spec, {spec.salt, i, repetition, spec.fresh_each_repetition});
      fit(p, spec.prompt.tokens_for(i), body_base, count);
      prompts.push_back(std::move(p));
    }
    return prompts;
  } catch (const Error& e) {
    throw Error(e.kind(),
                "case " + spec.id + " (builder " + spec.prompt.builder + "): " + e.message());
  }
}

}  // namespace sparkglm::workloads
