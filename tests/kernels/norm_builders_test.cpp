// rmsnorm / head_rmsnorm builders: ragged shapes on the simulator against
// oracle::rms_norm with the bf16 bound of the kernel test (one output rounding
// plus fp32 sum-of-squares), both device presets; every preset's shapes build,
// validate and have a timing estimate at seq 1, 17 and 2048. The ragged
// sweeps run in both activation layouts (blocked, and kRowMajorTile).
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

using test::bf16_values;

// Normalises rows of n values of x; bound |ref| (u_bf16 + (n/2 + 8) u_32).
void check_norm(const std::string& op, int64_t M, int64_t heads, int64_t n,
                const npu::DeviceSpec& spec, const TileOptions& tiles = {}) {
  SCOPED_TRACE(fmt::format("{} M={} heads={} n={} on {}", op, M, heads, n, spec.name));
  const double eps = 1e-5;
  OpShape shape = op == "rmsnorm"
                      ? OpShape{op, {{"M", M}, {"H", n}}, {{"eps", eps}}}
                      : OpShape{op, {{"M", M}, {"heads", heads}, {"head_dim", n}}, {{"eps", eps}}};
  const int64_t cols = op == "rmsnorm" ? n : heads * n;
  BuiltOp built = op_builder(op).build(shape, spec, tiles);
  auto x = bf16_values(static_cast<size_t>(M * cols), 3);
  auto w = bf16_values(static_cast<size_t>(n), 4);
  OpRun run = run_op(built, {x, w}, spec);
  std::vector<float> ref(x.size());
  oracle::rms_norm(x.data(), M * cols / n, n, w.data(), eps, ref.data());
  std::vector<double> bound(ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    bound[i] = std::fabs(ref[i]) * (kUBf16 + (0.5 * n + 8) * kU32);
  EXPECT_TRUE(test::within(test::to_f64(run.outputs.at(0)), test::to_f64(ref), bound));
}

// (device preset, row-major activation layout)
class NormBuilders : public ::testing::TestWithParam<std::tuple<const char*, bool>> {
 protected:
  npu::DeviceSpec spec = npu::DeviceSpec::preset(std::get<0>(GetParam()));
  bool rowmajor = std::get<1>(GetParam());
  TileOptions tiles() const { return rowmajor ? TileOptions{{kRowMajorTile, 1}} : TileOptions{}; }
};

TEST_P(NormBuilders, RmsnormRaggedRowsMatchOracle) {
  for (auto [M, H] : {std::pair<int64_t, int64_t>{1, 576}, {17, 960}, {45, 64}, {130, 2048}})
    check_norm("rmsnorm", M, 1, H, spec, tiles());
}

TEST_P(NormBuilders, HeadRmsnormOddHeadsMatchOracle) {
  for (auto [M, heads, hd] : {std::tuple<int64_t, int64_t, int64_t>{1, 14, 128}, {17, 9, 64},
                              {70, 2, 128}})
    check_norm("head_rmsnorm", M, heads, hd, spec, tiles());
}

INSTANTIATE_TEST_SUITE_P(Devices, NormBuilders,
                         ::testing::Combine(::testing::Values("xdna2", "xdna1"), ::testing::Bool()));

// rope splits a row over the tiles of a column (heads mode): row-major, a
// padded head has no bytes to be cut from, so the variant refuses it rather
// than pad (planted: 4 rows asked for 14 heads), and takes the unpadded split.
TEST(NormBuilders, RowMajorRopeRefusesPaddedHeads) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  OpShape s{"rope", {{"M", 17}, {"heads", 14}, {"head_dim", 64}}, {}};
  EXPECT_NO_THROW(op_builder("rope").build(s, spec, {{kRowMajorTile, 1}}));
  EXPECT_THROW(op_builder("rope").build(s, spec, {{kRowMajorTile, 1}, {"rows", 4}}), LimitError);
  // 2 rows of 7 heads each: no padding, so it builds.
  EXPECT_NO_THROW(op_builder("rope").build(s, spec, {{kRowMajorTile, 1}, {"rows", 2}}));
}

// Heads mode spreads a row's heads over the rows of a column without padded
// heads where a divisor of heads keeps at least half the rows: 14 heads on 4
// rows would carry 2 zero heads, on 2 rows none, so one row is laid out
// plain (the layout its row-major producer writes in decode). Asked for 4
// rows explicitly (the planted padding), the input is larger than the row.
TEST(NormBuilders, RopeHeadsModeAvoidsPaddedHeads) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  const OpShape s{"rope", {{"M", 1}, {"heads", 14}, {"head_dim", 64}}, {}};
  auto x_bytes = [&](const BuiltOp& b) {
    int64_t n = 0;
    for (const auto& h : b.design.host_buffers) n += h.name.starts_with("in_c") ? h.bytes : 0;
    return n;
  };
  const BuiltOp b = op_builder("rope").build(s, spec);
  EXPECT_EQ(b.tiles.at("rows"), 2);
  EXPECT_EQ(x_bytes(b), 14 * 64 * 2);
  const BuiltOp padded = op_builder("rope").build(s, spec, {{"rows", 4}});
  EXPECT_GT(x_bytes(padded), 14 * 64 * 2);
  // 32 heads divide 4 rows: unchanged.
  EXPECT_EQ(op_builder("rope").build({"rope", {{"M", 1}, {"heads", 32}, {"head_dim", 64}}, {}}, spec)
                .tiles.at("rows"), 4);
}

TEST(NormBuilders, UsesManyTilesForLongInputs) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  BuiltOp b = op_builder("rmsnorm").build({"rmsnorm", {{"M", 2048}, {"H", 2048}}, {}}, spec);
  EXPECT_EQ(b.tiles.at("columns") * b.tiles.at("rows"), spec.columns * spec.compute_rows);
}

TEST(NormBuilders, TooWideRowIsALimitError) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  EXPECT_THROW(op_builder("rmsnorm").build({"rmsnorm", {{"M", 4}, {"H", 1 << 16}}, {}}, spec),
               LimitError);
}

TEST(NormBuilders, EveryPresetShapeBuildsAndValidates) {
  for (const auto& dev : {"xdna2", "xdna1"}) {
    auto spec = npu::DeviceSpec::preset(dev);
    for (const auto& name : model::preset_names()) {
      model::ModelConfig c = model::preset(name);
      for (int64_t S : {1, 17, 2048}) {
        SCOPED_TRACE(fmt::format("{} {} S={}", dev, name, S));
        std::vector<OpShape> shapes = {{"rmsnorm", {{"M", S}, {"H", c.hidden_size}}, {}}};
        if (c.qk_norm)
          for (int64_t h : {c.num_heads, c.num_kv_heads})
            shapes.push_back(
                {"head_rmsnorm", {{"M", S}, {"heads", h}, {"head_dim", c.head_dim}}, {}});
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
