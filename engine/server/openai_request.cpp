#include "engine/server/openai_request.h"

#include <cmath>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/server/api_error.h"

namespace sparkglm::server {

using nlohmann::json;

namespace {

constexpr int kMaxTopLogprobs = 20;

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
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > uint64_t(max))
        throw ApiError::invalid_request("`" + name + "` must be " + range, name);
      return int64_t(u);
    }
    if (!v.is_number_integer()) throw ApiError::wrong_type(name, "an integer");
    const int64_t i = v.get<int64_t>();
    if (i < min || i > max)
      throw ApiError::invalid_request("`" + name + "` must be " + range, name);
    return i;
  }

 private:
  const json& object_;
};

float as_float(double v) {
  return float(v);
}

// A token-id array: every id in [0, vocab_size).
std::vector<int32_t> read_ids(const json& v, const std::string& name, int64_t vocab_size) {
  if (!v.is_array()) throw ApiError::wrong_type(name, "an array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    ids.push_back(int32_t(Fields::integer_value(
        v[i], name + "[" + std::to_string(i) + "]", 0,
        vocab_size > 0 ? vocab_size - 1 : std::numeric_limits<int32_t>::max())));
  return ids;
}

// The engine's validation messages name the field in backticks; the field becomes `param`.
ApiError from_sampling_error(const Error& e) {
  const std::string& m = e.message();
  std::string param;
  if (auto a = m.find('`'); a != std::string::npos)
    if (auto b = m.find('`', a + 1); b != std::string::npos) param = m.substr(a + 1, b - a - 1);
  return ApiError::invalid_request(m, param);
}

ApiError from_template_error(const Error& e) {
  return ApiError::invalid_request(e.message());
}

void reject_unsupported(const Fields& f) {
  if (auto n = f.integer("n", 1, 1 << 20); n && *n != 1)
    throw ApiError::invalid_request("`n` must be 1: this server returns one choice per request",
                                    "n");
  if (auto b = f.integer("best_of", 1, 1 << 20); b && *b != 1)
    throw ApiError::invalid_request("`best_of` must be 1: this server does not rank candidates",
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
  if (const json* format = f.get("response_format")) {
    if (!format->is_object()) throw ApiError::wrong_type("response_format", "an object");
    auto type = format->find("type");
    if (type == format->end() || !type->is_string())
      throw ApiError::wrong_type("response_format.type", "a string");
    if (*type != "text")
      throw ApiError::invalid_request(
          "`response_format` " + type->get<std::string>() + " is not supported (only \"text\")",
          "response_format");
  }
}

GenerationFields read_fields(const json& body, const ServedModel& model) {
  const Fields f(body);
  GenerationFields g;
  if (auto m = f.string("model")) g.model = *m;
  check_model(g.model, model);
  reject_unsupported(f);

  g.stream = f.boolean("stream").value_or(false);
  if (const json* options = f.get("stream_options")) {
    if (!options->is_object()) throw ApiError::wrong_type("stream_options", "an object");
    const json& include = options->contains("include_usage") ? (*options)["include_usage"] : json();
    if (!include.is_null() && !include.is_boolean())
      throw ApiError::wrong_type("stream_options.include_usage", "true or false");
    g.include_usage = include.is_boolean() && include.get<bool>();
  }

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
    s.stop_token_ids = read_ids(*ids, "stop_token_ids", model.vocab_size);

  constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  if (auto v = f.integer("max_tokens", 1, kMaxTokens)) g.max_tokens = int32_t(*v);
  if (auto v = f.integer("max_completion_tokens", 1, kMaxTokens)) g.max_tokens = int32_t(*v);

  if (const json* stop = f.get("stop")) {
    if (stop->is_string()) {
      g.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string())
          throw ApiError::wrong_type("stop[" + std::to_string(i) + "]", "a string");
        g.stop.push_back((*stop)[i].get<std::string>());
      }
    } else {
      throw ApiError::wrong_type("stop", "a string or an array of strings");
    }
  }
  if (auto v = f.boolean("include_stop_str_in_output")) g.include_stop_str_in_output = *v;
  if (auto v = f.boolean("skip_special_tokens")) g.skip_special_tokens = *v;
  if (auto v = f.boolean("return_token_ids")) g.return_token_ids = *v;
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
  ChatCompletionRequest r;
  r.fields = read_fields(body, model);
  const Fields f(body);
  // Chat logprobs: a switch and a count.
  if (auto v = f.boolean("logprobs")) r.fields.sampling.logprobs = *v;
  if (auto v = f.integer("top_logprobs", 0, kMaxTopLogprobs))
    r.fields.sampling.top_logprobs = int32_t(*v);
  if (auto v = f.boolean("add_special_tokens")) r.add_special_tokens = *v;
  if (const json* choice = f.get("tool_choice")) {
    if (!(choice->is_string() && (*choice == "auto" || *choice == "none")))
      throw ApiError::invalid_request(
          "`tool_choice` must be \"auto\" or \"none\": this server does not force tool calls",
          "tool_choice");
  }
  try {
    r.chat = parse_chat_messages(body);
  } catch (const Error& e) {
    throw from_template_error(e);
  }
  if (auto v = f.boolean("add_generation_prompt")) r.chat.options.add_generation_prompt = *v;
  validate_sampling(r.fields, model);
  return r;
}

CompletionRequest parse_completion(const json& body, const ServedModel& model) {
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
      r.prompt_ids = read_ids(p, name, model.vocab_size);
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
  DetokenizeRequest r;
  if (auto m = f.string("model")) r.model = *m;
  check_model(r.model, model);
  const json* tokens = f.get("tokens");
  if (!tokens) throw ApiError::invalid_request("`tokens` is required", "tokens");
  r.tokens = read_ids(*tokens, "tokens", model.vocab_size);
  if (auto v = f.boolean("skip_special_tokens")) r.skip_special_tokens = *v;
  return r;
}

}  // namespace sparkglm::server
