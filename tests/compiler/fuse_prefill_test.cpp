// Prefill fusion through the gemm x layout (activation_layout.h kGemmX*): the
// norms write the blocked x their gemms pack, so attn_norm joins q/k/v and
// ffn_norm joins o .. gate / up, with no re-layout inside either dispatch;
// q / k reach rope row-major and silu_mul writes down's x, so a llama layer
// is the published 3 dispatches.
#include <map>
#include <regex>

#include <gtest/gtest.h>

#include "tessera/compiler/passes.h"
#include "tessera/core/error.h"
#include "tessera/kernels/activation_layout.h"
#include "compiler_test_util.h"

namespace tessera::compiler {
namespace {

using testing_util::cache;

Plan prefill(const std::string& preset, std::set<std::string> disabled = {}, int64_t seq = 256) {
  PlanOptions o;
  o.disabled = std::move(disabled);
  return lower(testing_util::small_vocab(preset, 2), seq, 0, cache(), o);
}

// The dispatch of layer 0 holding node `name`.
const Step* step_of(const Plan& p, const std::string& name) {
  for (const Step& s : p.steps)
    for (const Launch& l : s.launches)
      if (l.name == name) return &s;
  return nullptr;
}

TEST(FusePrefill, NormsWriteTheGemmXAndJoinTheirGemms) {
  for (const char* preset : {"llama-3.2-1b"}) {
    SCOPED_TRACE(preset);
    const Plan p = prefill(preset);
    EXPECT_EQ(verify_plan(p), "");
    for (const char* v : {"L0.attn_norm", "L0.ffn_norm"}) {
      const Step* s = step_of(p, v);
      ASSERT_NE(s, nullptr) << v;
      bool gemm_x = false;
      for (const Launch& l : s->launches) gemm_x |= l.name == v && l.tiles.count(kernels::kGemmXM);
      EXPECT_TRUE(gemm_x) << v << " writes its gemm's x";
    }
    EXPECT_EQ(step_of(p, "L0.attn_norm"), step_of(p, "L0.q"));
    EXPECT_EQ(step_of(p, "L0.o"), step_of(p, "L0.gate")) << "o through gate / up is one dispatch";
    // Inside a dispatch nothing is re-laid-out: every inner edge matches.
    const Step* mlp = step_of(p, "L0.o");
    std::map<std::string, std::string> made;
    for (const Launch& l : mlp->launches) {
      const Node& n = p.graph.nodes.at(l.node);
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        auto it = made.find(n.inputs[k].str());
        if (it == made.end()) continue;
        EXPECT_TRUE(layouts_match(it->second, l.in_layouts.at(k))) << l.name;
      }
      made[l.name] = l.out_layout;
    }
    const Plan off = prefill(preset, {"align-layouts"});
    EXPECT_LT(p.dispatches_per_layer(), off.dispatches_per_layer());
    EXPECT_LT(p.predicted_seconds(), off.predicted_seconds());
  }
}

// The published prefill layer (reference/mlir-air-structure.md): rms + q/k/v
// + rope (the gemms' row-major y is the row-major rope's input), attention,
// then o + residual + rms + gate / up + silu_mul + down + residual (silu_mul
// writes the down gemm's blocked x in blocks that tile its row groups).
// Without align-layouts the same plan takes more dispatches and more time.
TEST(FusePrefill, LlamaLayerIsThreeDispatches) {
  const Plan p = prefill("llama-3.2-1b");
  EXPECT_EQ(p.dispatches_per_layer(), 3);
  EXPECT_EQ(step_of(p, "L0.attn_norm"), step_of(p, "L0.k_rot"));
  EXPECT_EQ(step_of(p, "L0.o"), step_of(p, "L0.h_out"));
  for (const Launch& l : step_of(p, "L0.attn_norm")->launches)
    if (l.shape.op == "rope") {
      EXPECT_TRUE(l.tiles.count(kernels::kRowMajorTile)) << l.name;
    }
  for (const Launch& l : step_of(p, "L0.o")->launches)
    if (l.shape.op == "silu_mul") {
      EXPECT_TRUE(l.tiles.count(kernels::kGemmXM)) << l.name;
    }
  const Plan off = prefill("llama-3.2-1b", {"align-layouts"});
  EXPECT_GT(off.dispatches_per_layer(), 3);
  EXPECT_LT(p.predicted_seconds(), off.predicted_seconds());
}

// The prefill layout policy keeps whole K blocks (llama's K = 2048 and 8192
// under a builder block of 80), so a row-wise producer can write the x.
TEST(FusePrefill, PrefillKBlocksDivideK) {
  for (int64_t K : {2048, 8192}) {
    const kernels::OpShape s{"linear", {{"M", 2048}, {"K", K}, {"N", 2048}}, {}};
    const kernels::TileOptions t = layout_tiles(s, cache().spec());
    EXPECT_EQ(K % t.at("k"), 0) << "K=" << K << " k=" << t.at("k");
  }
}

// The prefill layout policy's N block tiles N over the columns where a block
// of at least half the builder's n does (Qwen2.5's hidden 896 = 8 x 2 x 56,
// intermediate 4864 = 8 x 19 x 32), since a row-major y refuses padded N
// blocks; and k depends on K alone, so q / k / v (N = 896 and 128) read one
// blocked x that attn_norm can write. llama's n = 64 stays as it was.
TEST(FusePrefill, PrefillNBlocksTileNAndKBlocksFollowK) {
  const npu::DeviceSpec& spec = cache().spec();
  auto tiles = [&](int64_t K, int64_t N) {
    return layout_tiles({"linear", {{"M", 2048}, {"K", K}, {"N", N}}, {}}, spec);
  };
  for (const auto& [K, N] : std::vector<std::pair<int64_t, int64_t>>{{896, 896}, {896, 4864}, {4864, 896}}) {
    const kernels::TileOptions t = tiles(K, N);
    EXPECT_EQ(N % (spec.columns * t.at("n")), 0) << "K=" << K << " N=" << N << " n=" << t.at("n");
  }
  EXPECT_EQ(tiles(896, 128).at("k"), tiles(896, 896).at("k"));
  EXPECT_EQ(tiles(2048, 8192).at("n"), 64);
  EXPECT_EQ(tiles(2048, 512).at("n"), 64);
}

// Qwen2.5 (hidden 896, q/k/v bias, intermediate 4864): the N blocks that
// tile N let every projection write row-major, so attn_norm .. k_rot (with
// the biases) is one dispatch; silu_mul's objects of whole rows (4864 is no
// multiple of its flat 512) write down's blocked x, so o .. h_out is one
// more: llama's 3 per layer, 9 before.
TEST(FusePrefill, Qwen25LayerIsThreeDispatches) {
  const Plan p = prefill("qwen2.5-0.5b", {}, 2048);
  EXPECT_EQ(verify_plan(p), "");
  EXPECT_EQ(p.dispatches_per_layer(), 3);
  EXPECT_EQ(step_of(p, "L0.attn_norm"), step_of(p, "L0.k_rot"));
  EXPECT_EQ(step_of(p, "L0.q"), step_of(p, "L0.k_rot")) << "the q bias joins its gemm";
  EXPECT_EQ(step_of(p, "L0.o"), step_of(p, "L0.h_out"));
  for (const Launch& l : step_of(p, "L0.o")->launches)
    if (l.shape.op == "silu_mul") {
      EXPECT_TRUE(l.tiles.count(kernels::kGemmXM)) << l.name;
    }
  const Plan off = prefill("qwen2.5-0.5b", {"align-layouts"}, 2048);
  EXPECT_GT(off.dispatches_per_layer(), 3);
  EXPECT_LT(p.predicted_seconds(), off.predicted_seconds());
}

// Planted: the plan text keeps ffn_norm's blocked-x output layout but loses
// the tile options that build it; the parser rebuilds the norm, finds it
// writes another layout than the one recorded, and refuses the plan.
TEST(FusePrefill, AGemmXLayoutWithoutItsDesignIsRefused) {
  const Plan p = prefill("llama-3.2-1b");
  size_t node = 0;
  while (p.graph.nodes.at(node).output.str() != "L0.ffn_norm") ++node;
  const std::string text = p.dump();
  ASSERT_NO_THROW(parse_plan(text, cache()));
  const std::string line = "    n" + std::to_string(node) + " tiles=";
  const size_t at = text.find(line);
  ASSERT_NE(at, std::string::npos);
  const size_t end = text.find('\n', at);
  std::string bad_line = text.substr(at, end - at);
  bad_line = std::regex_replace(bad_line, std::regex("gemm_x_[a-z]+=[0-9]+,?"), "");
  ASSERT_NE(bad_line, text.substr(at, end - at)) << "ffn_norm carries no gemm x tiles";
  std::string bad = text;
  bad.replace(at, end - at, bad_line);
  EXPECT_THROW(parse_plan(bad, cache()), InputError);
}

}  // namespace
}  // namespace tessera::compiler
