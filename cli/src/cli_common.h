#pragma once
// Small pieces several commands share: the --spec argument and streaming of
// decoded text.
#include <algorithm>
#include <string>
#include <string_view>

#include "tessera/npu/device_spec.h"

namespace tessera::cli {

// --spec: a preset name (xdna2 | xdna1) or a DeviceSpec JSON file.
inline npu::DeviceSpec spec_from_arg(const std::string& name) {
  for (const auto& p : npu::DeviceSpec::preset_names())
    if (p == name) return npu::DeviceSpec::preset(name);
  return npu::DeviceSpec::load(name);
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
