// The model op graph: node sets decided by traits, wiring (every input produced
// earlier), weight shapes matching the op dims, tap names matching the oracle,
// deduplication over layers, and golden text dumps.
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tessera/compiler/graph.h"
#include "tessera/core/error.h"
#include "tessera/model/tensor_table.h"
#include "tessera/oracle/taps.h"
#include "compiler_test_util.h"

namespace tessera::compiler {
namespace {

using testing_util::with_layers;

std::vector<std::string> names_of_layer(const Graph& g, int layer) {
  std::vector<std::string> out;
  for (const Node& n : g.nodes)
    if (n.layer == layer) out.push_back(n.name);
  return out;
}

TEST(Graph, LlamaLayerNodesInForwardOrder) {
  const Graph g = build_graph(with_layers("llama-3.2-1b", 2), 17);
  const std::vector<std::string> want = {"attn_norm", "q",     "k",      "v",       "q_rot",
                                         "k_rot",     "k_cache", "v_cache", "attn_out", "o",
                                         "h_mid",     "ffn_norm", "gate",  "up",      "act",
                                         "down",      "h_out"};
  EXPECT_EQ(names_of_layer(g, 0), want);
  EXPECT_EQ(names_of_layer(g, 1), want);
  EXPECT_EQ(names_of_layer(g, -1),
            (std::vector<std::string>{"embed", "final_norm", "logits", "next_token"}));
}

TEST(Graph, TraitsDecideBiasAndQkNormNodes) {
  const Graph qwen2 = build_graph(with_layers("qwen2.5-0.5b", 1), 5);
  const auto n2 = names_of_layer(qwen2, 0);
  EXPECT_EQ(std::vector<std::string>(n2.begin(), n2.begin() + 7),
            (std::vector<std::string>{"attn_norm", "q", "q_bias", "k", "k_bias", "v", "v_bias"}));
  const Graph qwen3 = build_graph(with_layers("qwen3-0.6b", 1), 5);
  const auto n3 = names_of_layer(qwen3, 0);
  EXPECT_EQ(std::vector<std::string>(n3.begin() + 4, n3.begin() + 8),
            (std::vector<std::string>{"q_norm", "k_norm", "q_rot", "k_rot"}));
  // A trait flipped on a llama config adds the nodes: no architecture switch.
  model::ModelConfig c = with_layers("llama-3.2-1b", 1);
  c.qkv_bias = true;
  const auto nb = names_of_layer(build_graph(c, 3), 0);
  EXPECT_EQ(nb[2], "q_bias");
  c.qkv_bias = false;
  c.qk_norm = true;
  const auto nq = names_of_layer(build_graph(c, 3), 0);
  EXPECT_EQ(nq[4], "q_norm");
}

// The bias node, not the linear, produces the tap "q" on a bias model.
TEST(Graph, BiasNodeProducesTheTap) {
  const Graph g = build_graph(with_layers("qwen2.5-0.5b", 1), 5);
  for (const Node& n : g.nodes) {
    if (n.name == "q") {
      EXPECT_EQ(n.output.str(), "L0.q_pre_bias");
    }
    if (n.name == "q_bias") {
      EXPECT_EQ(n.output.str(), "L0.q");
      EXPECT_EQ(n.inputs.at(0).str(), "L0.q_pre_bias");
      EXPECT_EQ(n.inputs.at(1).str(), "w:L0.q_bias");
    }
  }
}

// Each oracle tap is produced exactly once per layer (q_norm/k_norm only with qk_norm).
TEST(Graph, OutputsCoverEveryOracleTap) {
  for (const std::string& p : model::preset_names()) {
    const model::ModelConfig c = with_layers(p, 2);
    const Graph g = build_graph(c, 4);
    std::map<std::pair<int, std::string>, int> produced;
    for (const Node& n : g.nodes) ++produced[{n.output.layer, n.output.name}];
    for (int l = 0; l < 2; ++l)
      for (const std::string& tap : oracle::layer_tap_names()) {
        const bool expected = c.qk_norm || (tap != "q_norm" && tap != "k_norm");
        EXPECT_EQ(produced[std::make_pair(l, tap)], expected ? 1 : 0) << p << " L" << l << " " << tap;
      }
    for (const std::string& tap : oracle::model_tap_names())
      EXPECT_EQ(produced[std::make_pair(oracle::kModelLayer, tap)], 1) << p << " " << tap;
  }
}

// Wiring and dims: every activation input was produced earlier, every weight
// exists in the tensor table with the shape the op dims imply.
TEST(Graph, InputsProducedEarlierAndWeightsMatchDims) {
  for (const std::string& p : model::preset_names()) {
    const model::ModelConfig c = with_layers(p, 2);
    std::map<std::pair<int, std::string>, Shape> weights;
    for (const auto& s : model::tensor_specs(c)) weights[{s.layer, model::role_name(s.role)}] = s.shape;
    for (int64_t seq : {1, 17}) {
      const Graph g = build_graph(c, seq, seq == 1 ? 9 : 0);
      std::set<std::pair<int, std::string>> seen;
      for (const Node& n : g.nodes) {
        for (const ValueRef& r : n.inputs) {
          if (r.kind == ValueKind::activation) {
            EXPECT_TRUE(seen.count({r.layer, r.name})) << p << " " << n.name << " reads " << r.str();
          }
          if (r.kind != ValueKind::weight) continue;
          auto it = weights.find({r.layer, r.name});
          ASSERT_NE(it, weights.end()) << p << " " << n.name << " weight " << r.str();
          const Shape& w = it->second;
          if (n.shape.op == "linear") {
            EXPECT_EQ(w, (Shape{n.shape.dims.at("N"), n.shape.dims.at("K")})) << p << " " << n.name;
          } else if (n.shape.op == "rmsnorm") {
            EXPECT_EQ(w, Shape{n.shape.dims.at("H")}) << p << " " << n.name;
          } else if (n.shape.op == "head_rmsnorm") {
            EXPECT_EQ(w, Shape{n.shape.dims.at("head_dim")}) << p << " " << n.name;
          } else if (n.shape.op == "bias_add") {
            EXPECT_EQ(w, Shape{n.shape.dims.at("N")}) << p << " " << n.name;
          } else if (n.shape.op == "embedding") {
            EXPECT_EQ(w, (Shape{n.shape.dims.at("V"), n.shape.dims.at("H")})) << p;
          } else {
            ADD_FAILURE() << p << " " << n.name << " has an unexpected weight " << r.str();
          }
        }
        seen.insert({n.output.layer, n.output.name});
      }
    }
  }
}

TEST(Graph, DecodeUsesDecodeAttentionOverTheWholeContext) {
  const Graph g = build_graph(with_layers("smollm2-135m", 1), 1, 40);
  bool found = false;
  for (const Node& n : g.nodes) {
    if (n.name == "attn_out") {
      found = true;
      EXPECT_EQ(shape_text(n.shape),
                "attention_decode T=41 head_dim=64 heads=9 kv_heads=3 scale=0.125");
    }
    if (n.name == "k_cache") {
      EXPECT_EQ(shape_text(n.shape), "kv_append M=1 T=41 kv_dim=192 pos=40");
    }
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(g.decode());
}

TEST(Graph, UniqueShapesDedupeOverLayers) {
  const Graph g = build_graph(model::preset("llama-3.2-1b"), 17);
  EXPECT_EQ(g.nodes.size(), 4u + 16u * 17u);
  const auto u = unique_ops(g);
  // embedding, rmsnorm, linear q/o, linear k/v, rope q, rope k, kv_append,
  // attention, residual_add, linear gate/up, silu_mul, linear down, lm head, argmax.
  ASSERT_EQ(u.size(), 14u);
  size_t total = 0;
  for (const auto& op : u) total += op.nodes.size();
  EXPECT_EQ(total, g.nodes.size());
  std::set<std::string> keys;
  for (const auto& s : unique_op_shapes(g)) keys.insert(shape_text(s));
  EXPECT_EQ(keys.size(), u.size());
  EXPECT_TRUE(keys.count("linear K=2048 M=17 N=512"));
  EXPECT_TRUE(keys.count("linear K=2048 M=1 N=128256"));
  EXPECT_TRUE(keys.count("rmsnorm H=2048 M=17 eps=1e-05"));
  // The representative of a per-layer op is its layer-0 node.
  for (const auto& op : u) EXPECT_LE(g.nodes[op.nodes.front()].layer, 0);
}

TEST(Graph, RejectsBadLengths) {
  const auto c = model::preset("tiny");
  EXPECT_THROW(build_graph(c, 0), UsageError);
  EXPECT_THROW(build_graph(c, 4, -1), UsageError);
  model::ModelConfig bad = c;
  bad.num_kv_heads = 3;  // 4 heads do not split into 3 groups
  EXPECT_THROW(build_graph(bad, 4), ConfigError);
}

// Golden dumps; regenerate with TESSERA_UPDATE_GOLDEN=1 after an intended change.
void check_golden(const Graph& g, const std::string& file) {
  const std::string path = std::string(TESSERA_TEST_DATA) + "/compiler/" + file;
  if (std::getenv("TESSERA_UPDATE_GOLDEN")) {
    std::ofstream(path) << g.dump();
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden file " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(g.dump(), ss.str()) << "graph dump differs from " << path;
}

TEST(Graph, GoldenLlamaPrefill) {
  check_golden(build_graph(with_layers("llama-3.2-1b", 2), 17), "llama-3.2-1b_L2_S17.txt");
}
TEST(Graph, GoldenQwen2Decode) {
  check_golden(build_graph(with_layers("qwen2.5-0.5b", 2), 1, 17), "qwen2.5-0.5b_L2_S1_P17.txt");
}
TEST(Graph, GoldenQwen3Prefill) {
  check_golden(build_graph(with_layers("qwen3-0.6b", 1), 33, 8), "qwen3-0.6b_L1_S33_P8.txt");
}

}  // namespace
}  // namespace tessera::compiler
