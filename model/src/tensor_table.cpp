// The single place that spells HF tensor names and shapes (STYLE.md #1, #2).
#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/model/config.h"
#include "tessera/model/tensor_table.h"

namespace tessera::model {
namespace {

struct RoleRow {
  WeightRole role;
  const char* name;    // role_name()
  const char* suffix;  // HF name after "model.layers.N." (layer roles) or full name
  bool per_layer;
  const char* gguf;    // llama.cpp name after "blk.N." (layer roles) or full name
};

// In HF state-dict order; per-layer rows in the order transformers registers them.
constexpr RoleRow kRoles[] = {
    {WeightRole::embed_tokens, "embed_tokens", "model.embed_tokens.weight", false, "token_embd.weight"},
    {WeightRole::attn_norm, "attn_norm", "input_layernorm.weight", true, "attn_norm.weight"},
    {WeightRole::q_proj, "q_proj", "self_attn.q_proj.weight", true, "attn_q.weight"},
    {WeightRole::q_bias, "q_bias", "self_attn.q_proj.bias", true, "attn_q.bias"},
    {WeightRole::k_proj, "k_proj", "self_attn.k_proj.weight", true, "attn_k.weight"},
    {WeightRole::k_bias, "k_bias", "self_attn.k_proj.bias", true, "attn_k.bias"},
    {WeightRole::v_proj, "v_proj", "self_attn.v_proj.weight", true, "attn_v.weight"},
    {WeightRole::v_bias, "v_bias", "self_attn.v_proj.bias", true, "attn_v.bias"},
    {WeightRole::o_proj, "o_proj", "self_attn.o_proj.weight", true, "attn_output.weight"},
    {WeightRole::q_norm, "q_norm", "self_attn.q_norm.weight", true, "attn_q_norm.weight"},
    {WeightRole::k_norm, "k_norm", "self_attn.k_norm.weight", true, "attn_k_norm.weight"},
    {WeightRole::ffn_norm, "ffn_norm", "post_attention_layernorm.weight", true, "ffn_norm.weight"},
    {WeightRole::gate_proj, "gate_proj", "mlp.gate_proj.weight", true, "ffn_gate.weight"},
    {WeightRole::up_proj, "up_proj", "mlp.up_proj.weight", true, "ffn_up.weight"},
    {WeightRole::down_proj, "down_proj", "mlp.down_proj.weight", true, "ffn_down.weight"},
    {WeightRole::final_norm, "final_norm", "model.norm.weight", false, "output_norm.weight"},
    {WeightRole::lm_head, "lm_head", "lm_head.weight", false, "output.weight"},
};

const RoleRow& row(WeightRole r) {
  for (const auto& x : kRoles)
    if (x.role == r) return x;
  throw_error<InternalError>("unknown weight role {}", static_cast<int>(r));
}

// Whether c has a tensor of this role (lm_head: only when untied).
bool present(const ModelConfig& c, WeightRole r) {
  switch (r) {
    case WeightRole::q_bias:
    case WeightRole::k_bias:
    case WeightRole::v_bias: return c.qkv_bias;
    case WeightRole::q_norm:
    case WeightRole::k_norm: return c.qk_norm;
    case WeightRole::lm_head: return !c.tie_word_embeddings;
    default: return true;
  }
}

Shape shape_of(const ModelConfig& c, WeightRole r) {
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  switch (r) {
    case WeightRole::embed_tokens:
    case WeightRole::lm_head: return {c.vocab_size, h};
    case WeightRole::attn_norm:
    case WeightRole::ffn_norm:
    case WeightRole::final_norm: return {h};
    case WeightRole::q_proj: return {c.q_dim(), h};
    case WeightRole::k_proj:
    case WeightRole::v_proj: return {c.kv_dim(), h};
    case WeightRole::q_bias: return {c.q_dim()};
    case WeightRole::k_bias:
    case WeightRole::v_bias: return {c.kv_dim()};
    case WeightRole::q_norm:
    case WeightRole::k_norm: return {c.head_dim};
    case WeightRole::o_proj: return {h, c.q_dim()};
    case WeightRole::gate_proj:
    case WeightRole::up_proj: return {f, h};
    case WeightRole::down_proj: return {h, f};
  }
  throw_error<InternalError>("unknown weight role {}", static_cast<int>(r));
}

std::string full_name(const RoleRow& x, int layer) {
  return x.per_layer ? fmt::format("model.layers.{}.{}", layer, x.suffix) : x.suffix;
}

std::string full_gguf_name(const RoleRow& x, int layer) {
  return x.per_layer ? fmt::format("blk.{}.{}", layer, x.gguf) : x.gguf;
}

}  // namespace

const char* role_name(WeightRole r) { return row(r).name; }

std::string gguf_tensor_name(const TensorSpec& s) { return full_gguf_name(row(s.role), s.layer); }

std::vector<TensorSpec> tensor_specs(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  auto add = [&](const RoleRow& x, int layer) {
    if (present(c, x.role)) out.push_back({full_name(x, layer), x.role, layer, shape_of(c, x.role)});
  };
  for (const auto& x : kRoles)
    if (!x.per_layer && x.role == WeightRole::embed_tokens) add(x, -1);
  for (int l = 0; l < c.num_layers; ++l)
    for (const auto& x : kRoles)
      if (x.per_layer) add(x, l);
  for (const auto& x : kRoles)
    if (!x.per_layer && x.role != WeightRole::embed_tokens) add(x, -1);
  return out;
}

// A tied LM head *is* the embedding matrix, so asking for lm_head resolves to
// it: callers need no tie_word_embeddings branch of their own.
std::string tensor_name(const ModelConfig& c, WeightRole role, int layer) {
  if (role == WeightRole::lm_head && c.tie_word_embeddings)
    return row(WeightRole::embed_tokens).suffix;
  const RoleRow& x = row(role);
  if (!present(c, role))
    throw_error<InternalError>("{} has no {} tensor (qkv_bias={}, qk_norm={})", c.name, x.name,
                               c.qkv_bias, c.qk_norm);
  if (x.per_layer && (layer < 0 || layer >= c.num_layers))
    throw_error<InternalError>("{}: layer {} of {} out of range for {}", c.name, layer,
                               c.num_layers, x.name);
  if (!x.per_layer && layer != -1)
    throw_error<InternalError>("{}: {} is not a per-layer tensor (layer {})", c.name, x.name,
                               layer);
  return full_name(x, layer);
}

int64_t ModelConfig::parameter_count() const {
  int64_t n = 0;
  for (const auto& s : tensor_specs(*this)) n += shape_numel(s.shape);
  return n;
}

}  // namespace tessera::model
