// The linear builder's partial weight panel (LinearPlan::panel_k): the first
// K blocks of each N block resident in the mem tile, the rest streamed per
// M step through the same fifo (npu Fifo::repeat_tail). Ragged shapes run
// bit for bit like the streaming gemm (panel = 0: same blocks, same K order
// per output) and within the oracle's bound; the planner and the validator
// refuse a resident part past the mem tile's memory or BDs, by name.
#include <bit>
#include <cmath>

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/builders/linear.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/npu/errors.h"
#include "tessera/npu/timing.h"
#include "tessera/oracle/ops.h"

namespace tessera::kernels {
namespace {

using test::linear_shape;

std::vector<float> run_linear(const BuiltOp& b, const std::vector<float>& x, const std::vector<float>& w,
                              const npu::DeviceSpec& spec) {
  OpRun r = run_op(b, {x, w}, spec);
  return r.outputs.at(0);
}

// Partial panel of `panel_k` resident K blocks against panel = 0 with the
// same blocks: identical bits, the oracle's bound, fewer DDR bytes.
void check_partial(int64_t M, int64_t K, int64_t N, TileOptions tiles, int64_t panel_k, size_t launches = 1) {
  SCOPED_TRACE(fmt::format("linear M={} K={} N={} panel_k={}", M, K, N, panel_k));
  const auto spec = npu::DeviceSpec::preset("xdna2");
  TileOptions stream = tiles, part = tiles;
  stream["panel"] = 0;
  part["panel_k"] = panel_k;
  const BuiltOp bs = op_builder("linear").build(linear_shape(M, K, N), spec, stream);
  const BuiltOp bp = op_builder("linear").build(linear_shape(M, K, N), spec, part);
  ASSERT_EQ(bp.tiles.at("panel_k"), panel_k);
  ASSERT_EQ(bp.tiles.at("panel"), 1);
  ASSERT_EQ(bp.tiles.at("k"), bs.tiles.at("k"));
  ASSERT_EQ(bp.design.launches.size(), launches);
  const int64_t kb = (K + bp.tiles.at("k") - 1) / bp.tiles.at("k");
  EXPECT_NE(bp.design.dump().find(fmt::format("repeat_group={} repeat_tail={}", panel_k, kb - panel_k)),
            std::string::npos);
  const auto x = test::bf16_values(static_cast<size_t>(M * K), 3);
  const auto w = test::bf16_values(static_cast<size_t>(N * K), 4);
  const std::vector<float> ys = run_linear(bs, x, w, spec), yp = run_linear(bp, x, w, spec);
  ASSERT_EQ(ys.size(), yp.size());
  for (size_t i = 0; i < ys.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(ys[i]), std::bit_cast<uint32_t>(yp[i])) << "element " << i;
  std::vector<float> ref(static_cast<size_t>(M * N));
  oracle::linear(x.data(), M, K, w.data(), N, nullptr, ref.data());
  const std::vector<double> bound = test::linear_bound(x, w, ref, M, K, N);
  EXPECT_TRUE(test::within(test::to_f64(yp), test::to_f64(ref), bound));
  EXPECT_LT(npu::estimate_time(bp.design, spec).ddr_bytes, npu::estimate_time(bs.design, spec).ddr_bytes);
}

TEST(LinearPartialPanel, RaggedShapesMatchTheStreamingGemmBitForBit) {
  // M, K, N ragged against 4 x 16 rows, 64-wide K blocks and 8 x 32 columns.
  for (int64_t pk : {1, 5, 15}) check_partial(300, 1000, 200, {{"m", 16}, {"n", 32}, {"k", 64}}, pk);
  check_partial(70, 700, 90, {{"m", 16}, {"n", 16}, {"k", 80}, {"y_depth", 1}}, 3);
  // Row-major y: 6 N blocks per column, 5 per launch (3 shim tasks each),
  // and the ragged last M step (re-read rows) in launches of its own: 4
  // launches, each keeping its resident blocks and re-reading its tails.
  check_partial(100, 300, 384, {{"m", 8}, {"n", 8}, {"k", 64}, {kRowMajorOutTile, 1}}, 2, 4);
}

// Resident blocks past the mem tile: the planner refuses them with the
// bytes and BDs against the limits; a design whose w pool was grown past
// them after planning is refused by the validator naming the fifo / pool.
TEST(LinearPartialPanel, ResidentPartPastTheMemTileIsRefused) {
  const auto spec = npu::DeviceSpec::preset("xdna2");
  const OpShape down = linear_shape(2048, 8192, 2048);
  const TileOptions t{{"m", 64}, {"n", 64}, {"k", 64}, {"y_depth", 2}};
  auto with = [&](int64_t pk) {
    TileOptions o = t;
    o["panel_k"] = pk;
    return o;
  };
  try {
    op_builder("linear").build(down, spec, with(35));
    ADD_FAILURE() << "35 resident K blocks of 64 x 64 need 49 BDs of 48";
  } catch (const LimitError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("partial weight panel of 35 resident K blocks"), std::string::npos) << m;
    EXPECT_NE(m.find("limits 524288 and 48"), std::string::npos) << m;
  }
  EXPECT_THROW(op_builder("linear").build(down, spec, with(128)), LimitError);  // kb = 128: none streamed
  EXPECT_THROW(op_builder("linear").build(down, spec, with(0)), LimitError);
  BuiltOp b = op_builder("linear").build(down, spec, with(34));
  EXPECT_EQ(b.tiles.at("panel_k"), 34);
  for (auto [depth, words] : {std::pair<int, std::vector<const char*>>{
                                  50, {"mem tile (0,1) needs 62 buffer descriptors", "w0 50", "limit 48"}},
                              {70, {"L2 memory of mem tile (0,1) overflows", "[70 x 8192]", "capacity 524288"}}}) {
    npu::Design d = b.design;
    for (auto& f : d.launches[0].fifos)
      if (f.name == "w0") f.depth = depth;
    try {
      validate_design(d, spec);
      ADD_FAILURE() << "w0 depth " << depth << " passed";
    } catch (const npu::DesignError& e) {
      for (const char* w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
