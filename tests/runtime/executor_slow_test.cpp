// Executor results against the oracle's taps and across plan styles and
// layouts, end to end on the tiny presets: numerical agreement, more than
// 10 s each under ASan, so labelled slow (the optimized build runs them; the
// executor's own memory handling stays in executor_test.cpp's sanitizer run).
#include "tessera/runtime/executor.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime_fixture.h"
#include "tessera/kernels/activation_layout.h"
#include "tessera/oracle/taps.h"

namespace tessera::runtime {
namespace {

using compiler::Plan;
using compiler::PlanStyle;
using compiler::ValueKind;
using compiler::ValueRef;
using testing::TinyModel;
using testing::host_inputs;
using testing::kU;

// Longest chain of bf16 kernel boundaries from the inputs to each value.
std::map<std::string, int> boundary_depth(const Plan& plan) {
  std::map<std::string, int> depth;
  for (const auto& n : plan.graph.nodes) {
    int d = 0;
    for (const ValueRef& r : n.inputs) {
      ValueRef whole = r;
      whole.last_row = false;
      auto it = depth.find(whole.str());
      if (it != depth.end()) d = std::max(d, it->second);
    }
    depth[n.output.str()] = d + 1;
  }
  return depth;
}

class ExecutorPreset : public ::testing::TestWithParam<std::string> {};

// Every value the NPU plan computes that the oracle taps agrees with the tap.
// The NPU rounds to bf16 (RNE, |delta| <= u = 2^-8 relative) at each kernel
// boundary: a kernel's two operands and its output, so <= 3u per boundary;
// fp32 inside. Roundings at different boundaries are independent, so along a
// chain of d boundaries they add in quadrature: a normwise bound (max |err| /
// max |ref|) of 3 u sqrt(d). rmsnorm renormalises and softmax is a convex
// combination, so nothing amplifies an error by more than O(1) in these small
// random models. Measured: 0.5u at depth 2 .. 3.3u at depth 48 (tiny), i.e.
// 7-9x below the bound; a planted RoPE-position bug gives > 100u.
TEST_P(ExecutorPreset, TapsMatchOracleForFiveTokenPrompt) {
  const TinyModel& m = testing::tiny(GetParam());
  const auto tokens = testing::prompt_tokens(5, m.config.vocab_size);
  const Plan plan = testing::lower_plan(m, 5, 0);
  Executor exec(m.spec, *m.packed);
  const ExecResult res = exec.run(plan, host_inputs(m, tokens, 0));

  const oracle::Oracle orc(m.config, m.weights);
  oracle::KvCache cache = orc.new_cache();
  oracle::Taps taps;
  const oracle::TapSet all = oracle::TapSet::all();
  orc.forward(tokens, cache, {oracle::LogitsMode::last, &all, &taps});

  const auto depth = boundary_depth(plan);
  int compared = 0;
  for (const auto& n : plan.graph.nodes) {
    const ValueRef& o = n.output;
    if (!taps.contains(o.layer, o.name)) continue;
    const auto ref = testing::tensor_values(taps.get(o.layer, o.name));
    const auto d = testing::diff(ref, res.values.at(o.str()));
    const double bound = 3 * kU * std::sqrt(static_cast<double>(depth.at(o.str())));
    EXPECT_GT(d.cosine, 0.999) << o.str();
    EXPECT_LT(d.max_rel, bound) << o.str() << " depth " << depth.at(o.str());
    ++compared;
  }
  // Every per-layer tap + final_norm + logits.
  EXPECT_GE(compared, 15 * m.config.num_layers + 2);
  EXPECT_GT(res.predicted_seconds, 0);
  EXPECT_EQ(res.steps.size(), plan.steps.size());
  EXPECT_NEAR(res.predicted_seconds, plan.predicted_seconds(), 1e-12);
}

// The per-op style runs embedding, kv_append and argmax on the NPU, the
// default style on the host: same inputs, so every value must be identical
// bit for bit (the host ops are exact copies / comparisons of bf16 values,
// and every other step is the same design in both styles).
TEST_P(ExecutorPreset, StylesAgreeBitwisePrefillAndDecode) {
  const TinyModel& m = testing::tiny(GetParam());
  const auto tokens = testing::prompt_tokens(5, m.config.vocab_size, 1);
  Executor exec(m.spec, *m.packed);
  std::map<PlanStyle, ExecResult> prefill, decode;
  for (PlanStyle s : {PlanStyle::standard, PlanStyle::per_op}) {
    const Plan p = testing::lower_plan(m, 5, 0, s);
    prefill[s] = exec.run(p, host_inputs(m, tokens, 0));
  }
  // Decode at P = 5 from the prefill's cache.
  std::vector<std::vector<float>> k, v;
  for (int l = 0; l < m.config.num_layers; ++l) {
    k.push_back(prefill[PlanStyle::standard].values.at(ValueRef{ValueKind::activation, "k_cache", l, false}.str()));
    v.push_back(prefill[PlanStyle::standard].values.at(ValueRef{ValueKind::activation, "v_cache", l, false}.str()));
  }
  const int32_t next = static_cast<int32_t>(prefill[PlanStyle::standard].values.at("next_token")[0]);
  for (PlanStyle s : {PlanStyle::standard, PlanStyle::per_op}) {
    const Plan p = testing::lower_plan(m, 1, 5, s);
    decode[s] = exec.run(p, host_inputs(m, {next}, 5, k, v));
  }
  for (auto* runs : {&prefill, &decode}) {
    const Values& a = (*runs)[PlanStyle::standard].values;
    const Values& b = (*runs)[PlanStyle::per_op].values;
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, values] : a) {
      ASSERT_TRUE(b.count(name)) << name;
      EXPECT_TRUE(values == b.at(name)) << name << " differs between the styles";
    }
  }
  // The default style really ran those ops on the host.
  int host_steps = 0;
  for (const auto& r : prefill[PlanStyle::standard].steps) host_steps += r.npu ? 0 : 1;
  EXPECT_EQ(host_steps, 2 * m.config.num_layers + 2);
  for (const auto& r : prefill[PlanStyle::per_op].steps) EXPECT_TRUE(r.npu) << r.name;
}

INSTANTIATE_TEST_SUITE_P(Tiny, ExecutorPreset, ::testing::Values("tiny", "tiny-qwen3"));

// Row-major hand-offs (align-layouts) change where the bytes live, not what
// is computed: with re-layout priced out of reach every builder that can goes
// row-major (the gemm's y too), the executor passes those bytes on as they
// are, and every value equals the blocked plan's bit for bit.
TEST(Executor, RowMajorHandOffsAgreeBitwiseWithBlocked) {
  const TinyModel& m = testing::tiny("tiny-qwen3");
  const int64_t S = 64;  // gemm linears, whole steps of rows
  const auto tokens = testing::prompt_tokens(S, m.config.vocab_size, 2);
  compiler::PlanOptions o;
  o.disabled = {"align-layouts"};
  const Plan blocked = compiler::lower(m.config, S, 0, *m.cache, o);
  o.disabled = {};
  o.host.bytes_per_second = 1e6;
  const Plan aligned = compiler::lower(m.config, S, 0, *m.cache, o);
  std::set<std::string> rowmajor_ops;
  for (const auto& s : aligned.steps)
    for (const auto& l : s.launches)
      for (const char* key : {kernels::kRowMajorTile, kernels::kRowMajorOutTile})
        if (l.tiles.count(key)) rowmajor_ops.insert(l.shape.op);
  EXPECT_TRUE(rowmajor_ops.count("linear") && rowmajor_ops.count("rmsnorm") &&
              rowmajor_ops.count("residual_add"));
  Executor exec(m.spec, *m.packed);
  const ExecResult a = exec.run(blocked, host_inputs(m, tokens, 0));
  const ExecResult b = exec.run(aligned, host_inputs(m, tokens, 0));
  ASSERT_EQ(a.values.size(), b.values.size());
  for (const auto& [name, values] : a.values) {
    ASSERT_TRUE(b.values.count(name)) << name;
    EXPECT_TRUE(values == b.values.at(name)) << name << " differs in the row-major plan";
  }
}

}  // namespace
}  // namespace tessera::runtime
