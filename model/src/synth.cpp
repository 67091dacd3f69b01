// Seeded synthetic weights. Each element is a pure function of (seed, tensor
// index, element index) through splitmix64, so chunks can be produced in any
// order and in parallel and the file is still identical byte for byte.
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/core/log.h"
#include "tessera/core/threads.h"
#include "tessera/model/safetensors.h"
#include "tessera/model/synth.h"
#include "tessera/model/tensor_table.h"

namespace tessera::model {
namespace {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// value = center + scale * u, u uniform in [-1, 1).
struct Distribution {
  float center;
  float scale;
};

// Scales chosen so a forward pass is informative, not just well conditioned:
// projections keep unit variance (uniform with std 1/sqrt(fan_in)); the
// embedding gives logits with a standard deviation of about 2.3 after the
// final norm, so greedy choices are not near-ties; biases are large enough
// that dropping them changes the output visibly; norm gains stay near 1.
Distribution distribution(const TensorSpec& s) {
  switch (s.role) {
    case WeightRole::attn_norm:
    case WeightRole::ffn_norm:
    case WeightRole::final_norm:
    case WeightRole::q_norm:
    case WeightRole::k_norm: return {1.0f, 0.2f};
    case WeightRole::q_bias:
    case WeightRole::k_bias:
    case WeightRole::v_bias: return {0.0f, 0.5f};
    case WeightRole::embed_tokens:
    case WeightRole::lm_head:
      return {0.0f, 4.0f / std::sqrt(static_cast<float>(s.shape.at(1)))};
    default:  // (out, in) projection matrices
      return {0.0f, std::sqrt(3.0f / static_cast<float>(s.shape.at(1)))};
  }
}

void fill_bf16(uint64_t key, Distribution d, uint64_t first, std::span<bf16> out) {
  parallel_for(
      out.size(),
      [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) {
          uint64_t r = splitmix64(key + (first + i) * 0xD1B54A32D192ED03ull);
          // 24 random bits -> [-1, 1): exact in fp32.
          float u = static_cast<float>(r >> 40) * (2.0f / 16777216.0f) - 1.0f;
          out[i] = f32_to_bf16(d.center + d.scale * u);
        }
      },
      1 << 16);
}

void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  f.close();
  if (!f) throw_error<FileError>("{}: cannot write", p.string());
}

}  // namespace

ModelConfig synthetic_config(const ModelConfig& c, std::optional<int64_t> layers_override) {
  ModelConfig s = c;
  if (layers_override) {
    if (*layers_override <= 0)
      throw_error<UsageError>("--layers must be positive, got {}", *layers_override);
    s.num_layers = *layers_override;
  }
  if (s.vocab_size < kSynthVocabSize)
    throw_error<ConfigError>("{}: vocab_size {} is smaller than the synthetic tokenizer's {} "
                             "tokens", c.name, s.vocab_size, kSynthVocabSize);
  const int64_t first_free = kSynthVocabSize - 2;
  auto pick = [&](const std::vector<int64_t>& ids, int64_t fallback) {
    return !ids.empty() && ids[0] >= first_free && ids[0] < s.vocab_size ? ids[0] : fallback;
  };
  int64_t bos = pick(c.bos_token_ids, first_free);
  int64_t eos = pick(c.eos_token_ids, first_free + 1);
  // Keep a shared bos/eos shared (Qwen2.5 uses <|endoftext|> for both).
  if (!c.bos_token_ids.empty() && !c.eos_token_ids.empty() &&
      c.bos_token_ids[0] == c.eos_token_ids[0])
    eos = bos;
  s.bos_token_ids = {bos};
  s.eos_token_ids = {eos};
  s.torch_dtype = "bfloat16";
  s.validate();
  return s;
}

void write_synthetic_model(const ModelConfig& c, const std::filesystem::path& out, uint64_t seed,
                           std::optional<int64_t> layers_override) {
  const ModelConfig s = synthetic_config(c, layers_override);
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) throw_error<FileError>("{}: cannot create directory: {}", out.string(), ec.message());
  const auto specs = tensor_specs(s);
  std::vector<SafetensorsWriteEntry> entries;
  for (const auto& t : specs) entries.push_back({t.name, DType::bf16, t.shape});
  const uint64_t base = splitmix64(seed);
  size_t done = 0;
  write_safetensors(
      out / "model.safetensors", entries,
      [&](size_t i, uint64_t off, std::span<std::byte> dst) {
        std::span<bf16> vals(reinterpret_cast<bf16*>(dst.data()), dst.size() / sizeof(bf16));
        fill_bf16(splitmix64(base ^ (i + 1)), distribution(specs[i]), off / sizeof(bf16), vals);
        if (off + dst.size() == static_cast<uint64_t>(shape_numel(entries[i].shape)) * sizeof(bf16))
          report_progress("synth weights", ++done, entries.size());
      },
      {{"format", "pt"}});
  write_text(out / "tokenizer.json",
             synthetic_tokenizer_json(s.bos_token_ids[0], s.eos_token_ids[0]));
  nlohmann::json gen = {{"bos_token_id", s.bos_token_ids[0]},
                        {"eos_token_id", s.eos_token_ids[0]},
                        {"do_sample", false}};
  write_text(out / "generation_config.json", gen.dump(2) + "\n");
  write_text(out / "config.json", config_to_json(s).dump(2) + "\n");
}

}  // namespace tessera::model
