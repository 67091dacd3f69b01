#pragma once
// ModelConfig: everything about a decoder-only model that tessera needs, parsed
// from a Hugging Face config.json or taken from a built-in preset. Architectures
// differ only by traits recorded here (DESIGN.md "Architectures are data").
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tessera::model {

struct RopeScaling {
  enum class Type { none, llama3 };
  Type type = Type::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  bool operator==(const RopeScaling&) const = default;
};

// Per-architecture defaults and capabilities: one row per supported HF class in
// a single table (arch_traits.cpp). Adding an architecture is adding a row.
struct ArchTraits {
  std::string architecture;  // HF class name, e.g. "Qwen3ForCausalLM"
  std::string family;        // "llama" | "qwen2" | "qwen3"
  bool qkv_bias = false;     // q/k/v projections carry a bias (Qwen2)
  bool qk_norm = false;      // per-head RMSNorm on q and k before RoPE (Qwen3)
  bool honours_attention_bias_key = false;  // config "attention_bias" toggles qkv_bias
  // HF config-class defaults for keys a config.json may omit (0 = derived:
  // head_dim = hidden_size / num_heads). Qwen3Config defaults head_dim to 128.
  int64_t default_head_dim = 0;
  int64_t default_max_position_embeddings = 2048;
  // How config.json's "sliding_window" is read. Llama has no such key; Qwen2/3
  // ignore it unless "use_sliding_window" is true (refused). Mistral applies it
  // whenever it is not null, and MistralConfig defaults it to 4096 when absent.
  bool sliding_window_always = false;
  int64_t default_sliding_window = 0;  // 0: none
  // llama.cpp's converter stores this family's q/k rows permuted (interleaved
  // rope pairs); the GGUF loader undoes it so tensors have HF's layout.
  bool gguf_qk_permuted = false;
  bool operator==(const ArchTraits&) const = default;
};

const std::vector<ArchTraits>& supported_architectures();
// Throws UnsupportedError naming `architecture` and listing the supported ones.
const ArchTraits& arch_traits(const std::string& architecture);
// By family ("llama", "qwen2", "qwen3": GGUF's general.architecture).
const ArchTraits& arch_traits_for_family(const std::string& family);

// Upper bounds ModelConfig::validate() enforces, each far above any published
// decoder-only model (the reason is in the error message), so that a
// corrupted config.json is refused before anything is sized from it.
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxWidth = int64_t{1} << 20;  // hidden_size, intermediate_size
inline constexpr int64_t kMaxHeads = 4096;
inline constexpr int64_t kMaxHeadDim = 4096;
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;
inline constexpr int64_t kMaxPositions = int64_t{1} << 24;

struct ModelConfig {
  std::string name;  // preset name or directory name, for messages
  ArchTraits traits;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // explicit in config.json or hidden_size / num_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // resolved: traits + attention_bias key
  bool qk_norm = false;
  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype = "bfloat16";
  // Keys beyond this many positions back are masked (HF: q - k < window);
  // 0 = no window. tessera computes full causal attention, which equals the
  // windowed one exactly while the context is at most the window: validate()
  // refuses a window shorter than default_context(), check_context() any
  // longer context asked for.
  int64_t sliding_window = 0;

  // The KV-cache capacity a deployment uses unless told otherwise:
  // max_position_embeddings, capped at 4096.
  int64_t default_context() const;
  // Throws UnsupportedError when `context` positions would let a sliding
  // window bind (a model tessera would compute differently), UsageError when
  // it exceeds max_position_embeddings.
  void check_context(int64_t context) const;

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t gqa_group() const { return num_heads / num_kv_heads; }
  int64_t parameter_count() const;  // sum over tensor_specs()
  // Throws ConfigError naming the first inconsistent or out-of-bounds field.
  void validate() const;
  bool operator==(const ModelConfig&) const = default;
};

// Parse HF config.json (throws ConfigError naming the missing/invalid field,
// UnsupportedError for unknown architectures or rope_scaling types).
ModelConfig parse_config(const nlohmann::json& j, const std::string& name = "config.json");
ModelConfig load_config(const std::filesystem::path& config_json);
// Inverse of parse_config: an HF-compatible config.json.
nlohmann::json config_to_json(const ModelConfig& c);

// Built-in presets (../shared/reference/models.md), usable without weights.
const std::vector<std::string>& preset_names();
ModelConfig preset(const std::string& name);  // throws UsageError listing names
// One line: "llama-3.2-1b: LlamaForCausalLM 16 x 2048 ..." (for listings).
std::string config_summary(const ModelConfig& c);

}  // namespace tessera::model
