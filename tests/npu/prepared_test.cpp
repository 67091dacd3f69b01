// Simulator::prepare: a design validated and lowered once runs any number of
// times exactly as Simulator::run(design) would, each run on fresh tile memory.
#include <gtest/gtest.h>

#include "npu_a_fixtures.h"
#include "tessera/npu/simulator.h"

namespace tessera::npu {
namespace {

using namespace build;
using testing::iota_bytes;
using testing::passthrough_design;
using testing::test_kernels;
using testing::u16_at;

Simulator sim() { return Simulator(DeviceSpec::preset("xdna2-sourced"), test_kernels()); }

void expect_same_stats(const SimStats& a, const SimStats& b) {
  ASSERT_EQ(a.launches.size(), b.launches.size());
  for (size_t i = 0; i < a.launches.size(); ++i) {
    const LaunchStats &x = a.launches[i], &y = b.launches[i];
    EXPECT_EQ(x.ddr_read_bytes, y.ddr_read_bytes);
    EXPECT_EQ(x.ddr_write_bytes, y.ddr_write_bytes);
    EXPECT_EQ(x.l1_bytes, y.l1_bytes);
    EXPECT_EQ(x.l2_bytes, y.l2_bytes);
    EXPECT_EQ(x.transfers, y.transfers);
    ASSERT_EQ(x.tiles.size(), y.tiles.size());
    for (const auto& [t, s] : x.tiles) {
      EXPECT_EQ(s.kernel_calls, y.tiles.at(t).kernel_calls);
      EXPECT_EQ(s.cycles, y.tiles.at(t).cycles);
    }
    ASSERT_EQ(x.channels.size(), y.channels.size());
    for (size_t c = 0; c < x.channels.size(); ++c) EXPECT_EQ(x.channels[c].bytes, y.channels[c].bytes);
  }
}

TEST(PreparedDesign, RepeatedRunsMatchPlainRuns) {
  const Simulator s = sim();
  Design d = passthrough_design(4, 256, "t_add_one");
  auto prepared = s.prepare(d);
  for (uint16_t start : {1, 500, 9}) {
    HostMemory plain{{"in", iota_bytes(512, start)}}, ready{{"in", iota_bytes(512, start)}};
    SimStats a = s.run(d, plain);
    SimStats b = s.run(*prepared, ready);
    EXPECT_EQ(plain, ready) << start;
    expect_same_stats(a, b);
    for (int64_t i = 0; i < 512; ++i) ASSERT_EQ(u16_at(ready.at("out"), i), u16_at(ready.at("in"), i) + 1);
  }
}

// Every run starts from poisoned tile memory, as a plain run does: an
// accumulator nobody zeroes gives the same garbage each time, never the
// previous run's sums.
TEST(PreparedDesign, TileMemoryStartsPoisonedOnEveryRun) {
  Design d = passthrough_design(1, 64);
  Launch& l = d.launches[0];
  d.host_buffers[0].bytes = 4 * 64;
  d.host_buffers[1].bytes = 64;
  l.buffers = {{"acc", {0, 2}, 32 * 4, -1}};
  l.cores[0].program = {
      loop(4, {acquire_in("in_l1"), call("t_acc", {"in_l1", "acc"}, {{"n", int64_t{32}}}), release_in("in_l1")}),
      acquire_out("out_l1"), call("t_store", {"acc", "out_l1"}, {{"n", int64_t{32}}}), release_out("out_l1")};
  const Simulator s = sim();
  auto prepared = s.prepare(d);
  HostMemory first{{"in", iota_bytes(128)}}, second{{"in", iota_bytes(128)}}, plain{{"in", iota_bytes(128)}};
  s.run(*prepared, first);
  s.run(*prepared, second);
  s.run(d, plain);
  EXPECT_EQ(first.at("out"), plain.at("out"));
  EXPECT_EQ(second.at("out"), plain.at("out"));
}

// Tile memory is not re-poisoned whole per run, only where a launch could
// read before writing: a DMA that lands half of each object leaves the other
// half poison on every run, even after another design wrote data there.
TEST(PreparedDesign, BytesNoDmaLandsReadAsPoisonAfterOtherRunsWroteThem) {
  Design half = passthrough_design(1, 64);
  Fifo& in_l1 = half.launches[0].fifos[1];
  in_l1.producer_pattern = pattern({{16, 1}});  // 16 of the object's 32 elements
  in_l1.consumer_patterns = {pattern({{16, 1}})};
  const Simulator s = sim();
  auto prepared = s.prepare(half);
  for (int round = 0; round < 2; ++round) {
    HostMemory full{{"in", iota_bytes(32, 3)}};
    s.run(passthrough_design(1, 64), full);  // fills the same L1 pool with data
    ASSERT_EQ(full.at("out"), full.at("in"));
    HostMemory host{{"in", iota_bytes(32, 5)}};
    s.run(*prepared, host);
    for (int64_t i = 0; i < 32; ++i)
      ASSERT_EQ(u16_at(host.at("out"), i), i < 16 ? u16_at(host.at("in"), i) : 0xFFFF) << round << " " << i;
  }
}

TEST(PreparedDesign, OnlyItsOwnSimulatorRunsIt) {
  const Simulator a = sim(), b = sim();
  auto prepared = a.prepare(passthrough_design());
  HostMemory host{{"in", iota_bytes(512)}};
  EXPECT_THROW(b.run(*prepared, host), InternalError);
  const Simulator copy = a;  // same spec and registry
  EXPECT_NO_THROW(copy.run(*prepared, host));
}

TEST(PreparedDesign, PrepareValidates) {
  Design d = passthrough_design();
  d.launches[0].cores[0].program.push_back(call("no_such_kernel", {}));
  EXPECT_THROW(sim().prepare(d), DesignError);
}

// A host buffer read by a to_device task and written by a from_device task of
// the same launch: a read is a snapshot taken when its task starts, so the
// simulator may read contiguous host data in place only when nothing in the
// launch writes it. Here the second read (all of buf) starts before the
// write-back of buf[2:4] + 1 lands, but streams buf[2:4] only after it: read
// in place, those objects would come back + 2.
TEST(PreparedDesign, HostReadsInPlaceOnlyWhenNothingWritesTheBuffer) {
  Design d = passthrough_design(6, 256, "t_add_one");
  d.host_buffers = {{"buf", 1024, 2}, {"out", 1024, 2}};
  DmaTask first = to_device("in_l2", "buf"), back = from_device("out_l2", "buf");
  first.pattern = back.pattern = pattern({{256, 1}}, 256, 1);  // objects 2 and 3
  d.launches[0].sequence = {first, back, to_device("in_l2", "buf"), from_device("out_l2", "out")};
  const std::vector<std::byte> in = iota_bytes(512);
  HostMemory host{{"buf", in}};
  sim().run(d, host);
  for (int64_t i = 0; i < 512; ++i) {
    ASSERT_EQ(u16_at(host.at("out"), i), u16_at(in, i) + 1) << i;
    ASSERT_EQ(u16_at(host.at("buf"), i), u16_at(in, i) + (i >= 256 ? 1 : 0)) << i;
  }
}

}  // namespace
}  // namespace tessera::npu
