// rope builder: ragged rows and odd head counts on the simulator against
// oracle::apply_rope with tables from oracle::rope_table (positions pos0..),
// both device presets; a planted (i, i+1) pairing must fail the same check;
// every preset's q / k rope shapes build and validate at seq 1, 17 and 2048.
#include <cmath>

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/activation_layout.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"
#include "tessera/npu/timing.h"
#include "tessera/oracle/rope.h"

namespace tessera::kernels {
namespace {

using test::kU32;
using test::kUBf16;

struct RopeCase {
  std::vector<float> x, cos, sin;
  std::vector<double> ref, bound;
};

// bound: 4 u_32 (|x_i cos| + |x_j sin|) for the fp32 rotation + u_bf16 |ref|.
RopeCase make_case(int64_t M, int64_t heads, int64_t hd, int64_t pos0) {
  RopeCase k;
  auto xb = test::random_bf16(static_cast<size_t>(M * heads * hd), 9);
  for (bf16 v : xb) k.x.push_back(bf16_to_f32(v));
  std::vector<float> inv(static_cast<size_t>(hd / 2));
  for (int64_t i = 0; i < hd / 2; ++i) inv[i] = static_cast<float>(std::pow(1e4, -2.0 * i / hd));
  oracle::RopeTable t = oracle::rope_table(inv, pos0, M);
  k.cos = t.cos;
  k.sin = t.sin;
  std::vector<float> ref = k.x;
  const int64_t h2 = hd / 2;
  for (int64_t r = 0; r < M; ++r)
    oracle::apply_rope(ref.data() + r * heads * hd, heads, hd, k.cos.data() + r * h2,
                       k.sin.data() + r * h2);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t e = 0; e < hd; ++e) {
        int64_t i = (r * heads + h) * hd + e, j = (r * heads + h) * hd + (e + h2) % hd;
        double mag = std::fabs(k.x[i] * k.cos[r * h2 + e % h2]) +
                     std::fabs(k.x[j] * k.sin[r * h2 + e % h2]);
        k.ref.push_back(ref[i]);
        k.bound.push_back(4 * kU32 * mag + kUBf16 * std::fabs(ref[i]));
      }
  return k;
}

OpShape rope_shape(int64_t M, int64_t heads, int64_t hd) {
  return {"rope", {{"M", M}, {"heads", heads}, {"head_dim", hd}}, {}};
}

class RopeBuilder : public ::testing::TestWithParam<const char*> {};

TEST_P(RopeBuilder, RaggedRowsAndOddHeadsMatchOracle) {
  auto spec = npu::DeviceSpec::preset(GetParam());
  for (auto [M, heads, hd, pos0] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 14, 64, 37},
                                    {17, 9, 64, 0}, {33, 2, 128, 5}, {70, 5, 128, 1000}}) {
    SCOPED_TRACE(fmt::format("rope M={} heads={} hd={} pos0={} on {}", M, heads, hd, pos0,
                             spec.name));
    RopeCase k = make_case(M, heads, hd, pos0);
    OpRun run = run_op(op_builder("rope").build(rope_shape(M, heads, hd), spec),
                       {k.x, k.cos, k.sin}, spec);
    EXPECT_TRUE(test::within(test::to_f64(run.outputs.at(0)), k.ref, k.bound));
  }
}

// The row-major layout (kRowMajorTile, the layout a gemm's rowmajor_out
// writes): rows past the end re-read the last whole block, whose cos / sin
// rows must follow it. M = 17 and 70 leave columns whose blocks are clamped;
// the result is bit-identical to the blocked layout's (same kernel, same
// rows). The check can fail: tables one position off (what an unclamped pack
// gives the clamped rows) are outside the bound.
TEST_P(RopeBuilder, RowMajorRaggedRowsMatchOracleAndBlocked) {
  auto spec = npu::DeviceSpec::preset(GetParam());
  for (auto [M, heads, hd, pos0] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 14, 64, 37},
                                    {17, 8, 64, 3}, {33, 2, 128, 5}, {70, 4, 128, 1000},
                                    {257, 32, 64, 0}}) {
    SCOPED_TRACE(fmt::format("rope row-major M={} heads={} hd={} pos0={} on {}", M, heads, hd,
                             pos0, spec.name));
    RopeCase k = make_case(M, heads, hd, pos0);
    const BuiltOp rm = op_builder("rope").build(rope_shape(M, heads, hd), spec, {{kRowMajorTile, 1}});
    EXPECT_EQ(rm.tiles.at(kRowMajorTile), 1);
    OpRun run = run_op(rm, {k.x, k.cos, k.sin}, spec);
    EXPECT_TRUE(test::within(test::to_f64(run.outputs.at(0)), k.ref, k.bound));
    OpRun blocked = run_op(op_builder("rope").build(rope_shape(M, heads, hd), spec),
                           {k.x, k.cos, k.sin}, spec);
    EXPECT_EQ(run.outputs.at(0), blocked.outputs.at(0));
    if (M == 17 || M == 70) {
      RopeCase shifted = k;
      const int64_t h2 = hd / 2;
      for (int64_t i = 0; i + h2 < static_cast<int64_t>(k.cos.size()); ++i) {
        shifted.cos[i] = k.cos[i + h2];
        shifted.sin[i] = k.sin[i + h2];
      }
      OpRun bad = run_op(rm, {k.x, shifted.cos, shifted.sin}, spec);
      EXPECT_FALSE(test::within(test::to_f64(bad.outputs.at(0)), k.ref, k.bound));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, RopeBuilder, ::testing::Values("xdna2", "xdna1"));

// The check can fail: the rotate-every-two (GPT-J) pairing differs from HF's.
TEST(RopeBuilder, AdjacentPairingFailsTheCheck) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  RopeCase k = make_case(3, 2, 64, 7);
  std::vector<double> wrong(k.x.size());
  for (size_t i = 0; i < k.x.size(); i += 2) {
    size_t t = (i / 128) * 32 + (i % 64) / 2;  // row i / (2 heads * 64), frequency e / 2
    wrong[i] = k.x[i] * k.cos[t] - k.x[i + 1] * k.sin[t];
    wrong[i + 1] = k.x[i + 1] * k.cos[t] + k.x[i] * k.sin[t];
  }
  EXPECT_FALSE(test::within(wrong, k.ref, k.bound));
}

TEST(RopeBuilder, OddHeadDimIsALimitError) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  EXPECT_THROW(op_builder("rope").build(rope_shape(4, 2, 63), spec), LimitError);
}

TEST(RopeBuilder, EveryPresetShapeBuildsAndValidates) {
  for (const auto& dev : {"xdna2", "xdna1"}) {
    auto spec = npu::DeviceSpec::preset(dev);
    for (const auto& name : model::preset_names()) {
      model::ModelConfig c = model::preset(name);
      for (int64_t S : {1, 17, 2048})
        for (int64_t h : {c.num_heads, c.num_kv_heads}) {
          OpShape s = rope_shape(S, h, c.head_dim);
          SCOPED_TRACE(fmt::format("{} {} {}", dev, name, s.key()));
          BuiltOp b = op_builder("rope").build(s, spec);
          EXPECT_GT(npu::estimate_time(b.design, spec).total_seconds, 0);
        }
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
