#include "tessera/runtime/conversation.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "runtime_fixture.h"

namespace tessera::runtime {
namespace {

namespace fs = std::filesystem;

using testing::kChatML;
using testing::tiny_tokenizer;

// The second turn starts where the first left the cache and appends only the
// tokens its text adds; the cache then holds exactly the whole conversation's
// text, as a fresh render of it would.
TEST(Conversation, SecondTurnAppendsOnlyItsOwnTokens) {
  const auto& m = testing::tiny("tiny");
  const auto tok = tiny_tokenizer(m.config);
  const auto tmpl = model::ChatTemplate::recognize(kChatML, "test");
  Session s = testing::make_session(m);
  Conversation c(s, tok, tmpl);
  const GenerateOptions go = testing::greedy(5);
  std::string streamed;
  const TurnResult t1 = c.say("tell me a story", go, [&](const std::string& p) { streamed += p; });
  EXPECT_EQ(t1.start_position, 0);
  EXPECT_FALSE(t1.reprefilled);
  EXPECT_EQ(t1.appended, static_cast<int64_t>(tok.encode(tmpl.render({{"user", "tell me a story"}}, true), false).size()));
  EXPECT_EQ(streamed, t1.reply);
  ASSERT_EQ(t1.gen.tokens.size(), 5u);
  // The last sampled token never went through decode.
  EXPECT_EQ(s.position(), t1.appended + 4);

  const TurnResult t2 = c.say("hi", go, nullptr);
  EXPECT_FALSE(t2.reprefilled);
  EXPECT_EQ(t2.start_position, t1.appended + 4);
  const std::string history = tmpl.render({{"user", "tell me a story"}}, true) +
                              tok.decode(std::span<const int32_t>(t1.gen.tokens.data(), 4), false);
  const std::string now = tmpl.render({{"user", "tell me a story"}, {"assistant", t1.reply}, {"user", "hi"}}, true);
  ASSERT_TRUE(now.starts_with(history));
  EXPECT_EQ(t2.appended, static_cast<int64_t>(tok.encode(now.substr(history.size()), false).size()));
  EXPECT_LT(t2.appended, static_cast<int64_t>(tok.encode(now, false).size()) - t2.start_position + 1);
  EXPECT_EQ(c.turns(), 2u);

  c.reset();
  EXPECT_EQ(s.position(), 0);
  const TurnResult t3 = c.say("hi", go, nullptr);
  EXPECT_EQ(t3.start_position, 0);
  EXPECT_EQ(t3.appended, static_cast<int64_t>(tok.encode(tmpl.render({{"user", "hi"}}, true), false).size()));
}

// A turn that does not fit is refused whole (ContextFullError); after
// reset() the conversation starts again from an empty cache.
TEST(Conversation, ATurnOverTheContextIsRefused) {
  const auto& m = testing::tiny("tiny");
  const auto tok = tiny_tokenizer(m.config);
  const auto tmpl = model::ChatTemplate::recognize(kChatML, "test");
  SessionOptions so;
  so.context = static_cast<int64_t>(tok.encode(tmpl.render({{"user", "hi"}}, true), false).size()) + 8;
  Session s(m.config, m.packed, m.spec, so);
  Conversation c(s, tok, tmpl);
  c.say("hi", testing::greedy(4), nullptr);
  EXPECT_THROW(c.say("a much longer second message", testing::greedy(4), nullptr), ContextFullError);
  EXPECT_EQ(c.turns(), 1u);
  c.reset();
  const TurnResult t = c.say("hi", testing::greedy(4), nullptr);
  EXPECT_EQ(t.start_position, 0);
  EXPECT_FALSE(t.reprefilled);
}

}  // namespace
}  // namespace tessera::runtime
