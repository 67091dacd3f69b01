#pragma once
// Small pieces several commands share: the --spec argument and streaming of
// decoded text.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <vector>
#include <string>
#include <string_view>

#include "tessera/core/error.h"
#include "tessera/model/chat_template.h"
#include "tessera/model/tokenizer.h"
#include "tessera/npu/device_spec.h"

namespace tessera::cli {

// --spec: a preset name (xdna2 | xdna1) or a DeviceSpec JSON file.
inline npu::DeviceSpec spec_from_arg(const std::string& name) {
  for (const auto& p : npu::DeviceSpec::preset_names())
    if (p == name) return npu::DeviceSpec::preset(name);
  return npu::DeviceSpec::load(name);
}

// The prompt's token ids: the text as given, or (--chat) the text as one user
// message rendered with the chat template found at `chat_source` (a model
// directory's tokenizer_config.json or a GGUF), whose markers carry the special
// tokens, so no post-processor specials are added on top.
inline std::vector<int32_t> encode_prompt(const model::Tokenizer& tok, const std::string& text,
                                          bool chat, const std::filesystem::path& chat_source) {
  if (!chat) return tok.encode(text, true);
  const auto tmpl = model::ChatTemplate::from_model(chat_source);
  return tok.encode(tmpl.render({{"user", text}}, true), false);
}

// Where a deployment's chat template lives: model/tokenizer_config.json, or the
// HF directory a GGUF was converted into (deploy -m FILE.gguf).
inline std::filesystem::path deployment_chat_source(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "model/tokenizer_config.json")) return dir / "model";
  std::error_code ec;
  if (std::filesystem::is_directory(dir / "gguf", ec))
    for (const auto& e : std::filesystem::directory_iterator(dir / "gguf"))
      if (std::filesystem::exists(e.path() / "tokenizer_config.json")) return e.path();
  throw_error<FileError>("run --chat: {} has no tokenizer_config.json with a chat template",
                         dir.string());
}

// Emits the growing decoded text without splitting a multi-byte character:
// text that currently ends in U+FFFD (an incomplete UTF-8 sequence decoded
// lossily) is held back until a later token completes it or generation ends.
class TextStream {
 public:
  std::string next(const std::string& full, bool final) {
    static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
    size_t stable = full.size();
    if (!final)
      while (stable >= kReplacement.size() &&
             std::string_view(full).substr(stable - kReplacement.size(), kReplacement.size()) ==
                 kReplacement)
        stable -= kReplacement.size();
    const size_t common = std::mismatch(emitted_.begin(), emitted_.end(), full.begin(),
                                        full.begin() + static_cast<ptrdiff_t>(stable))
                              .first -
                          emitted_.begin();
    if (common < emitted_.size() || stable <= emitted_.size()) return {};
    std::string out = full.substr(emitted_.size(), stable - emitted_.size());
    emitted_ = full.substr(0, stable);
    return out;
  }

 private:
  std::string emitted_;
};

}  // namespace tessera::cli
