#include "tessera/serve/engine.h"

#include <chrono>

#include <fmt/format.h>

#include "tessera/runtime/text_stream.h"
#include "tessera/serve/stop_filter.h"

namespace tessera::serve {

Engine::Engine(pipeline::OpenedDeployment deployment, std::optional<model::ChatTemplate> chat,
               std::string no_chat_reason, std::string model_id, EngineOptions opts)
    : d_(std::move(deployment)), chat_(std::move(chat)), no_chat_reason_(std::move(no_chat_reason)), model_id_(std::move(model_id)), opts_(std::move(opts)),
      session_(d_.config, d_.weights, d_.spec, opts_.session) {}

PreparedRequest Engine::prepare(const CompletionRequest& r) const {
  if (!r.model.empty() && r.model != model_id_)
    throw ApiError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", r.model, model_id_),
                   "invalid_request_error", "model", "model_not_found");
  PreparedRequest p;
  const bool chat = r.endpoint == Endpoint::chat;
  const char* param = chat ? "messages" : "prompt";
  if (chat) {
    if (!chat_)
      invalid("messages", fmt::format("no chat template: {}; use /v1/completions", no_chat_reason_),
              "no_chat_template");
    // The template's markers are the special tokens: no post-processor specials on top.
    p.prompt = d_.tokenizer.encode(chat_->render(r.messages, true), false);
  } else if (r.prompt_ids) {
    p.prompt = *r.prompt_ids;
    for (const int32_t t : p.prompt)
      if (t >= d_.config.vocab_size)
        invalid("prompt", fmt::format("token id {} is outside the vocabulary ({} tokens)", t, d_.config.vocab_size));
  } else {
    p.prompt = d_.tokenizer.encode(r.prompt, true);
  }
  if (p.prompt.empty()) invalid(param, fmt::format("'{}' encodes to no tokens", param));
  const auto n = static_cast<int64_t>(p.prompt.size());
  if (n > context())
    invalid(param,
            fmt::format("this model's context is {} tokens; the prompt has {} tokens", context(), n),
            "context_length_exceeded");
  p.max_tokens = r.max_tokens.value_or(chat ? opts_.default_chat_max_tokens : opts_.default_completion_max_tokens);
  p.sampling.temperature = r.temperature;
  p.sampling.top_p = r.top_p;
  p.sampling.seed = r.seed;
  p.stop = r.stop;
  p.ignore_eos = r.ignore_eos;
  return p;
}

CompletionResult Engine::run(const PreparedRequest& p, const std::function<bool(std::string_view)>& on_text) {
  const auto t0 = std::chrono::steady_clock::now();
  session_.reset();  // every request stands alone
  std::vector<int32_t> tokens;
  runtime::TextStream stream;
  StopFilter stops(p.stop);
  bool alive = true;
  runtime::GenerateOptions go;
  go.max_new_tokens = p.max_tokens;
  go.sampling = p.sampling;
  if (p.ignore_eos) go.stop_tokens = {-1};  // an id no token has: no stop token
  go.on_token = [&](int32_t t) {
    tokens.push_back(t);
    alive = on_text(stops.push(stream.next(d_.tokenizer.decode(tokens, true), false)));
    return alive && !stops.stopped();
  };
  const runtime::GenerateResult g = session_.generate(p.prompt, go);
  if (alive) {
    std::string tail = stops.push(stream.next(d_.tokenizer.decode(tokens, true), true));
    tail += stops.finish();
    if (!tail.empty()) on_text(tail);
  }
  CompletionResult r;
  r.text = stops.text();
  r.finish = stops.stopped() || g.stop == runtime::StopReason::eos ? FinishReason::stop : FinishReason::length;
  r.prompt_tokens = static_cast<int64_t>(p.prompt.size());
  r.completion_tokens = static_cast<int64_t>(g.tokens.size());
  r.predicted_prefill_ms = g.prefill.predicted_seconds * 1e3;
  for (const auto& d : g.decode) r.predicted_decode_ms += d.predicted_seconds * 1e3;
  r.host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tessera::serve
