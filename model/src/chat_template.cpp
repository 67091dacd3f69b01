// Chat template recognition and rendering (see chat_template.h). Formats are
// rows of one table: the markers that identify them and the strings that
// frame each message.
#include "tessera/model/chat_template.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/gguf.h"
#include "tessera/model/gguf_model.h"

namespace tessera::model {
namespace {

struct FormatRow {
  ChatTemplate::Format format;
  const char* name;
  std::vector<const char*> markers;  // all must occur in the template
  const char* begin;                 // once, before the first message
  const char* role_open;             // before the role
  const char* role_close;            // between role and content
  const char* message_end;           // after the content
};

const std::vector<FormatRow>& formats() {
  static const std::vector<FormatRow> rows = {
      {ChatTemplate::Format::chatml, "ChatML", {"<|im_start|>", "<|im_end|>"}, "",
       "<|im_start|>", "\n", "<|im_end|>\n"},
      {ChatTemplate::Format::llama3, "Llama-3",
       {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}, "<|begin_of_text|>",
       "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>"},
  };
  return rows;
}

const FormatRow& row(ChatTemplate::Format f) {
  for (const auto& r : formats())
    if (r.format == f) return r;
  throw_error<InternalError>("unknown chat format {}", static_cast<int>(f));
}

// SmolLM2-style: {% if loop.first and messages[0]['role'] != 'system' %}
// {{ '<|im_start|>system\nTEXT<|im_end|>\n' }}{% endif %}
std::optional<std::string> chatml_default_system(const std::string& t) {
  if (t.find("messages[0]['role'] != 'system'") == std::string::npos) return std::nullopt;
  const std::string open = "'<|im_start|>system\n";
  const size_t b = t.find(open);
  if (b == std::string::npos) return std::nullopt;
  const size_t e = t.find("<|im_end|>", b + open.size());
  if (e == std::string::npos) return std::nullopt;
  return t.substr(b + open.size(), e - b - open.size());
}

}  // namespace

ChatTemplate ChatTemplate::recognize(const std::string& jinja, const std::string& where) {
  std::string names;
  for (const auto& r : formats()) {
    bool all = true;
    for (const char* m : r.markers) all = all && jinja.find(m) != std::string::npos;
    if (all) {
      ChatTemplate t;
      t.format_ = r.format;
      if (r.format == Format::chatml) t.default_system_ = chatml_default_system(jinja);
      return t;
    }
    names += (names.empty() ? "" : ", ") + std::string(r.name);
  }
  throw_error<UnsupportedError>("{}: chat_template is not a format tessera knows (supported: {}); "
                                "it begins '{}'", where, names, jinja.substr(0, 60));
}

ChatTemplate ChatTemplate::from_model(const std::filesystem::path& p) {
  if (is_gguf_file(p)) {
    const GgufFile f = GgufFile::open(p);
    auto t = f.get_string_opt("tokenizer.chat_template");
    if (!t) throw_error<UnsupportedError>("{}: no tokenizer.chat_template", p.string());
    return recognize(*t, p.string());
  }
  const std::filesystem::path file = p / "tokenizer_config.json";
  std::ifstream in(file);
  if (!in) throw_error<FileError>("{}: no tokenizer_config.json (needed for a chat template)",
                                  p.string());
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("chat_template") ||
      !j["chat_template"].is_string())
    throw_error<UnsupportedError>("{}: no string 'chat_template'", file.string());
  return recognize(j["chat_template"].get<std::string>(), file.string());
}

const char* ChatTemplate::format_name() const { return row(format_).name; }

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt) const {
  const FormatRow& r = row(format_);
  std::string out = r.begin;
  auto add = [&](const std::string& role, const std::string& content) {
    out += r.role_open + role + r.role_close + content + r.message_end;
  };
  if (default_system_ && (messages.empty() || messages[0].role != "system"))
    add("system", *default_system_);
  for (const auto& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw_error<UsageError>("chat: unknown role '{}' (system, user, assistant)", m.role);
    add(m.role, m.content);
  }
  if (add_generation_prompt) out += r.role_open + std::string("assistant") + r.role_close;
  return out;
}

}  // namespace tessera::model
