#include "tessera/serve/api.h"

#include <string>

#include <gtest/gtest.h>

namespace tessera::serve {
namespace {

using nlohmann::json;

// The error a body gets: status, param and code, as a client would see them.
ApiError refusal(Endpoint ep, const std::string& body) {
  try {
    parse_request(ep, body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "", "", "", "");
}

void expect_refused(Endpoint ep, const std::string& body, const std::string& param, const std::string& code) {
  const ApiError e = refusal(ep, body);
  EXPECT_EQ(e.status, 400) << body;
  EXPECT_EQ(e.type, "invalid_request_error") << body;
  EXPECT_EQ(e.param, param) << body << ": " << e.what();
  EXPECT_EQ(e.code, code) << body << ": " << e.what();
}

TEST(ServeApi, ParsesAChatRequest) {
  const auto r = parse_request(Endpoint::chat, R"({"model": "m", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}],
      "max_tokens": 7, "temperature": 0, "top_p": 0.5, "seed": 9, "stop": ["a", "b"], "stream": true, "n": 1,
      "frequency_penalty": 0.3, "ignore_eos": true})");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(r.seed, 9u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(ServeApi, DefaultsFollowOpenAI) {
  const auto r = parse_request(Endpoint::chat, R"({"messages": [{"role": "user", "content": "x"}]})");
  EXPECT_FALSE(r.max_tokens);
  EXPECT_EQ(r.temperature, 1.0);
  EXPECT_EQ(r.top_p, 1.0);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_EQ(parse_request(Endpoint::chat, R"({"messages": [{"role": "user", "content": "x"}],
      "max_completion_tokens": 5})").max_tokens, 5);
}

TEST(ServeApi, ParsesEveryPromptForm) {
  EXPECT_EQ(parse_request(Endpoint::completion, R"({"prompt": "Once"})").prompt, "Once");
  EXPECT_EQ(parse_request(Endpoint::completion, R"({"prompt": ["Once"]})").prompt, "Once");
  const auto ids = parse_request(Endpoint::completion, R"({"prompt": [1, 2, 3], "stop": "x"})");
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ids.stop, (std::vector<std::string>{"x"}));
}

TEST(ServeApi, TopPZeroMeansGreedy) {
  const auto r = parse_request(Endpoint::completion, R"({"prompt": "a", "top_p": 0})");
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.top_p, 1.0);
}

TEST(ServeApi, RefusesMalformedBodies) {
  expect_refused(Endpoint::chat, "{\"messages\": [", "", "invalid_json");
  expect_refused(Endpoint::chat, "[1, 2]", "", "invalid_json");
  expect_refused(Endpoint::chat, "{}", "messages", "missing_required_parameter");
  expect_refused(Endpoint::completion, "{}", "prompt", "missing_required_parameter");
}

TEST(ServeApi, RefusesFieldsOfTheWrongType) {
  const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
  expect_refused(Endpoint::chat, "{" + m + R"(, "max_tokens": "7"})", "max_tokens", "invalid_type");
  expect_refused(Endpoint::chat, "{" + m + R"(, "max_tokens": 1.5})", "max_tokens", "invalid_type");
  expect_refused(Endpoint::chat, "{" + m + R"(, "temperature": "hot"})", "temperature", "invalid_type");
  expect_refused(Endpoint::chat, "{" + m + R"(, "stream": 1})", "stream", "invalid_type");
  expect_refused(Endpoint::chat, "{" + m + R"(, "ignore_eos": "yes"})", "ignore_eos", "invalid_type");
  expect_refused(Endpoint::chat, "{" + m + R"(, "stop": 3})", "stop", "invalid_type");
  expect_refused(Endpoint::chat, "{" + m + R"(, "stop": ["a", 3]})", "stop", "invalid_type");
  expect_refused(Endpoint::chat, "{" + m + R"(, "model": 5})", "model", "invalid_type");
  expect_refused(Endpoint::chat, "{" + m + R"(, "seed": "s"})", "seed", "invalid_type");
  expect_refused(Endpoint::chat, R"({"messages": "hi"})", "messages", "invalid_type");
  expect_refused(Endpoint::chat, R"({"messages": [3]})", "messages[0]", "invalid_type");
  expect_refused(Endpoint::chat, R"({"messages": [{"role": "user", "content": 3}]})", "messages[0].content",
                 "invalid_type");
  expect_refused(Endpoint::completion, R"({"prompt": 3})", "prompt", "invalid_type");
}

TEST(ServeApi, RefusesValuesOutOfRange) {
  const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
  expect_refused(Endpoint::chat, "{" + m + R"(, "n": 2})", "n", "unsupported_value");
  expect_refused(Endpoint::chat, "{" + m + R"(, "max_tokens": -1})", "max_tokens", "invalid_value");
  expect_refused(Endpoint::chat, "{" + m + R"(, "temperature": 2.5})", "temperature", "invalid_value");
  expect_refused(Endpoint::chat, "{" + m + R"(, "top_p": 1.5})", "top_p", "invalid_value");
  expect_refused(Endpoint::chat, "{" + m + R"(, "stop": ["a", "b", "c", "d", "e"]})", "stop", "invalid_value");
  expect_refused(Endpoint::chat, "{" + m + R"(, "stop": [""]})", "stop", "invalid_value");
  expect_refused(Endpoint::chat, R"({"messages": []})", "messages", "invalid_value");
  expect_refused(Endpoint::chat, R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].role",
                 "invalid_value");
  expect_refused(Endpoint::chat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                 "messages[0].content[0]", "invalid_value");
  expect_refused(Endpoint::completion, R"({"prompt": ["a", "b"]})", "prompt", "invalid_value");
  expect_refused(Endpoint::completion, R"({"prompt": [1, -2]})", "prompt", "invalid_value");
}

CompletionResult result() {
  CompletionResult r;
  r.text = "Paris.";
  r.finish = FinishReason::length;
  r.prompt_tokens = 12;
  r.completion_tokens = 3;
  r.predicted_prefill_ms = 1.5;
  r.predicted_decode_ms = 2.25;
  return r;
}

TEST(ServeApi, ChatResponseHasUsageAndPredictedTime) {
  const json j = response_json({Endpoint::chat, "chatcmpl-1", 100, "m"}, result());
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Paris.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 12);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 15);
  EXPECT_EQ(j["tessera"]["npu_predicted_prefill_ms"], 1.5);
  EXPECT_EQ(j["tessera"]["npu_predicted_decode_ms"], 2.25);
  EXPECT_EQ(j["tessera"]["npu_predicted_ms"], 3.75);
}

TEST(ServeApi, CompletionResponseCarriesText) {
  const json j = response_json({Endpoint::completion, "cmpl-2", 100, "m"}, result());
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "Paris.");
  EXPECT_FALSE(j["choices"][0].contains("message"));
}

TEST(ServeApi, ChatChunksCarryRoleFirstAndUsageLast) {
  const ResponseMeta meta{Endpoint::chat, "chatcmpl-3", 100, "m"};
  const json first = chunk_json(meta, "Pa", true, nullptr);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "Pa");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(first.contains("usage"));
  const json mid = chunk_json(meta, "ris", false, nullptr);
  EXPECT_FALSE(mid["choices"][0]["delta"].contains("role"));
  const auto r = result();
  const json last = chunk_json(meta, "", false, &r);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["usage"]["total_tokens"], 15);
  EXPECT_EQ(last["tessera"]["npu_predicted_ms"], 3.75);
}

TEST(ServeApi, SseEventsAreOneDataLineEach) {
  const json j = chunk_json({Endpoint::completion, "cmpl-4", 1, "m"}, "a\n\nb", false, nullptr);
  const std::string ev = sse_event(j);
  ASSERT_TRUE(ev.starts_with("data: "));
  ASSERT_TRUE(ev.ends_with("\n\n"));
  // The text's blank line must not end the event early.
  EXPECT_EQ(ev.find('\n'), ev.size() - 2);
  EXPECT_EQ(json::parse(ev.substr(6))["choices"][0]["text"], "a\n\nb");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  // Invalid UTF-8 from a lossy decode is replaced, not thrown on.
  EXPECT_NO_THROW(sse_event(json{{"text", std::string("\xC3")}}));
}

TEST(ServeApi, ErrorObjectIsOpenAIShaped) {
  const json j = error_json(ApiError(404, "no such model", "invalid_request_error", "model", "model_not_found"));
  EXPECT_EQ(j["error"]["message"], "no such model");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  const json n = error_json(ApiError(500, "x", "server_error", "", ""));
  EXPECT_TRUE(n["error"]["param"].is_null());
  EXPECT_TRUE(n["error"]["code"].is_null());
}

TEST(ServeApi, ModelsListsTheServedModel) {
  const json j = models_json("smol", 5);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "smol");
  EXPECT_EQ(j["data"][0]["object"], "model");
}

}  // namespace
}  // namespace tessera::serve
