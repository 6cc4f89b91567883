#include "engine/server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/server/api_error.h"
#include "engine/server/openai_fields.h"

namespace sparkglm::server {

using nlohmann::json;

namespace {

constexpr int kMaxTopLogprobs = 20;
// Every stop string is searched for after every token, on the thread that serves all streams, and
// every stop id is compared with every sampled token: their counts are bounded so that one request
// cannot slow the others' decoding.
constexpr size_t kMaxStopStrings = 256;
constexpr size_t kMaxStopTokenIds = 1024;

// Typed reads of one object's members; a wrong type is a 400 naming the member.
class Fields {
 public:
  explicit Fields(const json& object) : object_(object) {}

  const json* get(const char* name) const {
    auto it = object_.find(name);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<bool> boolean(const char* name) const {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) throw ApiError::wrong_type(name, "true or false");
    return v->get<bool>();
  }

  std::optional<double> number(const char* name) const {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number()) throw ApiError::wrong_type(name, "a number");
    return v->get<double>();
  }

  std::optional<int64_t> integer(const char* name, int64_t min, int64_t max) const {
    const json* v = get(name);
    if (!v) return std::nullopt;
    return integer_value(*v, name, min, max);
  }

  std::optional<std::string> string(const char* name) const {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_string()) throw ApiError::wrong_type(name, "a string");
    return v->get<std::string>();
  }

  static int64_t integer_value(const json& v, const std::string& name, int64_t min, int64_t max) {
    const std::string range =
        "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    const auto out_of_range = [&] {
      return ApiError::invalid_request("`" + name + "` must be " + range, name);
    };
    if (v.is_number_unsigned()) {  // every non-negative integer parses as unsigned
      const uint64_t u = v.get<uint64_t>();
      if (u > uint64_t(max) || (min > 0 && u < uint64_t(min))) throw out_of_range();
      return int64_t(u);
    }
    if (v.is_number_integer()) {
      const int64_t i = v.get<int64_t>();
      if (i < min || i > max) throw out_of_range();
      return i;
    }
    // An integer beyond 64 bits (2^64, 10^30) parses as a float: its fault is its size. A float
    // of magnitude 2^63 or more is such an integer (-2^63 - 1 rounds to -2^63).
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d < double(min) || d > double(max) || std::abs(d) >= 0x1p63) throw out_of_range();
    }
    throw ApiError::wrong_type(name, range);
  }

 private:
  const json& object_;
};

float as_float(double v) {
  return float(v);
}

ApiError too_many(const std::string& name, size_t given, size_t limit, const char* what) {
  return ApiError::invalid_request("`" + name + "` has " + std::to_string(given) + " " + what +
                                       "; at most " + std::to_string(limit) + " are accepted",
                                   name);
}

// A token-id array of at most `max_count` ids, each in [0, vocab_size). The count is checked
// before any id is read; an id's name is spelled out only for its error.
std::vector<int32_t> read_ids(const json& v, const std::string& name, int64_t vocab_size,
                              size_t max_count) {
  if (!v.is_array()) throw ApiError::wrong_type(name, "an array of token ids");
  if (v.size() > max_count) throw too_many(name, v.size(), max_count, "token ids");
  const int64_t max_id = vocab_size > 0 ? vocab_size - 1 : std::numeric_limits<int32_t>::max();
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& id = v[i];
    if (id.is_number_unsigned() && id.get<uint64_t>() <= uint64_t(max_id)) {
      ids.push_back(int32_t(id.get<uint64_t>()));
      continue;
    }
    ids.push_back(
        int32_t(Fields::integer_value(id, name + "[" + std::to_string(i) + "]", 0, max_id)));
  }
  return ids;
}

// Token ids that stand for a sequence's tokens: no more than one sequence holds (--max-seq-len).
size_t max_sequence_ids(const ServedModel& model) {
  return model.max_seq_len > 0 ? size_t(model.max_seq_len) : std::numeric_limits<size_t>::max();
}

// The engine's validation messages name the field in backticks; the field becomes `param`.
ApiError from_sampling_error(const Error& e) {
  const std::string& m = e.message();
  std::string param;
  if (auto a = m.find('`'); a != std::string::npos)
    if (auto b = m.find('`', a + 1); b != std::string::npos) param = m.substr(a + 1, b - a - 1);
  return ApiError::invalid_request(m, param);
}

// A chat field's error carries its path, which becomes `param`.
ApiError from_template_error(const Error& e) {
  const auto* field = dynamic_cast<const ChatFieldError*>(&e);
  return ApiError::invalid_request(e.message(), field ? field->path() : "");
}

void reject_unsupported(const Fields& f, int n) {
  if (auto b = f.integer("best_of", 1, 1 << 20); b && *b != n)
    throw ApiError::invalid_request("`best_of` must equal `n` (" + std::to_string(n) +
                                        "): this server does not rank candidates",
                                    "best_of");
  if (auto echo = f.boolean("echo"); echo && *echo)
    throw ApiError::invalid_request("`echo` is not supported", "echo");
  if (auto suffix = f.string("suffix"); suffix && !suffix->empty())
    throw ApiError::invalid_request("`suffix` is not supported", "suffix");
  if (const json* bias = f.get("logit_bias")) {
    if (!bias->is_object()) throw ApiError::wrong_type("logit_bias", "an object");
    if (!bias->empty())
      throw ApiError::invalid_request("`logit_bias` is not supported", "logit_bias");
  }
}

GenerationFields read_fields(const json& body, const ServedModel& model) {
  const Fields f(body);
  GenerationFields g;
  if (auto m = f.string("model")) g.model = *m;
  check_model(g.model, model);
  if (auto n = f.integer("n", 1, kMaxChoices)) g.n = int(*n);
  reject_unsupported(f, g.n);

  g.stream = f.boolean("stream").value_or(false);
  if (const json* options = f.get("stream_options")) {
    if (!options->is_object()) throw ApiError::wrong_type("stream_options", "an object");
    const Fields o(*options);
    for (auto it = options->begin(); it != options->end(); ++it)
      if (it.key() != "include_usage" && it.key() != "continuous_usage_stats" && !it->is_null())
        throw ApiError::invalid_request(
            "`stream_options." + it.key() +
                "` is not a field this server reads (include_usage, continuous_usage_stats)",
            "stream_options." + it.key());
    for (const char* name : {"include_usage", "continuous_usage_stats"})
      if (const json* v = o.get(name); v && !v->is_boolean())
        throw ApiError::wrong_type(std::string("stream_options.") + name, "true or false");
    g.include_usage = o.boolean("include_usage").value_or(false);
    g.continuous_usage_stats = o.boolean("continuous_usage_stats").value_or(false);
  }
  g.constraint = read_output_constraint(body, &g.constraint_field);

  SamplingParams& s = g.sampling;
  if (auto v = f.number("temperature")) s.temperature = as_float(*v);
  if (auto v = f.number("top_p")) s.top_p = as_float(*v);
  if (auto v = f.integer("top_k", -1, std::numeric_limits<int32_t>::max())) s.top_k = int32_t(*v);
  if (auto v = f.number("min_p")) s.min_p = as_float(*v);
  if (auto v = f.integer("seed", std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max()))
    s.seed = uint64_t(*v);
  if (auto v = f.number("presence_penalty")) s.presence_penalty = as_float(*v);
  if (auto v = f.number("frequency_penalty")) s.frequency_penalty = as_float(*v);
  if (auto v = f.number("repetition_penalty")) s.repetition_penalty = as_float(*v);
  if (auto v = f.integer("min_tokens", 0, std::numeric_limits<int32_t>::max()))
    s.min_tokens = int32_t(*v);
  if (auto v = f.boolean("ignore_eos")) s.ignore_eos = *v;
  if (const json* ids = f.get("stop_token_ids"))
    s.stop_token_ids = read_ids(*ids, "stop_token_ids", model.vocab_size, kMaxStopTokenIds);

  constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  if (auto v = f.integer("max_tokens", 1, kMaxTokens)) g.max_tokens = int32_t(*v);
  if (auto v = f.integer("max_completion_tokens", 1, kMaxTokens)) g.max_tokens = int32_t(*v);

  if (const json* stop = f.get("stop")) {
    // An empty stop string would match before every token and hold back the whole output
    // (vLLM refuses it too).
    auto add_stop = [&](std::string text, const std::string& param) {
      if (text.empty())
        throw ApiError::invalid_request("`" + param +
                                            "` is an empty string: a stop string needs "
                                            "at least one character",
                                        param);
      g.stop.push_back(std::move(text));
    };
    if (stop->is_string()) {
      add_stop(stop->get<std::string>(), "stop");
    } else if (stop->is_array()) {
      if (stop->size() > kMaxStopStrings)
        throw too_many("stop", stop->size(), kMaxStopStrings, "strings");
      for (size_t i = 0; i < stop->size(); ++i) {
        const std::string param = "stop[" + std::to_string(i) + "]";
        if (!(*stop)[i].is_string()) throw ApiError::wrong_type(param, "a string");
        add_stop((*stop)[i].get<std::string>(), param);
      }
    } else {
      throw ApiError::wrong_type("stop", "a string or an array of strings");
    }
  }
  if (auto v = f.boolean("include_stop_str_in_output")) g.include_stop_str_in_output = *v;
  if (auto v = f.boolean("skip_special_tokens")) g.skip_special_tokens = *v;
  if (auto v = f.boolean("return_token_ids")) g.return_token_ids = *v;
  if (auto v = f.boolean("disable_mtp")) g.disable_mtp = *v;
  if (auto v = f.string("cache_salt")) {
    if (v->empty()) throw ApiError::invalid_request("`cache_salt` must not be empty", "cache_salt");
    g.cache_salt = *v;
  }
  return g;
}

// Checks everything but max_tokens, which the route settles once the prompt length is known.
void validate_sampling(const GenerationFields& g, const ServedModel& model) {
  SamplingParams s = g.sampling;
  s.max_tokens = g.max_tokens.value_or(std::max(1, s.min_tokens));
  try {
    s.validate(model.vocab_size);
  } catch (const Error& e) {
    throw from_sampling_error(e);
  }
}

}  // namespace

json parse_json_body(std::string_view body) {
  // Size and depth are a refused request; a syntax error is invalid JSON.
  const std::string where = "the request body";
  try {
    check_json_bounds(body, where, ErrorKind::kInvalidArgument, json_limits::kRequestBody);
  } catch (const Error& e) {
    throw ApiError::invalid_request(e.message());
  }
  json j;
  try {
    j = parse_json(body, where, ErrorKind::kInvalidArgument, json_limits::kRequestBody);
  } catch (
      const Error& e) {  // "<where>: not valid JSON: <parser's words>"; the reply says the rest
    const std::string prefix = where + ": not valid JSON: ";
    const std::string& m = e.message();
    throw ApiError::invalid_json(m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m);
  }
  if (!j.is_object()) throw ApiError::invalid_request("the request body must be a JSON object");
  return j;
}

void check_model(const std::string& requested, const ServedModel& model) {
  if (!requested.empty() && requested != model.id) throw ApiError::model_not_found(requested);
}

ChatCompletionRequest parse_chat_completion(const json& body, const ServedModel& model) {
  check_known_fields(body, RequestRoute::kChat);
  ChatCompletionRequest r;
  r.fields = read_fields(body, model);
  const Fields f(body);
  // Chat logprobs: a switch and a count.
  if (auto v = f.boolean("logprobs")) r.fields.sampling.logprobs = *v;
  if (auto v = f.integer("top_logprobs", 0, kMaxTopLogprobs))
    r.fields.sampling.top_logprobs = int32_t(*v);
  if (auto v = f.boolean("add_special_tokens")) r.add_special_tokens = *v;
  try {
    r.chat = parse_chat_messages(body);
  } catch (const Error& e) {
    throw from_template_error(e);
  }
  if (auto v = f.boolean("add_generation_prompt")) r.chat.options.add_generation_prompt = *v;
  if (auto v = f.boolean("parallel_tool_calls")) r.parallel_tool_calls = *v;
  r.tool_choice = read_tool_choice(body, r.chat.options.tools);
  // "none": the model is not told of the tools, so it has nothing to call.
  if (r.tool_choice.mode == ToolChoice::Mode::kNone) r.chat.options.tools.clear();
  if (OutputConstraint forced = tool_call_constraint(r.tool_choice, r.chat.options.tools);
      forced.active()) {
    if (r.fields.constraint.active())
      throw ApiError::invalid_request(
          "`tool_choice` forces a tool call and another field constrains the output to JSON or a "
          "choice: give one",
          "tool_choice");
    r.fields.constraint = std::move(forced);
    r.fields.constraint_field = "tool_choice";
  }
  // GLM reasons first: the constraint holds from the end of the reasoning section on.
  r.fields.constraint.after_reasoning =
      thinking_enabled(r.chat.options) && r.chat.options.add_generation_prompt;
  validate_sampling(r.fields, model);
  return r;
}

CompletionRequest parse_completion(const json& body, const ServedModel& model) {
  check_known_fields(body, RequestRoute::kCompletion);
  CompletionRequest r;
  r.fields = read_fields(body, model);
  const Fields f(body);
  // Completions logprobs: how many alternatives per token (0 = the chosen token's only).
  if (auto v = f.integer("logprobs", 0, kMaxTopLogprobs)) {
    r.fields.sampling.logprobs = true;
    r.fields.sampling.top_logprobs = int32_t(*v);
  }
  if (auto v = f.boolean("add_special_tokens")) r.add_special_tokens = *v;

  const json* prompt = f.get("prompt");
  if (!prompt) throw ApiError::invalid_request("`prompt` is required", "prompt");
  const char* shapes = "a string, an array of token ids, or a one-element array of either";
  auto read_one = [&](const json& p, const std::string& name) {
    if (p.is_string()) {
      r.prompt_text = p.get<std::string>();
    } else if (p.is_array()) {
      // A prompt as long as the context leaves no room for output (the route's check, made
      // before a single id is read).
      if (model.max_seq_len > 0 && p.size() >= size_t(model.max_seq_len))
        throw ApiError::prompt_too_long(
            int(std::min<size_t>(p.size(), std::numeric_limits<int32_t>::max())), model.max_seq_len,
            "prompt");
      r.prompt_ids = read_ids(p, name, model.vocab_size, max_sequence_ids(model));
      if (r.prompt_ids.empty())
        throw ApiError::invalid_request("`" + name + "` must not be an empty array", "prompt");
    } else {
      throw ApiError::wrong_type(name, shapes);
    }
  };
  if (prompt->is_array() && !prompt->empty() &&
      ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    if (prompt->size() != 1)
      throw ApiError::invalid_request("`prompt` holds " + std::to_string(prompt->size()) +
                                          " prompts; this server answers one prompt per request",
                                      "prompt");
    read_one((*prompt)[0], "prompt[0]");
  } else {
    read_one(*prompt, "prompt");
  }
  validate_sampling(r.fields, model);
  return r;
}

TokenizeRequest parse_tokenize(const json& body, const ServedModel& model) {
  const Fields f(body);
  TokenizeRequest r;
  if (auto m = f.string("model")) r.model = *m;
  check_model(r.model, model);
  const bool has_prompt = f.get("prompt") != nullptr, has_messages = f.get("messages") != nullptr;
  if (has_prompt == has_messages)
    throw ApiError::invalid_request("give exactly one of `prompt` or `messages`");
  check_known_fields(body,
                     has_prompt ? RequestRoute::kTokenizePrompt : RequestRoute::kTokenizeMessages);
  if (has_prompt) {
    r.prompt = f.string("prompt");
  } else {
    try {
      r.chat = parse_chat_messages(body);
    } catch (const Error& e) {
      throw from_template_error(e);
    }
    if (auto v = f.boolean("add_generation_prompt")) r.chat->options.add_generation_prompt = *v;
    r.add_special_tokens = false;
  }
  if (auto v = f.boolean("add_special_tokens")) r.add_special_tokens = *v;
  return r;
}

DetokenizeRequest parse_detokenize(const json& body, const ServedModel& model) {
  const Fields f(body);
  check_known_fields(body, RequestRoute::kDetokenize);
  DetokenizeRequest r;
  if (auto m = f.string("model")) r.model = *m;
  check_model(r.model, model);
  const json* tokens = f.get("tokens");
  if (!tokens) throw ApiError::invalid_request("`tokens` is required", "tokens");
  r.tokens = read_ids(*tokens, "tokens", model.vocab_size, max_sequence_ids(model));
  if (auto v = f.boolean("skip_special_tokens")) r.skip_special_tokens = *v;
  return r;
}

}  // namespace sparkglm::server
