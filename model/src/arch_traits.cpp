// The one table of supported architectures (STYLE.md #1): everything that
// differs between Llama, Qwen2 and Qwen3 is a column here, never a branch
// elsewhere. Adding an architecture is adding a row.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/model/config.h"

namespace tessera::model {

const std::vector<ArchTraits>& supported_architectures() {
  // Checked against transformers' modeling files: Qwen2Attention builds
  // q/k/v with bias=True unconditionally and ignores attention_bias; Llama and
  // Qwen3 take the bias from config.attention_bias; Qwen3 adds q_norm/k_norm.
  // MistralAttention builds q/k/v/o without bias and reads no attention_bias;
  // MistralConfig defaults max_position_embeddings to 4096 * 32 and
  // sliding_window to 4096. Otherwise its block is the Llama block.
  // (architecture, family, qkv_bias, qk_norm, honours_attention_bias_key,
  //  default_head_dim, default_max_position_embeddings, sliding_window_always,
  //  default_sliding_window, gguf_qk_permuted)
  static const std::vector<ArchTraits> table = {
      {"LlamaForCausalLM", "llama", false, false, true, 0, 2048, false, 0, true},
      {"Qwen2ForCausalLM", "qwen2", true, false, false, 0, 32768, false, 0, false},
      {"Qwen3ForCausalLM", "qwen3", false, true, true, 128, 32768, false, 0, false},
      {"MistralForCausalLM", "mistral", false, false, false, 0, 131072, true, 4096, true},
  };
  return table;
}

namespace {

// The row whose `key` column equals `value`; UnsupportedError listing the
// column's supported values otherwise.
const ArchTraits& find_row(std::string ArchTraits::*key, const std::string& value,
                           const char* what) {
  std::string names;
  for (const auto& t : supported_architectures()) {
    if (t.*key == value) return t;
    names += names.empty() ? t.*key : ", " + t.*key;
  }
  throw_error<UnsupportedError>("unsupported {} '{}' (supported: {})", what, value, names);
}

}  // namespace

const ArchTraits& arch_traits(const std::string& architecture) {
  return find_row(&ArchTraits::architecture, architecture, "architecture");
}

const ArchTraits& arch_traits_for_family(const std::string& family) {
  return find_row(&ArchTraits::family, family, "architecture family");
}

}  // namespace tessera::model
