#pragma once
// One record per weight tensor (gemma.cpp tensor_info style): the single place
// that knows HF tensor names and shapes. Loading, conversion, synthesis and
// comparison all iterate this table instead of spelling names themselves.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/model/config.h"

namespace tessera::model {

// What a tensor is, independent of its HF name.
enum class WeightRole {
  embed_tokens,  // (vocab, hidden)
  attn_norm,     // (hidden)               input_layernorm
  q_proj,        // (q_dim, hidden)
  k_proj,        // (kv_dim, hidden)
  v_proj,        // (kv_dim, hidden)
  q_bias,        // (q_dim)                Qwen2
  k_bias,        // (kv_dim)
  v_bias,        // (kv_dim)
  q_norm,        // (head_dim)             Qwen3
  k_norm,        // (head_dim)
  o_proj,        // (hidden, q_dim)
  ffn_norm,      // (hidden)               post_attention_layernorm
  gate_proj,     // (intermediate, hidden)
  up_proj,       // (intermediate, hidden)
  down_proj,     // (hidden, intermediate)
  final_norm,    // (hidden)
  lm_head,       // (vocab, hidden)        absent when embeddings are tied
};

struct TensorSpec {
  std::string name;  // HF name, e.g. "model.layers.3.self_attn.q_proj.weight"
  WeightRole role;
  int layer = -1;    // -1 for non-layer tensors
  Shape shape;
};

const char* role_name(WeightRole r);  // "q_proj", ...
std::vector<TensorSpec> tensor_specs(const ModelConfig& c);
// llama.cpp's name for the same tensor in a GGUF file ("blk.3.attn_q.weight").
std::string gguf_tensor_name(const TensorSpec& s);
// Name of one tensor (throws InternalError if the role does not exist in c).
std::string tensor_name(const ModelConfig& c, WeightRole role, int layer = -1);

}  // namespace tessera::model
