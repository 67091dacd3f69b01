#pragma once
// A multi-turn chat on one Session that keeps the KV cache between turns:
// each turn appends only the tokens its text adds to what the cache already
// holds, instead of prefilling the whole history again.
//
// How: the text in the cache is tracked (the rendered prompt plus the reply
// tokens actually run through decode; Session::generate never runs the last
// sampled token, so that one is not in the cache). The next turn renders the
// whole conversation with the chat template; when the cached text is a prefix
// of it, only the rest is encoded and prefilled. When it is not (a template
// that rewrites earlier turns, as Qwen3's drops past reasoning; a reply that
// does not decode back to itself), the turn says so and prefills everything
// from an empty cache: never a silently wrong context.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/model/chat_template.h"
#include "tessera/model/tokenizer.h"
#include "tessera/runtime/session.h"

namespace tessera::runtime {

struct TurnResult {
  int64_t start_position = 0;  // cache length before this turn
  int64_t appended = 0;        // prompt tokens prefilled this turn
  bool reprefilled = false;    // history was run again from an empty cache
  std::string reply;           // the assistant text, special tokens dropped
  GenerateResult gen;
};

class Conversation {
 public:
  // `session` and `tok` must outlive the conversation.
  Conversation(Session& session, const model::Tokenizer& tok, model::ChatTemplate tmpl);

  // Adds a user message and generates the reply; on_text gets the reply's text
  // as it is produced. opts.on_token is replaced. ContextFullError when the
  // turn does not fit in the cache: the turn is dropped, the cache emptied,
  // and the conversation will not fit again until reset().
  TurnResult say(const std::string& user_text, GenerateOptions opts,
                 const std::function<void(const std::string&)>& on_text);
  void reset();  // forgets the conversation and empties the cache
  size_t turns() const { return messages_.size() / 2; }

 private:
  Session& session_;
  const model::Tokenizer& tok_;
  model::ChatTemplate tmpl_;
  std::vector<model::ChatMessage> messages_;
  std::string cached_text_;  // the text whose tokens are in the cache
};

}  // namespace tessera::runtime
