#pragma once
// The model side of the server: one runtime Session over one opened
// deployment. prepare() turns a parsed request into prompt tokens and limits
// (refusing what cannot run, before any response starts); run() generates on
// the Session, reporting text as it is produced. Not thread-safe: the server
// serialises callers with a TicketQueue (one NPU, arrival order).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/model/chat_template.h"
#include "tessera/pipeline/deployment.h"
#include "tessera/runtime/session.h"
#include "tessera/serve/api.h"

namespace tessera::serve {

struct EngineOptions {
  // max_tokens when a request gives none: OpenAI's 16 for /v1/completions; for
  // chat (OpenAI: up to the context) a bound, since every token is simulated.
  int64_t default_chat_max_tokens = 256;
  int64_t default_completion_max_tokens = 16;
  runtime::SessionOptions session;
};

struct PreparedRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;
  runtime::SamplingOptions sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
};

class Engine {
 public:
  // `chat`: the deployment's chat template; without one, chat requests are
  // refused with `no_chat_reason` (why the template could not be had).
  Engine(pipeline::OpenedDeployment deployment, std::optional<model::ChatTemplate> chat, std::string no_chat_reason,
         std::string model_id, EngineOptions opts = {});

  const std::string& model_id() const { return model_id_; }
  int64_t context() const { return session_.context(); }

  // ApiError: 404 for another model; 400 for a chat request without a chat
  // template, an empty prompt, a token id outside the vocabulary, or a prompt
  // longer than the context.
  PreparedRequest prepare(const CompletionRequest& r) const;
  // Generates from an empty KV cache. on_text receives each piece of text
  // (possibly empty, once per token) as soon as it is safe to show; returning
  // false (the client is gone) stops the generation.
  CompletionResult run(const PreparedRequest& p, const std::function<bool(std::string_view)>& on_text);

 private:
  pipeline::OpenedDeployment d_;
  std::optional<model::ChatTemplate> chat_;
  std::string no_chat_reason_;
  std::string model_id_;
  EngineOptions opts_;
  runtime::Session session_;
};

}  // namespace tessera::serve
