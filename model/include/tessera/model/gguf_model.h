#pragma once
// A GGUF file as a tessera model: metadata -> ModelConfig, llama.cpp tensor
// names -> the tensor table (dequantized to F32, q/k rows restored to HF's
// layout), tokenizer.ggml.* -> a tokenizer.json, and conversion to a Hugging
// Face model directory. Everything that differs between architectures comes
// from ArchTraits (arch_traits.cpp) and the tensor table (tensor_table.cpp).
#include <filesystem>

#include <nlohmann/json_fwd.hpp>

#include "tessera/model/config.h"
#include "tessera/model/gguf.h"
#include "tessera/model/tokenizer.h"
#include "tessera/model/weights.h"

namespace tessera::model {

// True for a regular file that starts with the GGUF magic.
bool is_gguf_file(const std::filesystem::path& p);

// `{arch}.*` keys of general.architecture (llama, qwen2, qwen3). ConfigError /
// UnsupportedError / GgufError name the file and the key.
ModelConfig gguf_config(const GgufFile& f);
// Every tensor of tensor_specs(c), dequantized to F32; a file tensor that maps
// to no spec is a TensorError naming it.
Weights gguf_weights(const GgufFile& f, const ModelConfig& c);

// Reverses llama.cpp's q/k row permutation for one [n_head * head_dim, cols]
// matrix (rotary pairs (i, i + head_dim/2) stored interleaved as (2i, 2i+1)).
Tensor unpermute_qk_rows(const Tensor& t, int64_t n_head);

// tokenizer.json equivalent of tokenizer.ggml.* (gpt2 BPE only), and the
// tokenizer_config.json fields (chat_template, special tokens, add_bos_token).
nlohmann::json gguf_tokenizer_json(const GgufFile& f);
nlohmann::json gguf_tokenizer_config_json(const GgufFile& f);
Tokenizer gguf_tokenizer(const GgufFile& f);

// Writes config.json, tokenizer.json, tokenizer_config.json and
// model.safetensors (bf16, RNE) into out_dir (created if missing).
void convert_gguf(const std::filesystem::path& gguf, const std::filesystem::path& out_dir);

}  // namespace tessera::model
