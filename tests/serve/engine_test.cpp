#include "tessera/serve/engine.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "../runtime/runtime_fixture.h"
#include "tessera/model/model_dir.h"

namespace tessera::serve {
namespace {

namespace fs = std::filesystem;

using runtime::testing::kChatML;
using runtime::testing::tiny_tokenizer;

Engine make_engine(bool chat) {
  const auto& m = runtime::testing::tiny("tiny");
  pipeline::OpenedDeployment d{m.config, tiny_tokenizer(m.config), m.spec, m.packed};
  std::optional<model::ChatTemplate> t;
  if (chat) t = model::ChatTemplate::recognize(kChatML, "test");
  return Engine(std::move(d), std::move(t), "no tokenizer_config.json", "tiny");
}

CompletionRequest completion(const std::string& prompt, int64_t max_tokens) {
  CompletionRequest r;
  r.endpoint = Endpoint::completion;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.temperature = 0;
  return r;
}

ApiError refusal(const Engine& e, const CompletionRequest& r) {
  try {
    e.prepare(r);
  } catch (const ApiError& err) {
    return err;
  }
  ADD_FAILURE() << "prepared";
  return ApiError(0, "", "", "", "");
}

TEST(ServeEngine, RefusesWhatCannotRun) {
  Engine e = make_engine(false);
  auto other = completion("hi", 1);
  other.model = "gpt-4";
  const ApiError m = refusal(e, other);
  EXPECT_EQ(m.status, 404);
  EXPECT_EQ(m.code, "model_not_found");
  EXPECT_EQ(m.param, "model");

  auto longp = completion("", 1);
  longp.prompt_ids = std::vector<int32_t>(static_cast<size_t>(e.context() + 1), 5);
  const ApiError c = refusal(e, longp);
  EXPECT_EQ(c.status, 400);
  EXPECT_EQ(c.code, "context_length_exceeded");
  EXPECT_NE(std::string(c.what()).find(std::to_string(e.context())), std::string::npos) << c.what();
  longp.prompt_ids->pop_back();  // exactly the context still fits
  EXPECT_NO_THROW(e.prepare(longp));

  auto vocab = completion("", 1);
  vocab.prompt_ids = std::vector<int32_t>{1, 512};
  EXPECT_EQ(refusal(e, vocab).param, "prompt");

  CompletionRequest chat;
  chat.messages = {{"user", "hi"}};
  const ApiError n = refusal(e, chat);
  EXPECT_EQ(n.code, "no_chat_template");
  EXPECT_NE(std::string(n.what()).find("no tokenizer_config.json"), std::string::npos);
}

TEST(ServeEngine, ChatRendersTheTemplate) {
  Engine e = make_engine(true);
  CompletionRequest chat;
  chat.messages = {{"user", "hi"}};
  const auto p = e.prepare(chat);
  EXPECT_EQ(p.max_tokens, EngineOptions{}.default_chat_max_tokens);
  const auto tok = tiny_tokenizer(runtime::testing::tiny("tiny").config);
  EXPECT_EQ(p.prompt, tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", false));
}

TEST(ServeEngine, GeneratesCountsAndPredictsTime) {
  Engine e = make_engine(false);
  const auto p = e.prepare(completion("Once upon", 6));
  EXPECT_EQ(p.max_tokens, 6);
  std::string streamed;
  const CompletionResult r = e.run(p, [&](std::string_view s) {
    streamed += s;
    return true;
  });
  EXPECT_EQ(r.prompt_tokens, static_cast<int64_t>(p.prompt.size()));
  EXPECT_GE(r.completion_tokens, 1);
  EXPECT_LE(r.completion_tokens, 6);
  EXPECT_EQ(streamed, r.text);
  EXPECT_GT(r.predicted_prefill_ms, 0);
  if (r.completion_tokens > 1) {
    EXPECT_GT(r.predicted_decode_ms, 0);
  }
  EXPECT_EQ(r.finish, r.completion_tokens == 6 ? FinishReason::length : FinishReason::stop);
  // Requests stand alone: the same greedy request gives the same text.
  EXPECT_EQ(e.run(p, [](std::string_view) { return true; }).text, r.text);
}

TEST(ServeEngine, StopSequenceCutsTheText) {
  Engine e = make_engine(false);
  auto req = completion("Once upon", 12);
  const CompletionResult full = e.run(e.prepare(req), [](std::string_view) { return true; });
  if (full.text.size() < 4) GTEST_SKIP() << "the tiny model's text is too short to cut: '" << full.text << "'";
  req.stop = {full.text.substr(full.text.size() / 2, 2)};
  const CompletionResult cut = e.run(e.prepare(req), [](std::string_view) { return true; });
  EXPECT_EQ(cut.finish, FinishReason::stop);
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(req.stop[0])));
  EXPECT_LT(cut.completion_tokens, full.completion_tokens);
}

TEST(ServeEngine, IgnoreEosGeneratesMaxTokens) {
  Engine e = make_engine(false);
  auto req = completion("Once upon", 20);
  req.ignore_eos = true;
  const CompletionResult r = e.run(e.prepare(req), [](std::string_view) { return true; });
  EXPECT_EQ(r.completion_tokens, 20);
  EXPECT_EQ(r.finish, FinishReason::length);
}

TEST(ServeEngine, AGoneClientStopsTheGeneration) {
  Engine e = make_engine(false);
  int calls = 0;
  const CompletionResult r = e.run(e.prepare(completion("Once upon", 12)), [&](std::string_view) {
    ++calls;
    return false;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.completion_tokens, 1);
}

}  // namespace
}  // namespace tessera::serve
