// GGUF metadata -> ModelConfig and llama.cpp tensors -> the tensor table, as
// transformers' GGUF loader (integrations/ggml.py, modeling_gguf_pytorch_utils)
// reads them: `{arch}.*` keys for the shape, tokenizer ids for bos/eos, tied
// embeddings when the file has no output.weight, and the q/k row permutation
// of llama-family converters reversed.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/model/gguf_model.h"
#include "tessera/model/safetensors.h"
#include "tessera/model/tensor_table.h"

namespace tessera::model {
namespace {

// Per-frequency rope factors (llama.cpp's Llama-3 rope scaling) live in this
// tensor rather than in metadata; tessera only models them from config.json.
constexpr const char* kRopeFreqs = "rope_freqs.weight";

int64_t positive_key(const GgufFile& f, const std::string& key) {
  const int64_t v = f.get_int(key);
  if (v <= 0) throw_error<ConfigError>("{}: key '{}' must be positive, got {}", f.name(), key, v);
  return v;
}

void reject_unmodelled(const GgufFile& f, const std::string& arch) {
  if (auto type = f.get_string_opt(arch + ".rope.scaling.type"); type && *type != "none")
    throw_error<UnsupportedError>("{}: {}.rope.scaling.type '{}' is not supported (supported: "
                                  "none)", f.name(), arch, *type);
  if (const GgufTensorInfo* t = f.find_tensor(kRopeFreqs)) {
    const Tensor factors = f.tensor_f32(*t);
    for (float x : factors.as<float>())
      if (x != 1.0f)
        throw_error<UnsupportedError>("{}: tensor '{}' holds rope scaling factors; tessera takes "
                                      "Llama-3 rope scaling from config.json only (convert the "
                                      "model with transformers)", f.name(), kRopeFreqs);
  }
}

std::vector<int64_t> id_of(const GgufFile& f, const char* key) {
  auto v = f.get_int_opt(key);
  return v ? std::vector<int64_t>{*v} : std::vector<int64_t>{};
}

}  // namespace

bool is_gguf_file(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return false;
  std::ifstream in(p, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

ModelConfig gguf_config(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  ModelConfig c;
  try {
    c.traits = arch_traits_for_family(arch);
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(f.name() + ": general.architecture: " + e.what());
  }
  c.name = std::filesystem::path(f.name()).stem().string();
  reject_unmodelled(f, arch);
  auto key = [&](const char* k) { return arch + "." + k; };
  c.hidden_size = positive_key(f, key("embedding_length"));
  c.intermediate_size = positive_key(f, key("feed_forward_length"));
  c.num_layers = positive_key(f, key("block_count"));
  c.num_heads = positive_key(f, key("attention.head_count"));
  c.num_kv_heads = f.get_int_opt(key("attention.head_count_kv")).value_or(c.num_heads);
  const int64_t derived = c.traits.default_head_dim ? c.traits.default_head_dim
                                                    : c.hidden_size / c.num_heads;
  c.head_dim = f.get_int_opt(key("attention.key_length")).value_or(derived);
  if (auto v = f.get_int_opt(key("attention.value_length")); v && *v != c.head_dim)
    throw_error<UnsupportedError>("{}: {} {} differs from the key length {}", f.name(),
                                  key("attention.value_length"), *v, c.head_dim);
  c.max_position_embeddings = f.get_int_opt(key("context_length"))
                                  .value_or(c.traits.default_max_position_embeddings);
  c.rms_norm_eps = f.get_float(key("attention.layer_norm_rms_epsilon"));
  c.rope_theta = f.get_float_opt(key("rope.freq_base")).value_or(1e4);
  if (auto dims = f.get_int_opt(key("rope.dimension_count")); dims && *dims != c.head_dim)
    throw_error<UnsupportedError>("{}: partial rotary embeddings ({} {} of head_dim {}) are not "
                                  "supported", f.name(), key("rope.dimension_count"), *dims,
                                  c.head_dim);
  // The embedding's row count is the vocabulary the model computes with.
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2)
    throw_error<TensorError>("{}: missing 2-D tensor 'token_embd.weight'", f.name());
  c.vocab_size = embd->dims[1];
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  c.qkv_bias = c.traits.qkv_bias;
  c.qk_norm = c.traits.qk_norm;
  c.bos_token_ids = id_of(f, "tokenizer.ggml.bos_token_id");
  c.eos_token_ids = id_of(f, "tokenizer.ggml.eos_token_id");
  c.validate();
  return c;
}

Tensor unpermute_qk_rows(const Tensor& t, int64_t n_head) {
  TESSERA_CHECK(t.rank() == 2 && n_head > 0 && t.dim(0) % (2 * n_head) == 0,
                "unpermute_qk_rows needs [n_head * head_dim, cols], got {} for {} heads",
                shape_str(t.shape()), n_head);
  // Whole rows move (a block format's blocks run along a row), so any dtype.
  const int64_t rows = t.dim(0), hd = rows / n_head, half = hd / 2;
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(rows);
  Tensor out(t.dtype(), t.shape());
  const std::byte* src = t.bytes();
  std::byte* dst = out.mutable_bytes();
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < half; ++b) {
        const int64_t from = h * hd + 2 * b + a, to = h * hd + a * half + b;
        std::memcpy(dst + static_cast<size_t>(to) * row_bytes, src + static_cast<size_t>(from) * row_bytes,
                    row_bytes);
      }
  return out;
}

Weights gguf_weights(const GgufFile& f, const ModelConfig& c) {
  std::map<std::string, TensorSpec> by_gguf;
  for (const auto& s : tensor_specs(c)) by_gguf.emplace(gguf_tensor_name(s), s);
  Weights w;
  for (const auto& t : f.tensors()) {
    if (t.name == kRopeFreqs) continue;  // checked to be all ones by gguf_config
    auto it = by_gguf.find(t.name);
    if (it == by_gguf.end())
      throw_error<TensorError>("{}: tensor '{}' maps to no {} tensor", f.name(), t.name,
                               c.traits.architecture);
    const TensorSpec& s = it->second;
    if (t.shape() != s.shape)
      throw_error<TensorError>("{}: tensor '{}' ({}) has shape {}, expected {}", f.name(), t.name,
                               s.name, shape_str(t.shape()), shape_str(s.shape));
    // The block formats stay as the file holds them (a view of the mapping):
    // the oracle decodes them a block at a time and the packer row by row,
    // so a Q4_1 model costs its file's bytes, not 4 bytes per parameter.
    Tensor x = ggml_block_dtype(t.type) ? f.tensor_view(t) : f.tensor_f32(t);
    if (c.traits.gguf_qk_permuted && s.role == WeightRole::q_proj)
      x = unpermute_qk_rows(x, c.num_heads);
    else if (c.traits.gguf_qk_permuted && s.role == WeightRole::k_proj)
      x = unpermute_qk_rows(x, c.num_kv_heads);
    w.add(s.name, std::move(x));
  }
  w.check_against(c);
  return w;
}

void convert_gguf(const std::filesystem::path& gguf, const std::filesystem::path& out_dir) {
  const GgufFile f = GgufFile::open(gguf);
  ModelConfig c = gguf_config(f);
  c.torch_dtype = "bfloat16";
  const Weights w = gguf_weights(f, c);
  const nlohmann::json tokenizer = gguf_tokenizer_json(f);
  gguf_tokenizer(f);  // refuse to write a tokenizer.json tessera itself cannot load
  std::filesystem::create_directories(out_dir);
  std::vector<SafetensorsWriteEntry> entries;
  std::vector<const Tensor*> sources;
  for (const auto& s : tensor_specs(c)) {
    entries.push_back({s.name, DType::bf16, s.shape});
    sources.push_back(&w.get(s.name));
  }
  size_t wide_index = sources.size();  // the tensor `wide` holds decoded (chunks come in order)
  Tensor wide;
  write_safetensors(out_dir / "model.safetensors", entries,
                    [&](size_t i, uint64_t offset, std::span<std::byte> out) {
                      if (i != wide_index) {
                        wide = sources[i]->to(DType::f32);
                        wide_index = i;
                      }
                      auto src = wide.as<float>().subspan(offset / 2, out.size() / 2);
                      f32_to_bf16(src, {reinterpret_cast<bf16*>(out.data()), src.size()});
                    },
                    {{"format", "pt"}});
  auto write_json = [&](const char* name, const nlohmann::json& j) {
    std::ofstream o(out_dir / name);
    o << j.dump(2) << "\n";
    if (!o) throw_error<FileError>("{}: cannot write", (out_dir / name).string());
  };
  write_json("tokenizer.json", tokenizer);
  write_json("tokenizer_config.json", gguf_tokenizer_config_json(f));
  // Last, so an interrupted conversion never leaves a directory that loads.
  write_json("config.json", config_to_json(c));
}

}  // namespace tessera::model
