#include "tessera/runtime/conversation.h"

#include "tessera/runtime/text_stream.h"

namespace tessera::runtime {

Conversation::Conversation(Session& session, const model::Tokenizer& tok, model::ChatTemplate tmpl)
    : session_(session), tok_(tok), tmpl_(std::move(tmpl)) {
  session_.reset();
}

void Conversation::reset() {
  messages_.clear();
  cached_text_.clear();
  session_.reset();
}

TurnResult Conversation::say(const std::string& user_text, GenerateOptions opts,
                             const std::function<void(const std::string&)>& on_text) {
  messages_.push_back({"user", user_text});
  const std::string full = tmpl_.render(messages_, true);
  TurnResult t;
  std::vector<int32_t> prompt;
  const bool prefix = session_.position() > 0 && full.starts_with(cached_text_);
  if (prefix) prompt = tok_.encode(std::string_view(full).substr(cached_text_.size()), false);
  if (!prefix) {
    // The templates' markers are the special tokens: no post-processor specials.
    t.reprefilled = session_.position() > 0;
    session_.reset();
    cached_text_.clear();
    prompt = tok_.encode(full, false);
  }
  t.start_position = session_.position();
  t.appended = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> reply;
  TextStream stream;
  opts.on_token = [&](int32_t tok) {
    reply.push_back(tok);
    if (on_text) on_text(stream.next(tok_.decode(reply, true), false));
    return true;
  };
  try {
    t.gen = session_.generate(prompt, opts);
  } catch (...) {
    // The turn did not happen, but its prefill may have reached the cache:
    // the next turn starts from an empty one.
    messages_.pop_back();
    session_.reset();
    cached_text_.clear();
    throw;
  }
  t.reply = tok_.decode(reply, true);
  if (on_text) on_text(stream.next(t.reply, true));
  // Every sampled token but the last went through decode into the cache.
  const std::span<const int32_t> fed(reply.data(), reply.empty() ? 0 : reply.size() - 1);
  cached_text_ = full + tok_.decode(fed, false);
  messages_.push_back({"assistant", t.reply});
  return t;
}

}  // namespace tessera::runtime
