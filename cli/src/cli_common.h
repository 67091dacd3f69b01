#pragma once
// Small pieces several commands share: the --spec argument, prompt encoding and
// streaming of decoded text.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <vector>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "tessera/core/error.h"
#include "tessera/model/chat_template.h"
#include "tessera/model/tokenizer.h"
#include "tessera/npu/device_spec.h"
#include "tessera/runtime/sampler.h"
#include "tessera/runtime/text_stream.h"

namespace tessera::cli {

// --temperature, --top-k, --top-p and --seed: every generating command samples alike.
inline void add_sampling_options(CLI::App* sub, runtime::SamplingOptions& s) {
  sub->add_option("--temperature", s.temperature, "0 = greedy")->capture_default_str();
  sub->add_option("--top-k", s.top_k, "Keep the K most likely tokens (0 = all)")->capture_default_str();
  sub->add_option("--top-p", s.top_p, "Nucleus mass to keep (1 = all)")->capture_default_str();
  sub->add_option("--seed", s.seed, "Sampling seed")->capture_default_str();
}

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
