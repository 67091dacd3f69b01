#pragma once
// The model op graph: the ordered list of operator instances (docs/ops.md) one
// forward call of a decoder-only model runs, for S new tokens after P past
// tokens (prefill: S > 1; decode: S = 1, P = context so far). This is the one
// enumeration of "which ops, with which dims" that pipeline phase 1 and the
// compiler share. Nodes are decided by ModelConfig traits (qkv_bias, qk_norm,
// tied embeddings, GQA, head_dim), never by architecture name.
//
// Naming: a node's output is named like the oracle tap it produces (attn_norm,
// q, k, v, q_norm, k_norm, q_rot, k_rot, attn_out, o, h_mid, ffn_norm, gate, up,
// act, down, h_out; final_norm, logits), so any NPU result can be compared to
// the oracle by name. Values that have no tap get names of their own:
//   embed            embedding output, the residual stream entering layer 0
//   q_pre_bias ...   linear output before the Qwen2 bias (node "q", then node
//                    "q_bias" turns it into the tap "q")
//   k_cache, v_cache the layer's KV cache after kv_append (P + S rows)
//   next_token       argmax of the last position's logits
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"

namespace tessera::compiler {

// Where an input comes from.
enum class ValueKind {
  activation,  // output of an earlier node (or a cache before this call, see host)
  weight,      // a model weight, named by model::role_name (q_proj, attn_norm, ...)
  host,        // supplied by the host: token_ids, rope_cos, rope_sin, k_cache_in, v_cache_in
};

struct ValueRef {
  ValueKind kind = ValueKind::activation;
  std::string name;
  int layer = -1;          // -1: model-level (embed, final_norm, logits, weights like lm_head)
  bool last_row = false;   // only the last row of a [rows, width] value (the LM head)
  // Stable text: "L0.attn_norm", "w:L0.q_proj", "host:rope_cos", "final_norm[-1]".
  std::string str() const;
  bool operator==(const ValueRef&) const = default;
};

struct Node {
  int layer = -1;            // -1 for model-level nodes
  std::string name;          // "q", "q_bias", "attn_out", "logits", ...
  kernels::OpShape shape;    // op + dims + attrs exactly as docs/ops.md
  std::vector<ValueRef> inputs;  // in the op's input order (docs/ops.md)
  ValueRef output;           // activation named like the oracle tap where one exists
};

struct Graph {
  std::string model;  // ModelConfig::name
  int64_t seq = 0;    // S: tokens in this call
  int64_t past = 0;   // P: positions already in the KV cache
  std::vector<Node> nodes;

  bool decode() const { return seq == 1; }
  // One line per node: "L0 q_bias  bias_add M=17 N=896  (L0.q_pre_bias, w:L0.q_bias) -> L0.q".
  // Stable (golden tests in tests/data/compiler/).
  std::string dump() const;
};

// Throws UsageError for seq < 1 or past < 0, and ConfigError (c.validate()) for
// an inconsistent config.
Graph build_graph(const model::ModelConfig& c, int64_t seq, int64_t past = 0);

// Stable text of an op instance: "linear K=2048 M=17 N=8192" then attrs
// "rmsnorm H=2048 M=17 eps=1e-05" (dims and attrs in key order, %g for attrs).
std::string shape_text(const kernels::OpShape& s);

// (op, dims, attrs) deduplicated over layers, in first-appearance order, with
// the nodes that share it (the first one is the representative the gate runs).
struct UniqueOp {
  kernels::OpShape shape;
  std::vector<size_t> nodes;  // indices into Graph::nodes
};
std::vector<UniqueOp> unique_ops(const Graph& g);
std::vector<kernels::OpShape> unique_op_shapes(const Graph& g);

}  // namespace tessera::compiler
