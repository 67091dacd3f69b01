// linear builder: ragged shapes on the simulator against oracle::linear with a
// bound from bf16 output rounding and fp32 accumulation, both dataflows, both
// device presets; and every linear shape of every preset builds, validates and
// has a timing estimate.
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/core/threads.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/builders/linear.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"
#include "tessera/npu/errors.h"
#include "tessera/npu/simulator.h"
#include "tessera/npu/timing.h"
#include "tessera/oracle/ops.h"

namespace tessera::kernels {
namespace {


using test::bf16_values;
using test::linear_shape;

// Simulates linear(M, K, N) and checks every element against the oracle:
// |y - ref| <= u_bf16 |ref| (output rounding) + 2 K u_32 sum_k |x w| (fp32 sums).
void check_linear(int64_t M, int64_t K, int64_t N, const npu::DeviceSpec& spec,
                  const TileOptions& tiles = {}) {
  SCOPED_TRACE(fmt::format("linear M={} K={} N={} on {}", M, K, N, spec.name));
  BuiltOp built = op_builder("linear").build(linear_shape(M, K, N), spec, tiles);
  auto x = bf16_values(static_cast<size_t>(M * K), 1);
  auto w = bf16_values(static_cast<size_t>(N * K), 2);
  OpRun run = run_op(built, {x, w}, spec);
  ASSERT_EQ(run.outputs.size(), 1u);
  std::vector<float> ref(static_cast<size_t>(M * N));
  oracle::linear(x.data(), M, K, w.data(), N, nullptr, ref.data());
  const std::vector<double> bound = test::linear_bound(x, w, ref, M, K, N);
  EXPECT_TRUE(test::within(test::to_f64(run.outputs[0]), test::to_f64(ref), bound));
  // Weights are read exactly once per M step: nothing is dropped or doubled.
  EXPECT_GT(run.stats.macs(), 0);
}

class LinearOnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  npu::DeviceSpec spec = npu::DeviceSpec::preset(GetParam());
};

TEST_P(LinearOnDevice, DecodeShapesThatDoNotDivideTheArray) {
  check_linear(1, 100, 37, spec);
  check_linear(1, 576, 1000, spec);
  check_linear(1, 5000, 700, spec);
  check_linear(1, 5000, 700, spec, {{"k", 1024}});  // K split: fp32 accumulation across K blocks
  check_linear(1, 30000, 40, spec);  // K too long for one block next to a resident x
}

TEST_P(LinearOnDevice, ShortPromptsUseOneMBlock) {
  check_linear(3, 200, 300, spec);
  check_linear(17, 600, 130, spec);
  check_linear(5, 7, 3, spec);  // every dim smaller than any block
}

TEST_P(LinearOnDevice, PrefillGemmRaggedInEveryDim) {
  check_linear(70, 130, 200, spec);
  check_linear(45, 300, 97, spec, {{"k", 64}});  // several K blocks, remainder in K
  // The same without the weight panel in L2 (weights re-read per M step).
  check_linear(70, 130, 200, spec, {{"panel", 0}});
  check_linear(45, 300, 97, spec, {{"k", 64}, {"panel", 0}});
  // Panel with several N blocks per column and several M steps.
  check_linear(300, 200, 1100, spec, {{"m", 16}, {"n", 32}, {"k", 64}, {"panel", 1}});
}

TEST_P(LinearOnDevice, ForcedDataflowsAndSeveralLaunches) {
  check_linear(40, 72, 64, spec, {{"gemm", 0}});             // gemv with several M steps
  check_linear(2, 72, 64, spec, {{"gemm", 1}});              // gemm with one tiny M block
  check_linear(300, 128, 40, spec, {{"m", 4}, {"k", 64}, {"panel", 0}});  // 19 M steps -> 2 launches
  check_linear(4100, 8, 8, spec, {{"m", 4}});  // weight panel re-sent 255 times, then a 2nd launch
}

// Real decode projections (several N blocks per tile, K split) on the
// simulator: smollm2-135m's q, k/v, gate and down, and a qwen2.5-0.5b down.
TEST(LinearBuilder, RealDecodeShapesOnTheSimulator) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  for (auto [K, N] : {std::pair<int64_t, int64_t>{576, 576}, {576, 192}, {576, 1536},
                      {1536, 576}, {4864, 896}})
    check_linear(1, K, N, spec);
}

// The gemv dataflow's variants: x resident across a K split (read at
// offsets), x re-streamed per block, one weight stream per column, short
// prompts with a resident x.
TEST_P(LinearOnDevice, GemvVariantsAreExact) {
  check_linear(1, 1000, 301, spec, {{"k", 256}, {"x_resident", 1}});
  check_linear(1, 1000, 301, spec, {{"k", 256}, {"x_resident", 0}});
  check_linear(1, 300, 90, spec, {{"streams", 1}});
  check_linear(3, 520, 77, spec, {{"k", 192}, {"x_resident", 1}});
  check_linear(5, 520, 77, spec, {{"k", 192}, {"x_resident", 0}, {"n", 8}});
}

// The row-major activation layout (kRowMajorTile): x and y in one buffer
// each; a ragged last M step re-reads whole rows (K and N must tile exactly).
TEST_P(LinearOnDevice, RowMajorLayoutIsExactWithRaggedM) {
  const TileOptions rm{{kRowMajorTile, 1}, {"columns", 4}, {"rows", 4}, {"n", 32}, {"k", 64}};
  auto with = [&](TileOptions t, int64_t m) {
    t["m"] = m;
    return t;
  };
  check_linear(70, 128, 512, spec, with(rm, 16));   // step 1 re-reads rows 6..69
  check_linear(300, 192, 512, spec, with(rm, 4));   // 19 M steps: three launches
  check_linear(64, 64, 256, spec, with(rm, 16));    // one K block, x resident
  BuiltOp b = op_builder("linear").build(linear_shape(300, 192, 512), spec, with(rm, 4));
  EXPECT_EQ(b.design.launches.size(), 3u);
  EXPECT_EQ(b.tiles.at(kRowMajorTile), 1);
}

// kRowMajorOutTile: y alone row-major, x blocked and padded, the weight
// panel kept; a ragged last step gets its own launch.
TEST_P(LinearOnDevice, RowMajorOutputIsExactWithThePanel) {
  const TileOptions out{{kRowMajorOutTile, 1}, {"columns", 4}, {"rows", 4}, {"n", 32}, {"k", 64}};
  auto with = [&](TileOptions t, int64_t m, int panel) {
    t["m"] = m;
    t["panel"] = panel;
    return t;
  };
  check_linear(70, 130, 512, spec, with(out, 16, 1));   // ragged K: x stays blocked
  check_linear(300, 192, 512, spec, with(out, 4, 1));   // 19 steps, the last re-read
  check_linear(300, 192, 512, spec, with(out, 4, 0));
  BuiltOp b = op_builder("linear").build(linear_shape(300, 192, 512), spec, with(out, 4, 1));
  EXPECT_EQ(b.tiles.at("panel"), 1);
  EXPECT_EQ(b.design.launches.size(), 2u);  // 18 steps in one launch, the re-read step alone
  EXPECT_THROW(op_builder("linear").build(linear_shape(70, 128, 200), spec, out), LimitError);
  // One ragged step by default (m = 20 would pad): m shrinks to 16, two steps.
  const TileOptions plain{{kRowMajorOutTile, 1}, {"columns", 4}, {"rows", 4}, {"n", 32}};
  check_linear(78, 96, 512, spec, plain);
  EXPECT_EQ(op_builder("linear").build(linear_shape(78, 96, 512), spec, plain).tiles.at("m"), 16);
}

// The prefill layout policy's exact N blocks (compiler layout_tiles): n = 56
// (Qwen2.5's hidden 896 = 8 x 2 x 56) and n = 32 with an odd 19 N blocks per
// column (its 4864 = 8 x 19 x 32), here over fewer columns; row-major y on
// ragged M (the last step re-read), with and without the panel.
TEST_P(LinearOnDevice, RowMajorOutputWithExactNBlocksOfAnyWidth) {
  const TileOptions t{{kRowMajorOutTile, 1}, {"gemm", 1}, {"columns", 4}, {"rows", 4}, {"k", 64}};
  auto with = [&](int64_t n, int panel) {
    TileOptions o = t;
    o["n"] = n;
    o["panel"] = panel;
    return o;
  };
  check_linear(300, 192, 4 * 2 * 56, spec, with(56, 1));
  check_linear(70, 128, 4 * 2 * 56, spec, with(56, 0));
  check_linear(70, 64, 4 * 19 * 32, spec, with(32, 1));
  EXPECT_EQ(plan_linear(70, 64, 4 * 19 * 32, spec, with(32, 1)).NB, 19);
}

// Panel + row-major y with more N blocks than an x shim's BDs take one y
// task each: the launches split the N blocks (each reads its own W blocks),
// the ragged last M step still re-reads whole rows in its own launches.
TEST_P(LinearOnDevice, RowMajorOutputSplitsLaunchesByNBlocks) {
  const TileOptions t{{kRowMajorOutTile, 1}, {"gemm", 1}, {"columns", 2}, {"rows", 2}, {"m", 8},
                      {"n", 8}, {"k", 64}, {"panel", 1}};
  const int64_t N = 2 * 8 * (spec.shim.buffer_descriptors + 2);  // NB past one launch
  check_linear(37, 72, N, spec, t);  // ragged M and K
  check_linear(32, 64, N, spec, t);
  LinearPlan p = plan_linear(37, 72, N, spec, t);
  EXPECT_LT(p.nb_per_launch, p.NB);
  BuiltOp b = op_builder("linear").build(linear_shape(37, 72, N), spec, t);
  EXPECT_EQ(b.design.launches.size(), 4u);  // {2 steps, the re-read step} x 2 N groups
}

// Two K blocks per weight object (wk = 2): ragged K pads to an even number of
// blocks with exact zeros; with the blocked and the row-major y.
TEST_P(LinearOnDevice, PanelOfTwoKBlocksPerObjectIsExact) {
  const TileOptions t{{"gemm", 1}, {"wk", 2}, {"columns", 2}, {"rows", 2},
                      {"m", 8},    {"n", 16}, {"k", 64},      {"panel", 1}};
  check_linear(37, 130, 96, spec, t);   // kb 3 -> 4: one block of zeros
  check_linear(40, 256, 64, spec, t);   // kb 4
  TileOptions rows = t;
  rows[kRowMajorOutTile] = 1;
  check_linear(37, 200, 64, spec, rows);
  BuiltOp b = op_builder("linear").build(linear_shape(37, 130, 96), spec, t);
  EXPECT_EQ(b.tiles.at("wk"), 2);
  EXPECT_THROW(op_builder("linear").build(linear_shape(37, 130, 96), spec,
                                          {{"gemm", 1}, {"wk", 2}, {"panel", 0}}),
               LimitError);
}

// The gemv's row-major y (decode): one buffer of N bf16, no padding. Ragged
// N pulls the last column blocks back to end at N (their rows are computed
// twice and written back unchanged); several N blocks per column (n = 4)
// take one strided task plus one repeated task for the pulled-back blocks.
TEST_P(LinearOnDevice, GemvRowMajorOutputIsExactWithRaggedN) {
  check_linear(1, 1000, 301, spec, {{kRowMajorOutTile, 1}, {"k", 256}});  // x padded, y plain
  check_linear(1, 1024, 301, spec, {{kRowMajorTile, 1}, {"k", 256}, {"x_resident", 0}});
  check_linear(1, 192, 301, spec, {{kRowMajorTile, 1}, {"n", 4}});
  check_linear(1, 192, 256, spec, {{kRowMajorTile, 1}, {"n", 2}, {"streams", 1}});
  BuiltOp b = op_builder("linear").build(linear_shape(1, 192, 301), spec, {{kRowMajorTile, 1}, {"n", 4}});
  ASSERT_EQ(b.design.host_buffers.size(), 2u + static_cast<size_t>(plan_linear(1, 192, 301, spec, {{"n", 4}}).streams()));
  EXPECT_EQ(b.design.host_buffers[1].name, "y_rows");
  EXPECT_EQ(b.design.host_buffers[1].bytes, 301 * 2);
  EXPECT_EQ(b.tiles.at(kRowMajorTile), 1);
  // What it cannot write unpadded is refused: prompt rows, a column block
  // longer than N, x in K blocks that pad it.
  EXPECT_THROW(op_builder("linear").build(linear_shape(2, 192, 301), spec, {{kRowMajorOutTile, 1}}),
               LimitError);
  EXPECT_THROW(op_builder("linear").build(linear_shape(1, 192, 40), spec,
                                          {{kRowMajorOutTile, 1}, {"n", 16}}),
               LimitError);
  EXPECT_THROW(op_builder("linear").build(linear_shape(1, 1000, 301), spec,
                                          {{kRowMajorTile, 1}, {"k", 256}}),
               LimitError);
}

// One y object per tile (the longer K block it buys) on ragged shapes: K
// padded to the block, several N blocks and M steps, with and without the
// panel, with a row-major y; accumulation stays in k order, so the bound is
// the same as for two y objects.
TEST_P(LinearOnDevice, OneYObjectIsExactOnRaggedShapes) {
  check_linear(70, 300, 200, spec, {{"k", 80}, {"y_depth", 1}});
  check_linear(300, 200, 1100, spec, {{"m", 16}, {"n", 32}, {"k", 96}, {"y_depth", 1}, {"panel", 1}});
  check_linear(45, 1000, 97, spec, {{"y_depth", 1}, {"panel", 0}});
  check_linear(130, 2048, 256, spec, {{kRowMajorOutTile, 1}, {"m", 32}, {"n", 32}});
}

TEST_P(LinearOnDevice, RowMajorLayoutRefusesWhatItCannotReadUnpadded) {
  const TileOptions rm{{kRowMajorTile, 1}};
  EXPECT_THROW(op_builder("linear").build(linear_shape(70, 130, 200), spec, rm), LimitError);
  EXPECT_THROW(op_builder("linear").build(linear_shape(3, 128, 256), spec, rm), LimitError);  // gemv, M > 1
  EXPECT_THROW(op_builder("linear").build(linear_shape(40, 128, 512), spec,
                                          {{kRowMajorTile, 1}, {"m", 16}, {"rows", 4}}),
               LimitError);  // M < rows * m
}

// A decode gemv splits K into blocks that tile it exactly when at most twice
// the fewest fitting blocks do, so its x is the plain row silu_mul writes:
// qwen2.5-3b's down (K = 11008) fits 3 blocks of 3712 (padded), and takes 4
// of 2752. K = 64 * 139 has no exact split short of 139 blocks: padded.
TEST_P(LinearOnDevice, DecodeKSplitTilesKExactlyWhenItCan) {
  EXPECT_EQ(plan_linear(1, 11008, 2048, spec).Kp(), 11008);
  check_linear(1, 11008, 300, spec, {{kRowMajorTile, 1}});
  EXPECT_NE(plan_linear(1, 64 * 139, 256, spec).Kp(), 64 * 139);
  EXPECT_THROW(op_builder("linear").build(linear_shape(1, 64 * 139, 256), spec, {{kRowMajorTile, 1}}),
               LimitError);
}

// A given K block keeps two y objects when they place (smollm2-135m's k/v at
// the layout policy's k = 144, n = 24, m = 64: bank alignment leaves no gap,
// the allocator packs them), and takes one when two do not fit L1 by size
// (k = 96, n = 48: two are refused by name).
TEST(LinearBuilder, GivenKBlockTakesOneYObjectOnlyWhenTwoDoNotFit) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  const TileOptions packed{{"gemm", 1}, {"k", 144}, {"n", 24}};
  EXPECT_EQ(op_builder("linear").build(linear_shape(300, 576, 192), spec, packed).tiles.at("y_depth"), 2);
  check_linear(300, 576, 192, spec, packed);
  const TileOptions wide{{"gemm", 1}, {"k", 96}, {"n", 48}};
  TileOptions two = wide;
  two["y_depth"] = 2;
  EXPECT_THROW(op_builder("linear").build(linear_shape(300, 1152, 384), spec, two), LimitError);
  EXPECT_EQ(op_builder("linear").build(linear_shape(300, 1152, 384), spec, wide).tiles.at("y_depth"), 1);
  check_linear(300, 1152, 384, spec, wide);
}

INSTANTIATE_TEST_SUITE_P(Presets, LinearOnDevice, ::testing::Values("xdna2", "xdna1"));

// Cutting blocks out of row-major x / y by shim patterns is charged by the
// timing model as the short runs it is (each run rounded up to a DDR burst),
// not as the contiguous stream of the blocked layout.
TEST(LinearBuilder, RowMajorShortRunsCostDdrBursts) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  const TileOptions t{{"columns", 4}, {"rows", 4}, {"m", 16}, {"n", 32}, {"k", 64}, {"panel", 0}};
  TileOptions rm = t;
  rm[kRowMajorTile] = 1;
  auto burst = [&](const TileOptions& o) {
    int64_t bytes = 0, payload = 0;
    for (const auto& l : npu::estimate_time(op_builder("linear").build(linear_shape(256, 256, 512), spec, o).design, spec).launches) {
      bytes += l.ddr_burst_bytes;
      payload += l.ddr_bytes;
    }
    return std::pair{bytes, payload};
  };
  auto [blocked, blocked_payload] = burst(t);
  auto [rows, rows_payload] = burst(rm);
  EXPECT_EQ(blocked_payload, rows_payload);  // the same data moves
  // x runs of k = 64 and y runs of n = 32 bf16 are below one 512-byte burst.
  EXPECT_GT(rows, blocked);
}

// Prefill with the weight panel in L2: at llama-3.2-1b's gate / q shapes the
// weights cross DDR once per launch instead of once per M step, the DDR bytes
// drop accordingly, and DDR no longer binds (on xdna2 the cores' 4 B/cycle
// input ports do: 64x64 blocks need 8 B/cycle per port at 256 MAC/cycle).
TEST(LinearBuilder, PrefillWeightPanelInL2CutsDdrTraffic) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  // At the floor of the DDR range (45 GB/s) streaming is DDR-bound; the fitted
  // rate may sit higher (66.6 GB/s since issue 11), where both are core-bound.
  spec.ddr_bytes_per_second = 45e9;
  for (auto [K, N] : {std::pair<int64_t, int64_t>{2048, 8192}, {2048, 2048}}) {
    SCOPED_TRACE(fmt::format("K={} N={}", K, N));
    const OpShape s = linear_shape(2048, K, N);
    const auto panel = npu::estimate_time(op_builder("linear").build(s, spec).design, spec);
    const auto stream = npu::estimate_time(op_builder("linear").build(s, spec, {{"panel", 0}}).design, spec);
    EXPECT_NE(panel.launches.at(0).bound, "ddr");
    EXPECT_LT(static_cast<double>(panel.ddr_bytes), 0.6 * static_cast<double>(stream.ddr_bytes));
    EXPECT_LT(panel.total_seconds, stream.total_seconds);
    EXPECT_GE(panel.ddr_bytes, 2 * (2048 * K + K * N + 2048 * N));  // x, W, y at least once
  }
}

// The row-major y of llama-3.2-1b's prefill linears keeps the panel's DDR
// traffic: each N block leaves by one 3-D task over all the launch's rows,
// so W crosses DDR once per op (not once per 4 M steps) and DDR does not bind.
TEST(LinearBuilder, RowMajorOutputReadsTheWeightsOnce) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  for (auto [K, N] : {std::pair<int64_t, int64_t>{2048, 8192}, {2048, 2048}}) {
    SCOPED_TRACE(fmt::format("K={} N={}", K, N));
    const OpShape s = linear_shape(2048, K, N);
    const auto blocked = npu::estimate_time(op_builder("linear").build(s, spec).design, spec);
    const auto rows =
        npu::estimate_time(op_builder("linear").build(s, spec, {{kRowMajorOutTile, 1}}).design, spec);
    EXPECT_EQ(rows.ddr_bytes, blocked.ddr_bytes);  // same payload: nothing re-read
    for (const auto& l : rows.launches) EXPECT_NE(l.bound, "ddr") << l.name;
  }
  // A spec whose BD stride cannot span the rows of an N block is refused by name.
  npu::DeviceSpec tight = spec;
  tight.bd_max_stride = 1024;
  EXPECT_THROW(op_builder("linear").build(linear_shape(2048, 2048, 8192), tight,
                                          {{kRowMajorOutTile, 1}}),
               LimitError);
}

// K past the mem tile's BDs for a panel of single K blocks (llama-3.2-3b's
// K = 3072: 48 blocks of 64): the default stages two K blocks per object, so
// W crosses DDR once per launch and DDR no longer binds.
TEST(LinearBuilder, LongKPanelStagesTwoKBlocksPerObject) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  // The calibrated DDR rate (66.6 GB/s after the refit) no longer binds the
  // streaming GEMM; the panel's gain is shown where it does, as above.
  spec.ddr_bytes_per_second = 45e9;
  const OpShape s = linear_shape(2048, 3072, 8192);
  EXPECT_THROW(op_builder("linear").build(s, spec, {{"panel", 1}, {"wk", 1}}), LimitError);
  BuiltOp b = op_builder("linear").build(s, spec);
  EXPECT_EQ(b.tiles.at("panel"), 1);
  EXPECT_EQ(b.tiles.at("wk"), 2);
  const auto panel = npu::estimate_time(b.design, spec);
  const auto stream = npu::estimate_time(op_builder("linear").build(s, spec, {{"panel", 0}}).design, spec);
  EXPECT_NE(panel.launches.at(0).bound, "ddr");
  EXPECT_LT(static_cast<double>(panel.ddr_bytes), 0.6 * static_cast<double>(stream.ddr_bytes));
  EXPECT_LT(panel.total_seconds, stream.total_seconds);
}

// The prefill default at 64 x 64 blocks: one y object frees the L1 for a K
// block of 80 (26 calls per output block at K = 2048 instead of 32, each
// paying the same per-loop overhead): its busiest core computes for less
// than two y objects' at k = 64, and its drain hides under the next block's
// K loop (the y acquire comes after it), so single-buffered y costs no stall. Two y objects at k = 80 overflow L1, and a depth outside 1..2 is
// refused by name.
TEST(LinearBuilder, OneYObjectBuysALongerKBlock) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  for (auto [K, N] : {std::pair<int64_t, int64_t>{2048, 2048}, {2048, 8192}, {8192, 2048}}) {
    SCOPED_TRACE(fmt::format("K={} N={}", K, N));
    const OpShape s = linear_shape(2048, K, N);
    BuiltOp one = op_builder("linear").build(s, spec);
    BuiltOp two = op_builder("linear").build(s, spec, {{"y_depth", 2}});
    EXPECT_EQ(one.tiles.at("y_depth"), 1);
    EXPECT_EQ(one.tiles.at("k"), 80);
    EXPECT_EQ(two.tiles.at("k"), 64);
    EXPECT_EQ(one.tiles.at("n"), two.tiles.at("n"));
    // The longer block buys compute (fewer calls); where DDR bounds both
    // (K = 8192 at the sourced 60 GB/s) only its K padding (8240 / 8192)
    // separates them.
    const auto t1 = npu::estimate_time(one.design, spec), t2 = npu::estimate_time(two.design, spec);
    EXPECT_LT(t1.launches.at(0).compute_seconds, 0.92 * t2.launches.at(0).compute_seconds);
    EXPECT_LT(t1.total_seconds, 1.01 * t2.total_seconds);
    EXPECT_THROW(op_builder("linear").build(s, spec, {{"k", 80}, {"y_depth", 2}}), LimitError);
  }
  EXPECT_THROW(op_builder("linear").build(linear_shape(2048, 2048, 2048), spec, {{"y_depth", 3}}),
               LimitError);
  // A K that one block of 64 already covers keeps two y objects: no gain.
  EXPECT_EQ(op_builder("linear").build(linear_shape(2048, 64, 2048), spec).tiles.at("y_depth"), 2);
}

// Decode weights stream over every shim MM2S channel but the one x takes.
// A decode GEMV's columns share nothing once x has landed, so the simulator
// runs them side by side on host threads (issue 16). That must not change a
// byte of host memory or any count: every launch's stats are compared with
// the serial order's, field by field. Ragged outputs (301, SmolLM2's 192)
// end with a column block shifted back to the last row, which rewrites rows
// of the block before it: those writes are held back and land after the
// columns (ThreadSanitizer found the two threads writing the same bytes),
// and the columns must still run apart. Each shape runs twice, the second
// run replaying the first's trace.
TEST(LinearBuilder, DecodeColumnsOnHostThreadsGiveTheSerialResult) {
  if (thread_count() < 2) GTEST_SKIP() << "one host thread: every launch runs serially";
  const auto spec = npu::DeviceSpec::preset("xdna2");
  ensure_tile_kernels_registered();
  // Each over the 64 KiB of weights at which a launch is worth a thread.
  // y row-major (kRowMajorOutTile) as the executor asks for it.
  for (const auto& [K, N, rows] : {std::tuple<int64_t, int64_t, int>{2048, 1024, 0}, {1000, 301, 1}, {576, 192, 1},
                                   {4096, 301, 1}, {1536, 576, 1}}) {
    SCOPED_TRACE(fmt::format("K {} N {} y row-major {}", K, N, rows));
    const BuiltOp built = op_builder("linear").build(linear_shape(1, K, N), spec, {{kRowMajorOutTile, rows}});
    ASSERT_FALSE(built.patch);
    const auto x = bf16_values(static_cast<size_t>(K), 1), w = bf16_values(static_cast<size_t>(K * N), 2);
    auto run = [&](bool partitions) {
      npu::Simulator sim(spec);
      sim.set_host_partitions(partitions);
      const auto prepared = sim.prepare(built.design);
      std::vector<std::pair<npu::HostMemory, npu::SimStats>> runs;
      for (int r = 0; r < 2; ++r) {
        npu::HostMemory host;
        for (const auto& h : built.design.host_buffers) host_bytes(built.design, h.name, host);
        built.pack(0, x, host);
        built.pack(1, w, host);
        npu::SimStats stats = sim.run(*prepared, host);
        runs.emplace_back(std::move(host), std::move(stats));
      }
      return runs;
    };
    const auto threaded = run(true);
    const auto serial = run(false);
    for (size_t r = 0; r < threaded.size(); ++r) {
      SCOPED_TRACE(r == 0 ? "interpreted" : "replayed");
      const auto& [threaded_host, a_stats] = threaded[r];
      const auto& [serial_host, b_stats] = serial[r];
      EXPECT_TRUE(threaded_host == serial_host);
      ASSERT_EQ(a_stats.launches.size(), b_stats.launches.size());
      for (size_t i = 0; i < b_stats.launches.size(); ++i) {
        const npu::LaunchStats &a = a_stats.launches[i], &b = b_stats.launches[i];
        SCOPED_TRACE(b.name);
        EXPECT_EQ(a.host_partitions, spec.columns);  // every column ran apart
        EXPECT_EQ(b.host_partitions, 0);
        EXPECT_EQ(a.ddr_read_bytes, b.ddr_read_bytes);
        EXPECT_EQ(a.ddr_write_bytes, b.ddr_write_bytes);
        EXPECT_EQ(a.l2_bytes, b.l2_bytes);
        EXPECT_EQ(a.l1_bytes, b.l1_bytes);
        EXPECT_EQ(a.transfers, b.transfers);
        EXPECT_TRUE(a.tiles == b.tiles);
        EXPECT_TRUE(a.channels == b.channels);
      }
      const auto y = built.unpack(0, threaded_host);
      std::vector<float> ref(static_cast<size_t>(N));
      oracle::linear(x.data(), 1, K, w.data(), N, nullptr, ref.data());
      EXPECT_TRUE(test::within(test::to_f64(y), test::to_f64(ref), test::linear_bound(x, w, ref, 1, K, N)));
    }
  }
}

TEST(LinearBuilder, DecodeWeightsUseBothShimChannelsOfEveryColumn) {
  for (const auto& name : {"xdna2", "xdna1"}) {
    auto spec = npu::DeviceSpec::preset(name);
    LinearPlan p = plan_linear(1, 2048, 8192, spec);
    EXPECT_EQ(p.streams(), spec.columns * spec.shim.dma_out - 1) << name;
    EXPECT_TRUE(p.x_resident) << name;
    BuiltOp b = op_builder("linear").build(linear_shape(1, 2048, 8192), spec);
    std::map<int, int> mm2s;  // shim column -> FIFOs it produces
    for (const auto& f : b.design.launches.at(0).fifos)
      if (f.producer.row == 0) ++mm2s[f.producer.col];
    for (int c = 0; c < spec.columns; ++c) EXPECT_EQ(mm2s[c], spec.shim.dma_out) << name << " col " << c;
  }
}

// The decode projections of llama-3.2-1b and its LM head are bound by DDR and
// move their bytes at >= 80 % of the spec's DDR rate over the launch (the
// dispatch overhead excluded); with one channel per column they were port
// bound (8 ports x 4 B/cycle x 1.5 GHz = 48 GB/s < 60).
TEST(LinearBuilder, DecodeLinearsStreamAtTheDdrRate) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  for (auto [K, N] : {std::pair<int64_t, int64_t>{2048, 2048}, {2048, 512}, {2048, 8192},
                      {8192, 2048}, {2048, 128256}}) {
    SCOPED_TRACE(fmt::format("K={} N={}", K, N));
    BuiltOp b = op_builder("linear").build(linear_shape(1, K, N), spec);
    npu::DispatchTiming t = npu::estimate_time(b.design, spec);
    EXPECT_EQ(t.launches.at(0).bound, "ddr");
    const double launch = t.total_seconds - t.overhead_seconds;
    EXPECT_GE(static_cast<double>(t.ddr_bytes) / launch, 0.8 * spec.ddr_bytes_per_second);
    EXPECT_GE(t.ddr_bytes, K * N * 2);  // every weight byte crosses DDR
  }
}

TEST(LinearBuilder, MultiLaunchPlanAndPaddingAreWhatTheTestsAssume) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  LinearPlan p = plan_linear(300, 128, 40, spec, {{"m", 4}, {"k", 64}, {"panel", 0}});
  EXPECT_TRUE(p.gemm);
  EXPECT_GT(p.S, p.s_per_launch);  // the cases above really span launches
  LinearPlan q = plan_linear(4100, 8, 8, spec, {{"m", 4}});
  EXPECT_TRUE(q.panel);
  EXPECT_GT(q.S, q.s_per_launch);
  LinearPlan d = plan_linear(1, 5000, 700, spec, {{"k", 1024}});
  EXPECT_GT(d.kb, 1);  // and the decode cases really split K
  EXPECT_GT(plan_linear(1, 30000, 40, spec).kb, 1);
  EXPECT_GE(d.Np(), 700);
  EXPECT_GE(d.Kp(), 5000);
}

TEST(LinearBuilder, UsesEveryComputeTileAndFitsL1) {
  for (const auto& name : {"xdna2", "xdna1"}) {
    auto spec = npu::DeviceSpec::preset(name);
    for (auto [M, K, N] : {std::tuple{1, 2048, 8192}, {2048, 2048, 8192}, {1, 3072, 151936}}) {
      LinearPlan p = plan_linear(M, K, N, spec);
      EXPECT_EQ(p.C * p.R, spec.compute_tiles()) << name << " M=" << M;
      EXPECT_LE(p.l1_bytes(), spec.compute.memory_bytes);
    }
  }
}

TEST(LinearBuilder, ImpossibleShapesAreLimitErrorsNamingTheOp) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  try {
    op_builder("linear").build(linear_shape(1, 64, 64), spec, {{"n", 4096}});
    FAIL() << "expected LimitError";
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find("linear M=1 K=64 N=64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(op_builder("linear").build(linear_shape(0, 64, 64), spec), LimitError);
}

// Every linear the presets need, at seq 1, 17 and 2048: builds (the builder
// validates) and has a timing estimate; decode shapes are also simulated at
// M = 1 except the LM head (too slow for a unit test under ASan).
TEST(LinearBuilder, EveryPresetShapeBuildsAndValidates) {
  std::set<std::tuple<int64_t, int64_t, int64_t>> shapes;
  for (const auto& name : model::preset_names()) {
    model::ModelConfig c = model::preset(name);
    for (int64_t S : {1, 17, 2048}) {
      for (auto [K, N] : {std::pair{c.hidden_size, c.q_dim()}, {c.hidden_size, c.kv_dim()},
                          {c.q_dim(), c.hidden_size}, {c.hidden_size, c.intermediate_size},
                          {c.intermediate_size, c.hidden_size}})
        shapes.insert({S, K, N});
    }
    shapes.insert({1, c.hidden_size, c.vocab_size});
  }
  for (const auto& dev : {"xdna2", "xdna1"}) {
    auto spec = npu::DeviceSpec::preset(dev);
    for (auto [M, K, N] : shapes) {
      SCOPED_TRACE(fmt::format("{} M={} K={} N={}", dev, M, K, N));
      BuiltOp b = op_builder("linear").build(linear_shape(M, K, N), spec);
      npu::DispatchTiming t = npu::estimate_time(b.design, spec);
      EXPECT_GT(t.total_seconds, 0);
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
