// A row-wise op writing the blocked x layout of the gemm that reads it
// (rowwise.h GemmXLayout, activation_layout.h kGemmX*): after the simulated
// run its x_r buffers hold exactly the bytes the gemm's own pack() writes for
// the same values, and its values are the row-major variant's bit for bit.
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/kernels/activation_layout.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/npu/simulator.h"
#include "kernel_test_util.h"
#include "tessera/oracle/ops.h"

namespace tessera::kernels {
namespace {

std::vector<float> values(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = bf16_to_f32(f32_to_bf16(static_cast<float>((i * 37 + seed * 11) % 97 - 48) / 32.f));
  return v;
}

struct Ran {
  npu::HostMemory host;
  std::vector<float> y;
};

Ran run(const BuiltOp& op, const std::vector<std::vector<float>>& in, const npu::DeviceSpec& spec) {
  ensure_tile_kernels_registered();
  Ran r;
  for (const auto& h : op.design.host_buffers) host_bytes(op.design, h.name, r.host);
  for (size_t i = 0; i < in.size(); ++i) op.pack(i, in[i], r.host);
  npu::Simulator(spec, npu::KernelRegistry::global()).run(op.design, r.host);
  r.y = op.unpack(0, r.host);
  return r;
}

TileOptions gemm_x_of(const BuiltOp& gemm, int64_t m_shift = 0) {
  return {{kGemmXM, gemm.tiles.at("m") + m_shift}, {kGemmXK, gemm.tiles.at("k")},
          {kGemmXRows, gemm.tiles.at("rows")}, {"m", 1}};
}

// The producer's x_r buffers against the gemm's pack of the same values:
// how many x_r bytes differ (-1: a buffer the gemm packs is missing).
int64_t differing_bytes(const Ran& producer, const BuiltOp& gemm) {
  npu::HostMemory packed;
  for (const auto& h : gemm.design.host_buffers) host_bytes(gemm.design, h.name, packed);
  gemm.pack(0, producer.y, packed);
  int64_t diff = 0;
  for (const auto& [name, bytes] : packed) {
    if (!name.starts_with("x_r")) continue;
    auto it = producer.host.find(name);
    if (it == producer.host.end() || it->second.size() != bytes.size()) return -1;
    for (size_t i = 0; i < bytes.size(); ++i) diff += it->second[i] != bytes[i];
  }
  return diff;
}

// Blocks that tile the test shapes' K (a default k may not: then the layout
// is a LimitError, tested below); M stays ragged against rows * m.
const TileOptions kGemmTiles = {{"gemm", 1}, {"m", 16}, {"k", 64}, {"n", 64}};


class GemmXLayoutTest : public ::testing::TestWithParam<const char*> {
 protected:
  npu::DeviceSpec spec = npu::DeviceSpec::preset(GetParam());
};

TEST_P(GemmXLayoutTest, RmsnormWritesTheGemmsPackedX) {
  for (auto [M, H] : {std::pair<int64_t, int64_t>{192, 2048}, {256, 576}}) {
    SCOPED_TRACE(fmt::format("M={} H={}", M, H));
    const OpShape norm{"rmsnorm", {{"M", M}, {"H", H}}, {{"eps", 1e-5}}};
    const BuiltOp gemm = op_builder("linear").build({"linear", {{"M", M}, {"K", H}, {"N", 256}}, {}},
                                                    spec, kGemmTiles);
    const auto x = values(M * H, 1), w = values(H, 2);
    const Ran plain = run(op_builder("rmsnorm").build(norm, spec, {{kRowMajorTile, 1}}), {x, w}, spec);
    const Ran blocked = run(op_builder("rmsnorm").build(norm, spec, gemm_x_of(gemm)), {x, w}, spec);
    EXPECT_EQ(blocked.y, plain.y);
    EXPECT_EQ(differing_bytes(blocked, gemm), 0);
  }
}

// silu_mul streams flat rows of 512 elements: its runs start and end inside
// the gemm's rows, on k-block boundaries.
TEST_P(GemmXLayoutTest, SiluMulFlatRowsWriteTheGemmsPackedX) {
  for (auto [M, N] : {std::pair<int64_t, int64_t>{64, 4096}, {128, 2048}}) {
    SCOPED_TRACE(fmt::format("M={} N={}", M, N));
    const OpShape act{"silu_mul", {{"M", M}, {"N", N}}, {}};
    const BuiltOp gemm = op_builder("linear").build({"linear", {{"M", M}, {"K", N}, {"N", 128}}, {}},
                                                    spec, kGemmTiles);
    const auto g = values(M * N, 3), u = values(M * N, 4);
    const Ran plain = run(op_builder("silu_mul").build(act, spec, {{kRowMajorTile, 1}}), {g, u}, spec);
    const Ran blocked = run(op_builder("silu_mul").build(act, spec, gemm_x_of(gemm)), {g, u}, spec);
    EXPECT_EQ(blocked.y, plain.y);
    EXPECT_EQ(differing_bytes(blocked, gemm), 0);
  }
}

// Unless given m, the producer takes the largest block whose objects tile the
// gemm's row groups (a task moves whole objects): silu_mul's L1-filling block
// of flat 512-element rows (7 rows x 4 tiles on xdna2) cuts the groups of
// 8 x 2560 here, and given that block (planted) the layout is refused.
TEST_P(GemmXLayoutTest, DefaultBlockTilesTheGemmsRowGroups) {
  const int64_t M = 40, N = 2560;
  const OpShape act{"silu_mul", {{"M", M}, {"N", N}}, {}};
  TileOptions eight = kGemmTiles;
  eight["m"] = 8;  // every one of the gemm's 4 x buffers holds rows (M >= 4 x 8)
  const BuiltOp gemm = op_builder("linear").build({"linear", {{"M", M}, {"K", N}, {"N", 128}}, {}},
                                                  spec, eight);
  TileOptions x = gemm_x_of(gemm);
  x.erase("m");
  const BuiltOp plain_op = op_builder("silu_mul").build(act, spec, {{kRowMajorTile, 1}});
  const BuiltOp blocked_op = op_builder("silu_mul").build(act, spec, x);
  const int64_t group = gemm.tiles.at("m") * N;
  auto object = [](const BuiltOp& b, int64_t m) { return b.tiles.at("rows") * m * 512; };
  EXPECT_EQ(group % object(blocked_op, blocked_op.tiles.at("m")), 0);
  const auto g = values(M * N, 3), u = values(M * N, 4);
  const Ran plain = run(plain_op, {g, u}, spec);
  const Ran blocked = run(blocked_op, {g, u}, spec);
  EXPECT_EQ(blocked.y, plain.y);
  EXPECT_EQ(differing_bytes(blocked, gemm), 0);
  const int64_t filling = plain_op.tiles.at("m");
  if (spec.name == "xdna2") {
    ASSERT_NE(group % object(plain_op, filling), 0) << "the shape exercises nothing";
  }
  if (group % object(plain_op, filling) != 0) {
    x["m"] = filling;
    EXPECT_THROW(op_builder("silu_mul").build(act, spec, x), LimitError);
  }
}

// Rows that flat rows of 512 do not tile (Qwen2.5's down K = 4864 and
// 11008; here K = 19 and 21 blocks of 64, M ragged against the gemm's 4 x 16
// rows): a column's run or a launch (a few steps: two stream tasks a step)
// would start inside a row, and that piece is no whole object (refused). The builder takes objects of whole rows instead
// (a width dividing them); against the row-major variant, the gemm's own
// pack and oracle::swiglu (the bound of elementwise_builders_test).
TEST_P(GemmXLayoutTest, FlatRowsThatDoNotTileTheGemmsRowsTakeWholeRowObjects) {
  for (auto [M, N] : {std::pair<int64_t, int64_t>{200, 1216}, {72, 1344}}) {
    SCOPED_TRACE(fmt::format("M={} N={}", M, N));
    const OpShape act{"silu_mul", {{"M", M}, {"N", N}}, {}};
    const BuiltOp gemm = op_builder("linear").build({"linear", {{"M", M}, {"K", N}, {"N", 128}}, {}},
                                                    spec, kGemmTiles);
    TileOptions x = gemm_x_of(gemm);
    x.erase("m");
    const BuiltOp blocked_op = op_builder("silu_mul").build(act, spec, x);
    const auto g = values(M * N, 3), u = values(M * N, 4);
    const Ran plain = run(op_builder("silu_mul").build(act, spec, {{kRowMajorTile, 1}}), {g, u}, spec);
    const Ran blocked = run(blocked_op, {g, u}, spec);
    EXPECT_EQ(blocked.y, plain.y);
    EXPECT_EQ(differing_bytes(blocked, gemm), 0);
    std::vector<float> ref(g.size());
    oracle::swiglu(g.data(), u.data(), M * N, ref.data());
    int64_t outside = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      outside += std::fabs(double{blocked.y[i]} - ref[i]) > std::fabs(ref[i]) * (2 * test::kUBf16 + 8 * test::kU32) + 1e-38;
    EXPECT_EQ(outside, 0);
  }
}

// Planted: the producer blocks for another gemm's m; the comparison sees it.
TEST_P(GemmXLayoutTest, AnotherGemmsBlockingIsSeen) {
  const int64_t M = 192, H = 2048;
  const OpShape norm{"rmsnorm", {{"M", M}, {"H", H}}, {{"eps", 1e-5}}};
  const BuiltOp gemm = op_builder("linear").build({"linear", {{"M", M}, {"K", H}, {"N", 256}}, {}},
                                                  spec, kGemmTiles);
  const Ran other = run(op_builder("rmsnorm").build(norm, spec, gemm_x_of(gemm, gemm.tiles.at("m") > 8 ? -8 : 8)),
                        {values(M * H, 1), values(H, 2)}, spec);
  EXPECT_NE(differing_bytes(other, gemm), 0);
}

TEST_P(GemmXLayoutTest, RefusesWhatItCannotWriteAsLimitErrors) {
  // M = 130 ends in a re-read object that straddles a group of the gemm's rows.
  const BuiltOp gemm = op_builder("linear").build({"linear", {{"M", 130}, {"K", 2048}, {"N", 256}}, {}},
                                                  spec, kGemmTiles);
  EXPECT_THROW(op_builder("rmsnorm").build({"rmsnorm", {{"M", 130}, {"H", 2048}}, {{"eps", 1e-5}}},
                                           spec, gemm_x_of(gemm)),
               LimitError);
  const OpShape norm{"rmsnorm", {{"M", 64}, {"H", 576}}, {{"eps", 1e-5}}};
  // K = 576 is not whole k = 128 blocks.
  EXPECT_THROW(op_builder("rmsnorm").build(norm, spec, {{kGemmXM, 16}, {kGemmXK, 128}, {kGemmXRows, 4}}),
               LimitError);
  // rope splits rows over heads with a side table: no gemm x output.
  const OpShape rope{"rope", {{"M", 64}, {"heads", 4}, {"head_dim", 64}}, {}};
  EXPECT_THROW(op_builder("rope").build(rope, spec, {{kGemmXM, 16}, {kGemmXK, 64}, {kGemmXRows, 4}}),
               LimitError);
}

INSTANTIATE_TEST_SUITE_P(Devices, GemmXLayoutTest, ::testing::Values("xdna2", "xdna1"));

}  // namespace
}  // namespace tessera::kernels
