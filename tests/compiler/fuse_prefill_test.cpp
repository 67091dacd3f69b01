// Prefill fusion through the gemm x layout (activation_layout.h kGemmX*): the
// norms write the blocked x their gemms pack, so attn_norm joins q/k/v and
// ffn_norm joins o .. gate / up, with no re-layout inside either dispatch.
// (act -> down stays a dispatch boundary on llama: the timing model charges
// silu_mul's short blocked runs more than the re-layout they save.)
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

Plan prefill(const std::string& preset, std::set<std::string> disabled = {}) {
  PlanOptions o;
  o.disabled = std::move(disabled);
  return lower(testing_util::small_vocab(preset, 2), 256, 0, cache(), o);
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
