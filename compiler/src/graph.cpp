#include "tessera/compiler/graph.h"

#include <charconv>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/model/tensor_table.h"

namespace tessera::compiler {

using kernels::OpShape;
using model::WeightRole;

// Built in place, not through fmt: the passes, the plan checks and the cost
// model name values this way thousands of times per lowering and per decode
// position's retarget.
std::string ValueRef::str() const {
  std::string s;
  s.reserve(name.size() + 16);
  switch (kind) {
    case ValueKind::activation: break;
    case ValueKind::weight: s = "w:"; break;
    case ValueKind::host: s = "host:"; break;
  }
  if (layer >= 0) {
    char digits[16];
    const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, layer);
    s += 'L';
    s.append(digits, end);
    s += '.';
  }
  s += name;
  if (last_row) s += "[-1]";
  return s;
}

std::string shape_text(const OpShape& s) {
  std::string out = s.op;
  for (const auto& [k, v] : s.dims) out += fmt::format(" {}={}", k, v);
  for (const auto& [k, v] : s.attrs) out += fmt::format(" {}={:g}", k, v);
  return out;
}

std::string Graph::dump() const {
  std::string out = fmt::format("graph {} S={} P={} ({} nodes)\n", model, seq, past, nodes.size());
  for (const Node& n : nodes) {
    std::string ins;
    for (const ValueRef& r : n.inputs) ins += (ins.empty() ? "" : ", ") + r.str();
    const std::string where = n.layer >= 0 ? fmt::format("L{}", n.layer) : std::string("M");
    out += fmt::format("{:<4} {:<11} {:<58} ({}) -> {}\n", where, n.name, shape_text(n.shape), ins,
                       n.output.str());
  }
  return out;
}

namespace {

ValueRef act(const std::string& name, int layer) {
  return ValueRef{ValueKind::activation, name, layer, false};
}
ValueRef weight(WeightRole role, int layer) {
  return ValueRef{ValueKind::weight, model::role_name(role), layer, false};
}
ValueRef host(const std::string& name, int layer = -1) {
  return ValueRef{ValueKind::host, name, layer, false};
}

OpShape op(const std::string& name, std::map<std::string, int64_t> dims,
           std::map<std::string, double> attrs = {}) {
  return OpShape{name, std::move(dims), std::move(attrs)};
}

// Appends nodes for one layer (or the model head) to a graph under construction.
class Emitter {
 public:
  Emitter(const model::ModelConfig& c, Graph& g) : c_(c), g_(g) {}

  void add(int layer, std::string name, OpShape shape, std::vector<ValueRef> inputs,
           ValueRef output) {
    g_.nodes.push_back(Node{layer, std::move(name), std::move(shape), std::move(inputs),
                            std::move(output)});
  }

  // A projection y = x W^T, followed by a bias_add node when the model has
  // q/k/v biases: the bias node then produces the tap, the linear an internal value.
  void projection(int l, const std::string& tap, WeightRole w, WeightRole bias, int64_t n,
                  bool with_bias) {
    const int64_t M = g_.seq, H = c_.hidden_size;
    const std::string lin_out = with_bias ? tap + "_pre_bias" : tap;
    add(l, tap, op("linear", {{"M", M}, {"K", H}, {"N", n}}), {act("attn_norm", l), weight(w, l)},
        act(lin_out, l));
    if (with_bias)
      add(l, tap + "_bias", op("bias_add", {{"M", M}, {"N", n}}),
          {act(lin_out, l), weight(bias, l)}, act(tap, l));
  }

  void attention_half(int l, const ValueRef& residual) {
    const int64_t S = g_.seq, P = g_.past, H = c_.hidden_size, D = c_.head_dim;
    const int64_t qd = c_.q_dim(), kvd = c_.kv_dim(), T = P + S;
    const double eps = c_.rms_norm_eps;
    add(l, "attn_norm", op("rmsnorm", {{"M", S}, {"H", H}}, {{"eps", eps}}),
        {residual, weight(WeightRole::attn_norm, l)}, act("attn_norm", l));
    projection(l, "q", WeightRole::q_proj, WeightRole::q_bias, qd, c_.qkv_bias);
    projection(l, "k", WeightRole::k_proj, WeightRole::k_bias, kvd, c_.qkv_bias);
    projection(l, "v", WeightRole::v_proj, WeightRole::v_bias, kvd, c_.qkv_bias);
    std::string q_in = "q", k_in = "k";
    if (c_.qk_norm) {  // per-head RMSNorm over head_dim before RoPE
      add(l, "q_norm",
          op("head_rmsnorm", {{"M", S}, {"heads", c_.num_heads}, {"head_dim", D}}, {{"eps", eps}}),
          {act("q", l), weight(WeightRole::q_norm, l)}, act("q_norm", l));
      add(l, "k_norm",
          op("head_rmsnorm", {{"M", S}, {"heads", c_.num_kv_heads}, {"head_dim", D}},
             {{"eps", eps}}),
          {act("k", l), weight(WeightRole::k_norm, l)}, act("k_norm", l));
      q_in = "q_norm";
      k_in = "k_norm";
    }
    add(l, "q_rot", op("rope", {{"M", S}, {"heads", c_.num_heads}, {"head_dim", D}}),
        {act(q_in, l), host("rope_cos"), host("rope_sin")}, act("q_rot", l));
    add(l, "k_rot", op("rope", {{"M", S}, {"heads", c_.num_kv_heads}, {"head_dim", D}}),
        {act(k_in, l), host("rope_cos"), host("rope_sin")}, act("k_rot", l));
    const auto append = op("kv_append", {{"M", S}, {"T", T}, {"pos", P}, {"kv_dim", kvd}});
    add(l, "k_cache", append, {act("k_rot", l), host("k_cache_in", l)}, act("k_cache", l));
    add(l, "v_cache", append, {act("v", l), host("v_cache_in", l)}, act("v_cache", l));
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const OpShape attn =
        g_.decode() ? op("attention_decode",
                         {{"T", T}, {"heads", c_.num_heads}, {"kv_heads", c_.num_kv_heads},
                          {"head_dim", D}},
                         {{"scale", scale}})
                    : op("attention_prefill",
                         {{"S", S}, {"P", P}, {"heads", c_.num_heads},
                          {"kv_heads", c_.num_kv_heads}, {"head_dim", D}},
                         {{"scale", scale}});
    add(l, "attn_out", attn, {act("q_rot", l), act("k_cache", l), act("v_cache", l)},
        act("attn_out", l));
    add(l, "o", op("linear", {{"M", S}, {"K", qd}, {"N", H}}),
        {act("attn_out", l), weight(WeightRole::o_proj, l)}, act("o", l));
    add(l, "h_mid", op("residual_add", {{"M", S}, {"N", H}}), {residual, act("o", l)},
        act("h_mid", l));
  }

  void mlp_half(int l) {
    const int64_t S = g_.seq, H = c_.hidden_size, I = c_.intermediate_size;
    add(l, "ffn_norm", op("rmsnorm", {{"M", S}, {"H", H}}, {{"eps", c_.rms_norm_eps}}),
        {act("h_mid", l), weight(WeightRole::ffn_norm, l)}, act("ffn_norm", l));
    const auto up = op("linear", {{"M", S}, {"K", H}, {"N", I}});
    add(l, "gate", up, {act("ffn_norm", l), weight(WeightRole::gate_proj, l)}, act("gate", l));
    add(l, "up", up, {act("ffn_norm", l), weight(WeightRole::up_proj, l)}, act("up", l));
    add(l, "act", op("silu_mul", {{"M", S}, {"N", I}}), {act("gate", l), act("up", l)},
        act("act", l));
    add(l, "down", op("linear", {{"M", S}, {"K", I}, {"N", H}}),
        {act("act", l), weight(WeightRole::down_proj, l)}, act("down", l));
    add(l, "h_out", op("residual_add", {{"M", S}, {"N", H}}), {act("h_mid", l), act("down", l)},
        act("h_out", l));
  }

  void head(const ValueRef& residual) {
    const int64_t S = g_.seq, H = c_.hidden_size, V = c_.vocab_size;
    add(-1, "final_norm", op("rmsnorm", {{"M", S}, {"H", H}}, {{"eps", c_.rms_norm_eps}}),
        {residual, weight(WeightRole::final_norm, -1)}, act("final_norm", -1));
    // Generation needs only the last position's logits: one LM-head row.
    ValueRef last = act("final_norm", -1);
    last.last_row = true;
    const WeightRole lm = c_.tie_word_embeddings ? WeightRole::embed_tokens : WeightRole::lm_head;
    add(-1, "logits", op("linear", {{"M", 1}, {"K", H}, {"N", V}}), {last, weight(lm, -1)},
        act("logits", -1));
    add(-1, "next_token", op("argmax", {{"M", 1}, {"V", V}}), {act("logits", -1)},
        act("next_token", -1));
  }

 private:
  const model::ModelConfig& c_;
  Graph& g_;
};

}  // namespace

Graph build_graph(const model::ModelConfig& c, int64_t seq, int64_t past) {
  if (seq < 1) throw_error<UsageError>("{}: a graph needs seq >= 1 tokens, got {}", c.name, seq);
  if (past < 0) throw_error<UsageError>("{}: past length must be >= 0, got {}", c.name, past);
  c.validate();
  Graph g;
  g.model = c.name;
  g.seq = seq;
  g.past = past;
  Emitter e(c, g);
  e.add(-1, "embed", op("embedding", {{"M", seq}, {"V", c.vocab_size}, {"H", c.hidden_size}}),
        {host("token_ids"), weight(WeightRole::embed_tokens, -1)}, act("embed", -1));
  ValueRef residual = act("embed", -1);
  for (int l = 0; l < static_cast<int>(c.num_layers); ++l) {
    e.attention_half(l, residual);
    e.mlp_half(l);
    residual = act("h_out", l);
  }
  e.head(residual);
  return g;
}

std::vector<UniqueOp> unique_ops(const Graph& g) {
  std::vector<UniqueOp> out;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const std::string key = shape_text(g.nodes[i].shape);
    auto [it, fresh] = index.emplace(key, out.size());
    if (fresh) out.push_back(UniqueOp{g.nodes[i].shape, {}});
    out[it->second].nodes.push_back(i);
  }
  return out;
}

std::vector<OpShape> unique_op_shapes(const Graph& g) {
  std::vector<OpShape> out;
  for (auto& u : unique_ops(g)) out.push_back(std::move(u.shape));
  return out;
}

}  // namespace tessera::compiler
