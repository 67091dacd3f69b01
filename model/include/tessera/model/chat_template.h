#pragma once
// Chat templates. Checkpoints ship a Jinja template (tokenizer_config.json
// "chat_template", GGUF tokenizer.chat_template); tessera does not run Jinja.
// It recognises the two formats its model families use by their markers and
// renders them natively:
//   ChatML  (SmolLM2, Qwen2.5, Qwen3): <|im_start|>ROLE\nTEXT<|im_end|>\n
//   Llama-3 (Llama-3.x): <|begin_of_text|><|start_header_id|>ROLE<|end_header_id|>\n\nTEXT<|eot_id|>
// A template that matches neither is an UnsupportedError: no silent fallback.
// The default system message some ChatML templates insert when the
// conversation has none (SmolLM2's) is read from the template text.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tessera::model {

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  enum class Format { chatml, llama3 };
  // `where` names the file in errors.
  static ChatTemplate recognize(const std::string& jinja, const std::string& where);
  // tokenizer_config.json in a model directory, or a GGUF's metadata.
  static ChatTemplate from_model(const std::filesystem::path& dir_or_gguf);

  Format format() const { return format_; }
  const char* format_name() const;
  const std::optional<std::string>& default_system() const { return default_system_; }
  // The prompt text, ending with the assistant header when add_generation_prompt.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

 private:
  Format format_ = Format::chatml;
  std::optional<std::string> default_system_;
};

}  // namespace tessera::model
