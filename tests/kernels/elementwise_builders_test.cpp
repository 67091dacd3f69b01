// bias_add / silu_mul / residual_add builders: ragged shapes on the simulator
// against the oracle ops with bf16-derived bounds, both device presets; every
// preset's shapes build, validate and have a timing estimate at seq 1, 17, 2048.
// The ragged sweeps run in both activation layouts (blocked, kRowMajorTile).
#include <cmath>
#include <tuple>

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/activation_layout.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"
#include "tessera/npu/timing.h"
#include "tessera/oracle/ops.h"

namespace tessera::kernels {
namespace {

using test::kU32;
using test::kUBf16;

// Wider than the default [-1, 1): SiLU and the residual see both tails.
std::vector<float> wide_values(size_t n, uint32_t seed) { return test::bf16_values(n, seed, -4.0f, 4.0f); }

OpShape mn(const std::string& op, int64_t M, int64_t N) { return {op, {{"M", M}, {"N", N}}, {}}; }

// One fp32 add, one rounding: |ref| (u_bf16 + 2 u_32).
void check_add(const std::string& op, int64_t M, int64_t N, const npu::DeviceSpec& spec,
               const TileOptions& tiles) {
  SCOPED_TRACE(fmt::format("{} M={} N={} on {}", op, M, N, spec.name));
  const bool bias = op == "bias_add";
  auto a = wide_values(static_cast<size_t>(M * N), 5);
  auto b = wide_values(static_cast<size_t>(bias ? N : M * N), 6);
  OpRun run = run_op(op_builder(op).build(mn(op, M, N), spec, tiles), {a, b}, spec);
  std::vector<double> ref(a.size()), bound(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ref[i] = double{a[i]} + b[bias ? i % static_cast<size_t>(N) : i];
    bound[i] = std::fabs(ref[i]) * (kUBf16 + 2 * kU32);
  }
  EXPECT_TRUE(test::within(test::to_f64(run.outputs.at(0)), ref, bound));
}

// silu from the tile's bf16 exp: its rounding reaches silu scaled by
// (1 - sigmoid) <= 1, then one output rounding: |ref| (2 u_bf16 + 8 u_32).
void check_silu_mul(int64_t M, int64_t N, const npu::DeviceSpec& spec, const TileOptions& tiles) {
  SCOPED_TRACE(fmt::format("silu_mul M={} N={} on {}", M, N, spec.name));
  auto g = wide_values(static_cast<size_t>(M * N), 7);
  auto u = wide_values(static_cast<size_t>(M * N), 8);
  OpRun run =
      run_op(op_builder("silu_mul").build(mn("silu_mul", M, N), spec, tiles), {g, u}, spec);
  std::vector<float> ref(g.size());
  oracle::swiglu(g.data(), u.data(), M * N, ref.data());
  std::vector<double> bound(ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    bound[i] = std::fabs(ref[i]) * (2 * kUBf16 + 8 * kU32) + 1e-38;
  EXPECT_TRUE(test::within(test::to_f64(run.outputs.at(0)), test::to_f64(ref), bound));
}

// (device preset, row-major activation layout)
class ElementwiseBuilders : public ::testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(ElementwiseBuilders, RaggedShapesMatchOracle) {
  auto spec = npu::DeviceSpec::preset(std::get<0>(GetParam()));
  const TileOptions t =
      std::get<1>(GetParam()) ? TileOptions{{kRowMajorTile, 1}} : TileOptions{};
  for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 576}, {17, 896}, {3, 11008}, {67, 1000}}) {
    check_add("residual_add", M, N, spec, t);
    check_silu_mul(M, N, spec, t);
  }
  for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 1536}, {17, 256}, {45, 130}})
    check_add("bias_add", M, N, spec, t);
}

INSTANTIATE_TEST_SUITE_P(Devices, ElementwiseBuilders,
                         ::testing::Combine(::testing::Values("xdna2", "xdna1"), ::testing::Bool()));

TEST(ElementwiseBuilders, LargeActivationKeepsObjectsLarge) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  BuiltOp b = op_builder("silu_mul").build(mn("silu_mul", 2048, 11008), spec);
  EXPECT_EQ(b.tiles.at("columns") * b.tiles.at("rows"), spec.columns * spec.compute_rows);
  EXPECT_GE(b.tiles.at("m"), 4);  // >= 4 KiB objects per call
}

TEST(ElementwiseBuilders, EveryPresetShapeBuildsAndValidates) {
  for (const auto& dev : {"xdna2", "xdna1"}) {
    auto spec = npu::DeviceSpec::preset(dev);
    for (const auto& name : model::preset_names()) {
      model::ModelConfig c = model::preset(name);
      for (int64_t S : {1, 17, 2048}) {
        SCOPED_TRACE(fmt::format("{} {} S={}", dev, name, S));
        std::vector<OpShape> shapes = {mn("residual_add", S, c.hidden_size),
                                       mn("silu_mul", S, c.intermediate_size)};
        if (c.qkv_bias)
          for (int64_t n : {c.q_dim(), c.kv_dim()}) shapes.push_back(mn("bias_add", S, n));
        for (const auto& s : shapes) {
          BuiltOp b = op_builder(s.op).build(s, spec);
          EXPECT_GT(npu::estimate_time(b.design, spec).total_seconds, 0) << s.key();
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
