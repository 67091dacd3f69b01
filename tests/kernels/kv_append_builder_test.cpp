// kv_append builder: new rows land bit-exact at rows pos..pos+M-1 of the cache
// and every other cache row is untouched (padded rows of the tiling write the
// cache's own values back), for ragged M, both device presets; every preset's
// prefill / decode append builds and validates.
#include <algorithm>
#include <bit>

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/npu/kernel_registry.h"
#include "tessera/model/config.h"
#include "tessera/npu/timing.h"

namespace tessera::kernels {
namespace {

using test::bf16_values;

OpShape kv_shape(int64_t M, int64_t T, int64_t pos, int64_t kv) {
  return {"kv_append", {{"M", M}, {"T", T}, {"pos", pos}, {"kv_dim", kv}}, {}};
}

class KvAppendBuilder : public ::testing::TestWithParam<const char*> {};

TEST_P(KvAppendBuilder, WritesExactlyTheNewRows) {
  auto spec = npu::DeviceSpec::preset(GetParam());
  for (auto [M, T, pos, kv] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 40, 39, 128},
                               {1, 40, 0, 64}, {17, 50, 3, 192}, {45, 45, 0, 256},
                               {37, 100, 60, 128}}) {
    SCOPED_TRACE(fmt::format("kv_append M={} T={} pos={} kv={} on {}", M, T, pos, kv, spec.name));
    auto fresh = bf16_values(static_cast<size_t>(M * kv), 11);
    auto cache = bf16_values(static_cast<size_t>(T * kv), 12);
    OpRun run = run_op(op_builder("kv_append").build(kv_shape(M, T, pos, kv), spec),
                       {fresh, cache}, spec);
    std::vector<float> want = cache;
    std::copy(fresh.begin(), fresh.end(), want.begin() + pos * kv);
    ASSERT_EQ(run.outputs.at(0).size(), want.size());
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += run.outputs[0][i] != want[i];
    EXPECT_EQ(bad, 0u);
  }
}

// "cache_rows": the cache buffer has exactly that many rows at every T, the
// new rows still land exactly, and a cache shorter than the run is refused.
TEST_P(KvAppendBuilder, ResidentCacheRowsFixTheBuffer) {
  auto spec = npu::DeviceSpec::preset(GetParam());
  for (auto [M, T, pos] : {std::tuple<int64_t, int64_t, int64_t>{1, 40, 39}, {1, 41, 40}, {5, 60, 55}}) {
    SCOPED_TRACE(fmt::format("M={} T={} pos={}", M, T, pos));
    const int64_t kv = 128;
    BuiltOp b = op_builder("kv_append").build(kv_shape(M, T, pos, kv), spec, {{"cache_rows", 256}});
    EXPECT_EQ(b.tiles.at("cache_rows"), 256);
    int64_t bytes = 0;
    for (const auto& h : b.design.host_buffers)
      if (h.name == "cache") bytes = h.bytes;
    EXPECT_EQ(bytes, 256 * kv * 2);
    auto fresh = bf16_values(static_cast<size_t>(M * kv), 11);
    auto cache = bf16_values(static_cast<size_t>(T * kv), 12);
    OpRun run = run_op(b, {fresh, cache}, spec);
    std::vector<float> want = cache;
    std::copy(fresh.begin(), fresh.end(), want.begin() + pos * kv);
    EXPECT_EQ(run.outputs.at(0), want);
  }
  EXPECT_THROW(op_builder("kv_append").build(kv_shape(1, 40, 39, 128), spec, {{"cache_rows", 39}}),
               LimitError);
}

// cache_head_dim = D: the resident cache is head-major, [kv_dim / D][R][D];
// the logical result is the row-major append, and the buffer itself holds
// row t of head h at (h * R + t) * D (what the attention's shim reads).
TEST_P(KvAppendBuilder, HeadMajorCacheKeepsEachHeadContiguous) {
  auto spec = npu::DeviceSpec::preset(GetParam());
  const int64_t kv = 128, D = 32, R = 256;
  for (auto [M, T, pos] : {std::tuple<int64_t, int64_t, int64_t>{1, 40, 39}, {5, 60, 55}}) {
    SCOPED_TRACE(fmt::format("M={} T={} pos={}", M, T, pos));
    BuiltOp b = op_builder("kv_append").build(kv_shape(M, T, pos, kv), spec,
                                              {{"cache_rows", R}, {"cache_head_dim", D}});
    EXPECT_EQ(b.tiles.at("cache_head_dim"), D);
    auto fresh = bf16_values(static_cast<size_t>(M * kv), 11);
    auto cache = bf16_values(static_cast<size_t>(T * kv), 12);
    ensure_tile_kernels_registered();
    npu::HostMemory host;
    for (const auto& h : b.design.host_buffers) host_bytes(b.design, h.name, host);
    b.pack(0, fresh, host);
    b.pack(1, cache, host);
    npu::Simulator(spec, npu::KernelRegistry::global()).run(b.design, host);
    std::vector<float> want = cache;
    std::copy(fresh.begin(), fresh.end(), want.begin() + pos * kv);
    EXPECT_EQ(b.unpack(0, host), want);
    const bf16* buf = host_bf16(b.design, "cache", host);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < kv; ++e)
        ASSERT_EQ(bf16_to_f32(buf[(e / D * R + t) * D + e % D]), want[t * kv + e]) << t << " " << e;
  }
  EXPECT_THROW(op_builder("kv_append").build(kv_shape(1, 40, 39, 128), spec, {{"cache_head_dim", 32}}),
               LimitError);  // head-major needs the resident rows
  EXPECT_THROW(op_builder("kv_append").build(kv_shape(1, 40, 39, 128), spec,
                                             {{"cache_rows", 256}, {"cache_head_dim", 48}}),
               LimitError);  // heads that do not tile kv_dim
}

// unpack_rows gives rows [first, first + count) exactly as unpack() has
// them, in the plain, resident and head-major caches, at the ends and past
// them (an InternalError): a decode session reads back only its new rows.
TEST_P(KvAppendBuilder, RowsUnpackedAloneEqualThoseOfTheWholeCache) {
  auto spec = npu::DeviceSpec::preset(GetParam());
  const int64_t M = 5, T = 60, pos = 55, kv = 128;
  const std::vector<TileOptions> layouts = {{}, {{"cache_rows", 256}}, {{"cache_rows", 256}, {"cache_head_dim", 32}}};
  for (const TileOptions& tiles : layouts) {
    SCOPED_TRACE(fmt::format("tiles {}", tiles.size()));
    BuiltOp b = op_builder("kv_append").build(kv_shape(M, T, pos, kv), spec, tiles);
    ASSERT_TRUE(b.unpack_rows);
    ensure_tile_kernels_registered();
    npu::HostMemory host;
    for (const auto& h : b.design.host_buffers) host_bytes(b.design, h.name, host);
    b.pack(0, bf16_values(static_cast<size_t>(M * kv), 11), host);
    b.pack(1, bf16_values(static_cast<size_t>(T * kv), 12), host);
    npu::Simulator(spec, npu::KernelRegistry::global()).run(b.design, host);
    const std::vector<float> whole = b.unpack(0, host);
    for (auto [first, count] : {std::pair<int64_t, int64_t>{pos, M}, {0, 1}, {T - 1, 1}, {0, T}, {7, 0}}) {
      const std::vector<float> want(whole.begin() + first * kv, whole.begin() + (first + count) * kv);
      EXPECT_EQ(b.unpack_rows(0, host, first, count), want) << "rows " << first << " + " << count;
    }
    EXPECT_THROW(b.unpack_rows(0, host, T - 1, 2), InternalError);
    EXPECT_THROW(b.unpack_rows(0, host, -1, 1), InternalError);
  }
}

// pack_rows(first) writes what pack() writes except the cache rows before
// `first`, which it leaves as they are (the executor's resident image holds
// them): the padded stream rows it fills from the cache are pack()'s too.
TEST_P(KvAppendBuilder, PackRowsLeavesTheRowsBeforeFirstInPlace) {
  auto spec = npu::DeviceSpec::preset(GetParam());
  const int64_t M = 1, T = 60, pos = 59, kv = 128, first = 50;
  BuiltOp b = op_builder("kv_append").build(kv_shape(M, T, pos, kv), spec, {{"cache_rows", 256}, {"cache_head_dim", 32}});
  ASSERT_TRUE(b.pack_rows);
  const auto fresh = bf16_values(static_cast<size_t>(M * kv), 11);
  const auto cache = bf16_values(static_cast<size_t>(T * kv), 12);
  npu::HostMemory whole, rows;
  for (auto* h : {&whole, &rows})
    for (const auto& buf : b.design.host_buffers) host_bytes(b.design, buf.name, *h);
  for (std::byte& x : rows.at("cache")) x = std::byte{0x5a};
  b.pack(0, fresh, whole);
  b.pack(1, cache, whole);
  b.pack(0, fresh, rows);
  b.pack_rows(1, cache, rows, first);
  for (const auto& buf : b.design.host_buffers) {
    if (buf.name == "cache") continue;
    EXPECT_EQ(rows.at(buf.name), whole.at(buf.name)) << buf.name;
  }
  EXPECT_EQ(b.unpack_rows(0, rows, first, T - first), b.unpack_rows(0, whole, first, T - first));
  const std::vector<float> before = b.unpack_rows(0, rows, 0, first);
  EXPECT_TRUE(std::all_of(before.begin(), before.end(), [](float x) { return std::bit_cast<uint32_t>(x) == 0x5a5a0000u; }))
      << "pack_rows wrote a row before " << first;
}

INSTANTIATE_TEST_SUITE_P(Devices, KvAppendBuilder, ::testing::Values("xdna2", "xdna1"));

TEST(KvAppendBuilderLimits, AppendPastTheCacheIsALimitError) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  EXPECT_THROW(op_builder("kv_append").build(kv_shape(4, 10, 7, 64), spec), LimitError);
}

TEST(KvAppendBuilderLimits, EveryPresetShapeBuildsAndValidates) {
  for (const auto& dev : {"xdna2", "xdna1"}) {
    auto spec = npu::DeviceSpec::preset(dev);
    for (const auto& name : model::preset_names()) {
      model::ModelConfig c = model::preset(name);
      for (auto [M, pos] : {std::pair<int64_t, int64_t>{1, 2047}, {17, 0}, {2048, 0}}) {
        OpShape s = kv_shape(M, 2048, pos, c.kv_dim());
        SCOPED_TRACE(fmt::format("{} {} {}", dev, name, s.key()));
        BuiltOp b = op_builder("kv_append").build(s, spec);
        EXPECT_GT(npu::estimate_time(b.design, spec).total_seconds, 0);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
