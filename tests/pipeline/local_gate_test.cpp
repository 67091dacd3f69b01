// Local (conditional) gates (local_gate.h, issue 12): an op whose input carries
// a large shared error (3 % on every element, as upstream drift along a path
// does) passes, although the same output compared end to end with the oracle
// breaks the statistics; a RoPE fed a truncated table (the planted
// session_rope_truncate bug: a bias of half a bf16 ulp in cos / sin) fails;
// a node whose input the run did not keep is not judged.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline_test_util.h"
#include "tessera/compiler/graph.h"
#include "tessera/core/bf16.h"
#include "tessera/core/mutants.h"
#include "tessera/oracle/rope.h"
#include "tessera/pipeline/local_gate.h"
#include "tessera/pipeline/reference_ops.h"

namespace tessera::pipeline {
namespace {

using compiler::ValueKind;
using compiler::ValueRef;

constexpr int64_t kS = 16, kH = 8, kD = 64;

std::vector<float> gaussian(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  test_util::Gauss4 gauss(seed);
  for (float& x : v) x = static_cast<float>(gauss());
  return v;
}

oracle::RopeTable table() {
  std::vector<float> inv(kD / 2);
  for (int64_t i = 0; i < kD / 2; ++i)
    inv[static_cast<size_t>(i)] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / kD));
  return oracle::rope_table(inv, 0, kS);
}

kernels::OpShape rope_shape() { return {"rope", {{"M", kS}, {"heads", kH}, {"head_dim", kD}}, {}}; }

// q_rot = rope(q) and o = linear(attn_out): the run below never keeps attn_out.
compiler::Graph graph() {
  compiler::Graph g;
  g.model = "local-gate-test";
  g.seq = kS;
  g.nodes.push_back({0, "q_rot", rope_shape(),
                     {{ValueKind::activation, "q", 0, false}, {ValueKind::host, "rope_cos", -1, false},
                      {ValueKind::host, "rope_sin", -1, false}},
                     {ValueKind::activation, "q_rot", 0, false}});
  g.nodes.push_back({0, "o", {"linear", {{"M", kS}, {"K", kH * kD}, {"N", 32}}, {}},
                     {{ValueKind::activation, "attn_out", 0, false}, {ValueKind::weight, "o_proj", 0, false}},
                     {ValueKind::activation, "o", 0, false}});
  return g;
}

// What an NPU RoPE returns for bf16 q and a table converted by `cvt` (an
// honest design takes the f32 table as it is): the fp32 rotation, rounded
// once (RNE) on output.
std::vector<float> npu_rope(const std::vector<float>& q, const oracle::RopeTable& t, float (*cvt)(float)) {
  std::vector<float> c = t.cos, s = t.sin;
  for (float& x : c) x = cvt(x);
  for (float& x : s) x = cvt(x);
  std::vector<float> y = reference_op(rope_shape(), {q, c, s});
  round_bf16_inplace(y);
  return y;
}

struct NpuRun {
  std::vector<float> truth;  // the oracle's q_rot from the oracle's q
  std::map<std::string, std::vector<float>> npu;
};

// The NPU's q carries a shared 3 % error; its q_rot is computed with `cvt`.
NpuRun run(float (*cvt)(float)) {
  const oracle::RopeTable t = table();
  const std::vector<float> q = gaussian(static_cast<size_t>(kS * kH * kD), 3);
  NpuRun r;
  r.truth = reference_op(rope_shape(), {q, t.cos, t.sin});
  std::vector<float> drifted(q);
  for (float& x : drifted) x = round_bf16(1.03f * x);
  r.npu["L0.q"] = drifted;
  r.npu["L0.q_rot"] = npu_rope(drifted, t, cvt);
  return r;
}

const FixedValue kFixed = [](const ValueRef& r) -> std::vector<float> {
  const oracle::RopeTable t = table();
  if (r.str() == "host:rope_cos") return t.cos;
  if (r.str() == "host:rope_sin") return t.sin;
  ADD_FAILURE() << "unexpected fixed input " << r.str();
  return {};
};

float f32(float x) { return x; }

// Two linears reading weights wa and wb: the store keeps what fits its
// budget across calls, the rest is fetched per call; the checks are the same.
TEST(LocalGate, WeightStoreKeepsWhatFitsItsBudgetAndTheRestPerCall) {
  constexpr int64_t kK = 64, kN = 32;
  compiler::Graph g;
  g.model = "local-gate-store-test";
  g.seq = kS;
  const kernels::OpShape lin{"linear", {{"M", kS}, {"K", kK}, {"N", kN}}, {}};
  for (const char* w : {"a", "b"})
    g.nodes.push_back({0, std::string("y") + w, lin,
                       {{ValueKind::activation, "x", 0, false}, {ValueKind::weight, std::string("w") + w, 0, false}},
                       {ValueKind::activation, std::string("y") + w, 0, false}});
  std::map<std::string, std::vector<float>> weights{{"wa", gaussian(kN * kK, 5)}, {"wb", gaussian(kN * kK, 6)}};
  for (auto& [k, v] : weights) round_bf16_inplace(v);
  std::map<std::string, std::vector<float>> npu{{"L0.x", gaussian(kS * kK, 7)}};
  round_bf16_inplace(npu["L0.x"]);
  for (const char* w : {"a", "b"}) {
    // The FP32 op itself, unrounded: any other weight makes max_abs > 0.
    npu[std::string("L0.y") + w] = reference_op(lin, {npu["L0.x"], weights[std::string("w") + w]});
  }
  std::map<std::string, int> fetched;
  const FixedValue fixed = [&](const ValueRef& r) {
    ++fetched[r.name];
    return weights.at(r.name);
  };
  const int64_t one = kN * kK * static_cast<int64_t>(sizeof(float));
  for (const int64_t budget : {int64_t{0}, one, 2 * one}) {
    fetched.clear();
    WeightStore store;
    store.budget_bytes = budget;
    std::vector<std::vector<LocalCheck>> runs;
    for (int call = 0; call < 2; ++call) runs.push_back(local_checks(g, npu, fixed, -1, &store));
    EXPECT_LE(store.bytes, budget);
    EXPECT_EQ(fetched["wa"], budget >= one ? 1 : 2) << "budget " << budget;
    EXPECT_EQ(fetched["wb"], budget >= 2 * one ? 1 : 2) << "budget " << budget;
    for (const auto& checks : runs) {
      ASSERT_EQ(checks.size(), 2u);
      for (const LocalCheck& c : checks) EXPECT_EQ(c.metrics.max_abs, 0.0) << c.value << " budget " << budget;
    }
  }
}

TEST(LocalGate, SharedUpstreamErrorPassesLocallyButBreaksEndToEndStatistics) {
  const NpuRun r = run(f32);
  const auto checks = local_checks(graph(), r.npu, kFixed);
  ASSERT_EQ(checks.size(), 1u);  // o: its input attn_out was not kept
  EXPECT_EQ(checks[0].value, "L0.q_rot");
  const Metrics& m = checks[0].metrics;
  EXPECT_TRUE(failed_metrics(m, checks[0].threshold).empty())
      << "slope_z " << m.slope_z << " mag_bias_z " << m.mag_bias_z << " var_ratio " << m.var_ratio;
  // The same output against the oracle end to end, under the same rounding
  // model: the shared 3 % is hundreds of standard errors.
  NoiseModel nm = checks[0].threshold.noise;
  nm.row_width = kH * kD;
  const Metrics e2e = compare(r.truth, r.npu.at("L0.q_rot"), nm);
  EXPECT_GT(std::fabs(e2e.slope_z), 100.0);
}

TEST(LocalGate, TruncatedRopeTableFailsTheMagnitudeStatistics) {
  const NpuRun r = run(truncate_bf16);
  const auto checks = local_checks(graph(), r.npu, kFixed);
  ASSERT_EQ(checks.size(), 1u);
  const auto failed = failed_metrics(checks[0].metrics, checks[0].threshold);
  // The max / mean / cosine bounds cannot see half an ulp; the statistics do.
  for (const char* blind : {"max_rel", "mean_rel", "cosine", "pearson"})
    EXPECT_EQ(std::count(failed.begin(), failed.end(), blind), 0) << blind;
  EXPECT_NE(std::count(failed.begin(), failed.end(), "mag_bias_z"), 0)
      << "mag_bias_z " << checks[0].metrics.mag_bias_z;
}

TEST(LocalGate, LastRowRefTakesTheSelectedRow) {
  // logits-like node: one row of a [kS, K] value.
  compiler::Graph g;
  g.seq = 4;
  const kernels::OpShape lin{"linear", {{"M", 1}, {"K", 64}, {"N", 64}}, {}};
  g.nodes.push_back({-1, "logits", lin,
                     {{ValueKind::activation, "final_norm", -1, true}, {ValueKind::weight, "lm_head", -1, false}},
                     {ValueKind::activation, "logits", -1, false}});
  std::vector<float> x = gaussian(4 * 64, 5), w = gaussian(64 * 64, 6);
  round_bf16_inplace(x);
  round_bf16_inplace(w);
  const std::vector<float> row1(x.begin() + 64, x.begin() + 128);
  std::vector<float> y = reference_op(lin, {row1, w});
  round_bf16_inplace(y);
  const std::map<std::string, std::vector<float>> npu = {{"final_norm", x}, {"logits", y}};
  const FixedValue fw = [&](const ValueRef&) { return w; };
  const auto good = local_checks(g, npu, fw, 1);
  ASSERT_EQ(good.size(), 1u);
  EXPECT_TRUE(failed_metrics(good[0].metrics, good[0].threshold).empty());
  // Conditioning on the wrong row (the last, a pad row in a bucketed prefill) is a failure.
  const auto bad = local_checks(g, npu, fw, -1);
  EXPECT_FALSE(failed_metrics(bad[0].metrics, bad[0].threshold).empty());
}

}  // namespace
}  // namespace tessera::pipeline
