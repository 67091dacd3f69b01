#pragma once
// Small pieces several commands share: the --spec argument, prompt encoding and
// streaming of decoded text.
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
#include "tessera/runtime/text_stream.h"

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

// The streaming helper now lives in runtime/ (the server streams too).
using runtime::TextStream;

}  // namespace tessera::cli
