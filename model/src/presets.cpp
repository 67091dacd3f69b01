// Built-in model shapes, usable without weights (../shared/reference/models.md).
// Values are those of each model's published config.json on the Hugging Face
// hub (base checkpoints for Llama/SmolLM2/Qwen2.5; the Qwen3 release names are
// the post-trained checkpoints, whose eos is <|im_end|> 151645 and whose
// max_position_embeddings is 40960).
#include <string>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/model/config.h"

namespace tessera::model {
namespace {

struct PresetRow {
  const char* name;
  const char* architecture;
  int64_t layers, hidden, intermediate, heads, kv_heads, head_dim, vocab, max_pos;
  double rope_theta, rms_eps;
  bool tied, llama3_rope;
  int64_t bos, eos;  // -1: none
};

// (name, arch, layers, hidden, ffn, heads, kv, head_dim, vocab, max_pos, theta,
//  eps, tied, llama3 rope, bos, eos)
constexpr PresetRow kRows[] = {
    {"llama-3.2-1b", "LlamaForCausalLM", 16, 2048, 8192, 32, 8, 64, 128256, 131072, 500000,
     1e-5, true, true, 128000, 128001},
    {"llama-3.2-3b", "LlamaForCausalLM", 28, 3072, 8192, 24, 8, 128, 128256, 131072, 500000,
     1e-5, true, true, 128000, 128001},
    {"smollm2-1.7b", "LlamaForCausalLM", 24, 2048, 8192, 32, 32, 64, 49152, 8192, 130000, 1e-5,
     true, false, 1, 2},
    {"smollm2-135m", "LlamaForCausalLM", 30, 576, 1536, 9, 3, 64, 49152, 8192, 100000, 1e-5,
     true, false, 0, 0},
    {"qwen2.5-0.5b", "Qwen2ForCausalLM", 24, 896, 4864, 14, 2, 64, 151936, 32768, 1000000, 1e-6,
     true, false, 151643, 151643},
    {"qwen2.5-1.5b", "Qwen2ForCausalLM", 28, 1536, 8960, 12, 2, 128, 151936, 131072, 1000000,
     1e-6, true, false, 151643, 151643},
    {"qwen2.5-3b", "Qwen2ForCausalLM", 36, 2048, 11008, 16, 2, 128, 151936, 32768, 1000000, 1e-6,
     true, false, 151643, 151643},
    {"qwen3-0.6b", "Qwen3ForCausalLM", 28, 1024, 3072, 16, 8, 128, 151936, 40960, 1000000, 1e-6,
     true, false, 151643, 151645},
    {"qwen3-1.7b", "Qwen3ForCausalLM", 28, 2048, 6144, 16, 8, 128, 151936, 40960, 1000000, 1e-6,
     true, false, 151643, 151645},
    {"qwen3-4b", "Qwen3ForCausalLM", 36, 2560, 9728, 32, 8, 128, 151936, 40960, 1000000, 1e-6,
     true, false, 151643, 151645},
    // Mistral-7B-v0.3 (sliding_window null): for plan and timing only; its
    // full-depth weights (14.5 GB bf16) are never synthesized by tests.
    {"mistral-7b", "MistralForCausalLM", 32, 4096, 14336, 32, 8, 128, 32768, 32768, 1000000,
     1e-5, false, false, 1, 2},
    // The embedded default (demo, tests): vocab 512 equals the synthetic
    // tokenizer's (synth.h kSynthVocabSize), GQA 4:2; bos/eos are its specials.
    {"tiny", "LlamaForCausalLM", 4, 128, 384, 4, 2, 32, 512, 2048, 10000, 1e-5, true, false, 510,
     511},
    // Qwen3 traits at toy size: q_dim 256 != hidden 128, untied LM head.
    {"tiny-qwen3", "Qwen3ForCausalLM", 2, 128, 384, 4, 2, 64, 512, 2048, 1000000, 1e-6, false,
     false, 510, 511},
};

ModelConfig from_row(const PresetRow& r) {
  ModelConfig c;
  c.name = r.name;
  c.traits = arch_traits(r.architecture);
  c.num_layers = r.layers;
  c.hidden_size = r.hidden;
  c.intermediate_size = r.intermediate;
  c.num_heads = r.heads;
  c.num_kv_heads = r.kv_heads;
  c.head_dim = r.head_dim;
  c.vocab_size = r.vocab;
  c.max_position_embeddings = r.max_pos;
  c.rope_theta = r.rope_theta;
  c.rms_norm_eps = r.rms_eps;
  c.tie_word_embeddings = r.tied;
  c.qkv_bias = c.traits.qkv_bias;
  c.qk_norm = c.traits.qk_norm;
  if (r.llama3_rope)
    c.rope_scaling = {RopeScaling::Type::llama3, 32.0, 1.0, 4.0, 8192};
  if (r.bos >= 0) c.bos_token_ids = {r.bos};
  if (r.eos >= 0) c.eos_token_ids = {r.eos};
  c.torch_dtype = "bfloat16";
  return c;
}

}  // namespace

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& r : kRows) v.emplace_back(r.name);
    return v;
  }();
  return names;
}

ModelConfig preset(const std::string& name) {
  for (const auto& r : kRows)
    if (name == r.name) return from_row(r);
  std::string all;
  for (const auto& n : preset_names()) all += (all.empty() ? "" : ", ") + n;
  throw_error<UsageError>("unknown preset '{}' (available: {})", name, all);
}

}  // namespace tessera::model
