#pragma once
// The OpenAI-compatible HTTP API without the HTTP: request bodies parsed and
// validated into a typed request, response bodies and server-sent-event
// chunks built from a typed result. server.cpp only moves these over sockets,
// so everything a client can get wrong is tested here without a socket.
//
// Accepted (POST /v1/chat/completions, /v1/completions): model, messages (string
// content or text parts) / prompt (a string, a one-string list, or token ids),
// max_tokens (chat also max_completion_tokens), temperature, top_p, seed, stop
// (a string or up to 4), stream, n (1 only), and vLLM's ignore_eos (generate
// max_tokens whatever the model says). Unknown fields are ignored, as the
// OpenAI API does; a known field of the wrong type is a 400 naming it.
// Defaults follow OpenAI's (temperature 1, top_p 1) except seed, which
// defaults to 0 so that a request without one is still reproducible.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/chat_template.h"

namespace tessera::serve {

// A request the API refuses: HTTP status plus the fields of OpenAI's error
// object {"error": {"message", "type", "param", "code"}}.
struct ApiError : UsageError {
  ApiError(int status_, std::string message, std::string type_, std::string param_, std::string code_)
      : UsageError(std::move(message)), status(status_), type(std::move(type_)), param(std::move(param_)),
        code(std::move(code_)) {}
  int status;
  std::string type, param, code;  // param / code empty: null in the JSON
};
// 400 invalid_request_error naming `param`.
[[noreturn]] void invalid(const std::string& param, const std::string& message,
                          const std::string& code = "invalid_value");

enum class Endpoint { chat, completion };
const char* endpoint_path(Endpoint e);  // "/v1/chat/completions" | "/v1/completions"

struct CompletionRequest {
  Endpoint endpoint = Endpoint::chat;
  std::string model;                          // empty: the served model
  std::vector<model::ChatMessage> messages;   // chat
  std::string prompt;                         // completion, as text
  std::optional<std::vector<int32_t>> prompt_ids;  // completion, as token ids
  std::optional<int64_t> max_tokens;          // empty: the server's default
  double temperature = 1.0;
  double top_p = 1.0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool stream = false;
  bool ignore_eos = false;
};

// Throws ApiError (400) for malformed JSON, a body that is not an object, a
// missing or mistyped field, or a value out of range.
CompletionRequest parse_request(Endpoint endpoint, std::string_view body);

enum class FinishReason { stop, length };
const char* finish_reason_name(FinishReason r);

struct CompletionResult {
  std::string text;
  FinishReason finish = FinishReason::stop;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Timing-model predictions of the NPU (what the device would take), and the
  // host wall time this machine spent simulating it; never mixed.
  double predicted_prefill_ms = 0, predicted_decode_ms = 0;
  double host_ms = 0;
};

// Identity shared by a response and all chunks of one stream.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::chat;
  std::string id;     // "chatcmpl-N" | "cmpl-N"
  int64_t created = 0;  // unix seconds
  std::string model;
};

nlohmann::json usage_json(const CompletionResult& r);
// The extension field "tessera": predicted NPU milliseconds (prefill, decode).
nlohmann::json timing_json(const CompletionResult& r);
nlohmann::json response_json(const ResponseMeta& meta, const CompletionResult& r);
// One streamed chunk: the first of a chat stream carries the role; the last
// (`final` set) carries the finish reason, usage and timing.
nlohmann::json chunk_json(const ResponseMeta& meta, std::string_view text, bool first,
                          const CompletionResult* final);
nlohmann::json error_json(const ApiError& e);
nlohmann::json models_json(const std::string& model, int64_t created);

// Server-sent events: "data: JSON\n\n", and the terminating "data: [DONE]\n\n".
std::string sse_event(const nlohmann::json& j);
std::string sse_done();

}  // namespace tessera::serve
