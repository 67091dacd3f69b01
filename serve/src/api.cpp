#include "tessera/serve/api.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace tessera::serve {

using nlohmann::json;

namespace {

// OpenAI's own limit on stop sequences.
constexpr size_t kMaxStops = 4;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "number";
  }
}

[[noreturn]] void wrong_type(const std::string& param, const char* want, const json& got) {
  invalid(param, fmt::format("'{}' must be {}, got {}", param, want, type_name(got)), "invalid_type");
}

double number_in(const json& body, const char* key, double dflt, double lo, double hi) {
  if (!body.contains(key) || body[key].is_null()) return dflt;
  const json& v = body[key];
  if (!v.is_number()) wrong_type(key, "a number", v);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) invalid(key, fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, x));
  return x;
}

std::optional<int64_t> integer(const json& body, const char* key) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  const json& v = body[key];
  if (!v.is_number_integer()) wrong_type(key, "an integer", v);
  return v.get<int64_t>();
}

bool boolean(const json& body, const char* key) {
  if (!body.contains(key) || body[key].is_null()) return false;
  if (!body[key].is_boolean()) wrong_type(key, "a boolean", body[key]);
  return body[key].get<bool>();
}

std::string content_text(const json& c, const std::string& param) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) wrong_type(param, "a string or an array of text parts", c);
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", param, i);
    if (!c[i].is_object() || c[i].value("type", "") != "text" || !c[i].contains("text") || !c[i]["text"].is_string())
      invalid(p, fmt::format("'{}' must be {{\"type\": \"text\", \"text\": string}} (only text is supported)", p));
    text += c[i]["text"].get<std::string>();
  }
  return text;
}

std::vector<model::ChatMessage> parse_messages(const json& body) {
  if (!body.contains("messages")) invalid("messages", "'messages' is required", "missing_required_parameter");
  const json& m = body["messages"];
  if (!m.is_array()) wrong_type("messages", "an array", m);
  if (m.empty()) invalid("messages", "'messages' must not be empty");
  std::vector<model::ChatMessage> out;
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string p = fmt::format("messages[{}]", i);
    if (!m[i].is_object()) wrong_type(p, "an object", m[i]);
    if (!m[i].contains("role") || !m[i]["role"].is_string()) invalid(p + ".role", fmt::format("'{}.role' must be a string", p));
    std::string role = m[i]["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant")
      invalid(p + ".role", fmt::format("'{}.role' must be system, user or assistant, got '{}'", p, role));
    if (!m[i].contains("content")) invalid(p + ".content", fmt::format("'{}.content' is required", p));
    out.push_back({role, content_text(m[i]["content"], p + ".content")});
  }
  return out;
}

void parse_prompt(const json& body, CompletionRequest& r) {
  if (!body.contains("prompt")) invalid("prompt", "'prompt' is required", "missing_required_parameter");
  const json& p = body["prompt"];
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt = p[0].get<std::string>();
  } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    std::vector<int32_t> ids;
    for (const json& t : p) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
        invalid("prompt", "'prompt' token ids must be non-negative integers");
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    r.prompt_ids = std::move(ids);
  } else if (p.is_array()) {
    invalid("prompt", "'prompt' must be a string, one string in a list, or a list of token ids (batches are not supported)");
  } else {
    wrong_type("prompt", "a string or an array", p);
  }
}

std::vector<std::string> parse_stop(const json& body) {
  if (!body.contains("stop") || body["stop"].is_null()) return {};
  const json& s = body["stop"];
  std::vector<std::string> out;
  if (s.is_string()) {
    out.push_back(s.get<std::string>());
  } else if (s.is_array()) {
    for (const json& x : s) {
      if (!x.is_string()) wrong_type("stop", "a string or an array of strings", x);
      out.push_back(x.get<std::string>());
    }
  } else {
    wrong_type("stop", "a string or an array of strings", s);
  }
  if (out.size() > kMaxStops) invalid("stop", fmt::format("'stop' holds {} sequences, at most {}", out.size(), kMaxStops));
  for (const auto& x : out)
    if (x.empty()) invalid("stop", "'stop' sequences must not be empty");
  return out;
}

}  // namespace

void invalid(const std::string& param, const std::string& message, const std::string& code) {
  throw ApiError(400, message, "invalid_request_error", param, code);
}

const char* endpoint_path(Endpoint e) { return e == Endpoint::chat ? "/v1/chat/completions" : "/v1/completions"; }

CompletionRequest parse_request(Endpoint endpoint, std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) invalid("", "the request body is not valid JSON", "invalid_json");
  if (!j.is_object()) invalid("", fmt::format("the request body must be a JSON object, got {}", type_name(j)), "invalid_json");
  CompletionRequest r;
  r.endpoint = endpoint;
  if (j.contains("model") && !j["model"].is_null()) {
    if (!j["model"].is_string()) wrong_type("model", "a string", j["model"]);
    r.model = j["model"].get<std::string>();
  }
  if (endpoint == Endpoint::chat)
    r.messages = parse_messages(j);
  else
    parse_prompt(j, r);
  r.max_tokens = integer(j, "max_tokens");
  if (endpoint == Endpoint::chat && !r.max_tokens) r.max_tokens = integer(j, "max_completion_tokens");
  if (r.max_tokens && *r.max_tokens < 0) invalid("max_tokens", fmt::format("'max_tokens' must be >= 0, got {}", *r.max_tokens));
  // OpenAI's ranges: temperature [0, 2], top_p [0, 1]; top_p 0 means "the top
  // token only", which the sampler spells as greedy.
  r.temperature = number_in(j, "temperature", 1.0, 0.0, 2.0);
  r.top_p = number_in(j, "top_p", 1.0, 0.0, 1.0);
  if (r.top_p == 0.0) r.temperature = 0.0, r.top_p = 1.0;
  if (const auto seed = integer(j, "seed")) r.seed = static_cast<uint64_t>(*seed);
  r.stop = parse_stop(j);
  r.stream = boolean(j, "stream");
  r.ignore_eos = boolean(j, "ignore_eos");
  if (const auto n = integer(j, "n"); n && *n != 1)
    invalid("n", fmt::format("'n' must be 1 (one NPU session answers one choice), got {}", *n), "unsupported_value");
  return r;
}

const char* finish_reason_name(FinishReason r) { return r == FinishReason::stop ? "stop" : "length"; }

json usage_json(const CompletionResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens}};
}

json timing_json(const CompletionResult& r) {
  return {{"npu_predicted_prefill_ms", r.predicted_prefill_ms},
          {"npu_predicted_decode_ms", r.predicted_decode_ms},
          {"npu_predicted_ms", r.predicted_prefill_ms + r.predicted_decode_ms},
          {"host_ms", r.host_ms},
          {"note", "npu_* are timing-model predictions of the modelled NPU; host_ms is simulation wall time"}};
}

namespace {

json envelope(const ResponseMeta& m, bool chunk) {
  const char* object = m.endpoint == Endpoint::chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                    : "text_completion";
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}

}  // namespace

json response_json(const ResponseMeta& meta, const CompletionResult& r) {
  json j = envelope(meta, false);
  json choice = {{"index", 0}, {"finish_reason", finish_reason_name(r.finish)}, {"logprobs", nullptr}};
  if (meta.endpoint == Endpoint::chat)
    choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  else
    choice["text"] = r.text;
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(r);
  j["tessera"] = timing_json(r);
  return j;
}

json chunk_json(const ResponseMeta& meta, std::string_view text, bool first, const CompletionResult* final) {
  json j = envelope(meta, true);
  json choice = {{"index", 0}, {"logprobs", nullptr},
                 {"finish_reason", final ? json(finish_reason_name(final->finish)) : json(nullptr)}};
  if (meta.endpoint == Endpoint::chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && !final)) delta["content"] = std::string(text);
    choice["delta"] = delta;
  } else {
    choice["text"] = std::string(text);
  }
  j["choices"] = json::array({choice});
  if (final) {
    j["usage"] = usage_json(*final);
    j["tessera"] = timing_json(*final);
  }
  return j;
}

json error_json(const ApiError& e) {
  const auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"error", {{"message", e.what()}, {"type", e.type}, {"param", or_null(e.param)}, {"code", or_null(e.code)}}}};
}

json models_json(const std::string& model, int64_t created) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "tessera"}}})}};
}

std::string sse_event(const json& j) {
  // dump() escapes every control character, so the payload is one line and
  // cannot end the event early.
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace tessera::serve
