#pragma once
// Emits the growing decoded text of a generation without splitting a
// multi-byte character: text that currently ends in U+FFFD (an incomplete
// UTF-8 sequence decoded lossily) is held back until a later token completes
// it or generation ends. Shared by the CLI's streaming and the server's SSE.
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace tessera::runtime {

class TextStream {
 public:
  // `full` is the decode of every token so far; returns the part not yet
  // emitted that is safe to show now (all of it when `final`).
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

}  // namespace tessera::runtime
