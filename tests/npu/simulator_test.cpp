#include "tessera/npu/simulator.h"

#include <gtest/gtest.h>

#include "npu_a_fixtures.h"
#include "tessera/npu/timing.h"
#include "tessera/npu/validator.h"

namespace tessera::npu {
namespace {

using namespace build;
using testing::iota_bytes;
using testing::passthrough_design;
using testing::test_kernels;
using testing::u16_at;

SimStats run(const Design& d, HostMemory& host) {
  return Simulator(DeviceSpec::preset("xdna2-sourced"), test_kernels()).run(d, host);
}

std::vector<uint32_t> as_u32(const std::vector<std::byte>& b) {
  std::vector<uint32_t> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

std::vector<std::byte> u32_bytes(const std::vector<uint32_t>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(Simulator, PassthroughShimMemComputeMemShimIsBitExact) {
  Design d = passthrough_design(4, 256);
  HostMemory host{{"in", iota_bytes(512)}};
  SimStats s = run(d, host);
  EXPECT_EQ(host.at("out"), host.at("in"));
  ASSERT_EQ(s.launches.size(), 1u);
  const LaunchStats& l = s.launches[0];
  EXPECT_EQ(l.ddr_read_bytes, 1024);
  EXPECT_EQ(l.ddr_write_bytes, 1024);
  EXPECT_EQ(l.l2_bytes, 4 * 1024);  // in and out each pass L2 once in, once out
  EXPECT_EQ(l.l1_bytes, 2 * 1024);
  EXPECT_EQ(l.tiles.at({0, 2}).kernel_calls, 4);
  EXPECT_EQ(l.tiles.at({0, 2}).cycles, 400);
  int64_t shim_bytes = 0;
  for (const auto& c : l.channels)
    if (c.tile == TileCoord{0, 0}) shim_bytes += c.bytes;
  EXPECT_EQ(shim_bytes, 2048);
}

TEST(Simulator, KernelResultsReachHost) {
  Design d = passthrough_design(3, 128, "t_add_one");
  HostMemory host{{"in", iota_bytes(192)}};
  run(d, host);
  for (int64_t i = 0; i < 192; ++i) ASSERT_EQ(u16_at(host.at("out"), i), u16_at(host.at("in"), i) + 1) << i;
}

// Read-only host views (mapped packed weights): the DMAs read the viewed
// bytes in place, nothing is copied into host memory, and every misuse is
// refused before anything runs.
TEST(Simulator, HostViewsAreReadInPlaceAndNeverWritten) {
  const Simulator sim(DeviceSpec::preset("xdna2-sourced"), test_kernels());
  Design d = passthrough_design(3, 128, "t_add_one");
  const std::vector<std::byte> in = iota_bytes(192);
  HostViews views{{"in", std::span<const std::byte>(in)}};
  HostMemory host;
  sim.run(d, host, &views);
  EXPECT_EQ(host.count("in"), 0u) << "the view was copied into host memory";
  for (int64_t i = 0; i < 192; ++i) ASSERT_EQ(u16_at(host.at("out"), i), u16_at(in, i) + 1) << i;

  auto refused = [&](HostViews v, HostMemory h, const std::string& want) {
    try {
      sim.run(d, h, &v);
      ADD_FAILURE() << "no error; expected one mentioning " << want;
    } catch (const SimulationError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused({{"in", std::span<const std::byte>(in).first(100)}}, {}, "holds 100 bytes, the design declares 384");
  refused({{"in", std::span<const std::byte>(in)}}, {{"in", in}}, "both a read-only view and host memory");
  std::vector<std::byte> out(in.size());
  refused({{"out", std::span<const std::byte>(out)}}, {{"in", in}}, "writes host buffer 'out'");
}

TEST(Simulator, BroadcastFeedsEveryConsumer) {
  Design d;
  d.name = "broadcast";
  d.host_buffers = {{"in", 512, 2}, {"a", 512, 2}, {"b", 512, 2}};
  Launch l;
  l.name = "bc";
  l.fifos = {fifo("in_l2", {0, 0}, {{0, 1}}, 256), fifo("in_l1", {0, 1}, {{0, 2}, {1, 2}}, 256),
             fifo("out_a", {0, 2}, {{0, 0}}, 256), fifo("out_b", {1, 2}, {{1, 0}}, 256)};
  l.links = {{{0, 1}, {"in_l2"}, {"in_l1"}, {}}};
  auto prog = [](const char* k, const char* out) {
    return std::vector<CoreOp>{loop(2, {acquire_in("in_l1"), acquire_out(out), call(k, {"in_l1", out}),
                                        release_in("in_l1"), release_out(out)})};
  };
  l.cores = {{{0, 2}, prog("t_copy", "out_a")}, {{1, 2}, prog("t_add_one", "out_b")}};
  l.sequence = {to_device("in_l2", "in"), from_device("out_a", "a"), from_device("out_b", "b")};
  d.launches = {l};
  HostMemory host{{"in", iota_bytes(256)}};
  SimStats s = run(d, host);
  EXPECT_EQ(host.at("a"), host.at("in"));
  for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(u16_at(host.at("b"), i), u16_at(host.at("in"), i) + 1);
  // The mem tile reads each object once for both consumers (stream broadcast).
  EXPECT_EQ(s.launches[0].l2_bytes, 512 + 512);
}

Design split_join_design(std::vector<int64_t> join_offsets) {
  Design d;
  d.name = "split_join";
  d.host_buffers = {{"in", 2048, 2}, {"out", 2048, 2}};
  Launch l;
  l.name = "sj";
  l.fifos = {fifo("in_l2", {0, 0}, {{0, 1}}, 512), fifo("a_in", {0, 1}, {{0, 2}}, 256),
             fifo("b_in", {0, 1}, {{0, 3}}, 256),  fifo("a_out", {0, 2}, {{0, 1}}, 256),
             fifo("b_out", {0, 3}, {{0, 1}}, 256), fifo("out_l2", {0, 1}, {{0, 0}}, 512)};
  l.links = {{{0, 1}, {"in_l2"}, {"a_in", "b_in"}, {0, 256}},
             {{0, 1}, {"a_out", "b_out"}, {"out_l2"}, std::move(join_offsets)}};
  auto prog = [](const char* in, const char* out) {
    return std::vector<CoreOp>{loop(4, {acquire_in(in), acquire_out(out), call("t_add_one", {in, out}),
                                        release_in(in), release_out(out)})};
  };
  l.cores = {{{0, 2}, prog("a_in", "a_out")}, {{0, 3}, prog("b_in", "b_out")}};
  l.sequence = {to_device("in_l2", "in"), from_device("out_l2", "out")};
  d.launches = {l};
  return d;
}

TEST(Simulator, SplitAndJoinThroughMemTile) {
  HostMemory host{{"in", iota_bytes(1024)}};
  run(split_join_design({0, 256}), host);
  for (int64_t i = 0; i < 1024; ++i) ASSERT_EQ(u16_at(host.at("out"), i), u16_at(host.at("in"), i) + 1) << i;

  // Swapped join offsets land the halves swapped: the offsets really steer data.
  HostMemory swapped{{"in", iota_bytes(1024)}};
  run(split_join_design({256, 0}), swapped);
  EXPECT_EQ(u16_at(swapped.at("out"), 0), u16_at(swapped.at("in"), 128) + 1);
  EXPECT_EQ(u16_at(swapped.at("out"), 128), u16_at(swapped.at("in"), 0) + 1);
}

// 4-byte elements may be transposed by the shim gather (stride != 1 allowed).
TEST(Simulator, TransposeByShimAccessPattern) {
  const int R = 16, C = 32;
  Design d = passthrough_design(1, R * C * 4);
  for (auto& h : d.host_buffers) h.elem_bytes = 4;
  for (auto& f : d.launches[0].fifos) f.elem_bytes = 4;
  d.launches[0].sequence[0].pattern = pattern({{C, 1}, {R, C}});  // column by column
  std::vector<uint32_t> a(R * C);
  for (int i = 0; i < R * C; ++i) a[i] = 1000u + static_cast<uint32_t>(i) * 3u;
  HostMemory host{{"in", u32_bytes(a)}};
  run(d, host);
  std::vector<uint32_t> out = as_u32(host.at("out")), ref(R * C);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) ref[c * R + r] = a[r * C + c];
  EXPECT_EQ(out, ref);
}

// bf16 layouts are re-tiled with stride-1 runs: the mem tile's MM2S (4-D BD)
// turns a row-major 8 x 16 matrix into 4 x 4 blocks.
Design blocking_design(int64_t row_stride) {
  Design d = passthrough_design(1, 8 * 16 * 2);
  Fifo& in_l1 = d.launches[0].fifos[1];
  in_l1.producer_pattern = pattern({{2, 4 * 16}, {4, 4}, {4, row_stride}, {4, 1}});
  return d;
}

std::vector<uint16_t> blocked_reference(const std::vector<std::byte>& in) {
  std::vector<uint16_t> ref;
  for (int br = 0; br < 2; ++br)
    for (int bc = 0; bc < 4; ++bc)
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) ref.push_back(u16_at(in, (br * 4 + r) * 16 + bc * 4 + c));
  return ref;
}

TEST(Simulator, BlockingByMemTilePatternMatchesReference) {
  HostMemory host{{"in", iota_bytes(128)}};
  run(blocking_design(16), host);
  std::vector<uint16_t> out(128);
  for (int i = 0; i < 128; ++i) out[i] = u16_at(host.at("out"), i);
  EXPECT_EQ(out, blocked_reference(host.at("in")));
}

TEST(Simulator, WrongStrideIsCaughtByComparison) {
  HostMemory host{{"in", iota_bytes(128)}};
  run(blocking_design(8), host);  // row stride 8 instead of 16: in bounds, wrong data
  std::vector<uint16_t> out(128);
  for (int i = 0; i < 128; ++i) out[i] = u16_at(host.at("out"), i);
  EXPECT_NE(out, blocked_reference(host.at("in")));
}

Design two_task_design() {
  Design d = passthrough_design(4, 256);
  auto& seq = d.launches[0].sequence;
  // 512 u16 elements = 4 objects of 128: tasks of 1, 1, 2 objects in; 2, 2 out.
  seq = {to_device("in_l2", "in", pattern({{128, 1}}, 0)), to_device("in_l2", "in", pattern({{128, 1}}, 128)),
         to_device("in_l2", "in", pattern({{256, 1}}, 256)), from_device("out_l2", "out", pattern({{256, 1}}, 0)),
         from_device("out_l2", "out", pattern({{256, 1}}, 256))};
  return d;
}

TEST(Simulator, SeveralTasksPerFifoRunInOrder) {
  HostMemory host{{"in", iota_bytes(512)}};
  run(two_task_design(), host);
  EXPECT_EQ(host.at("out"), host.at("in"));
}

TEST(Simulator, DroppedInputTaskIsADeadlockNamingTheCore) {
  Design d = two_task_design();
  d.launches[0].sequence.erase(d.launches[0].sequence.begin() + 2);
  HostMemory host{{"in", iota_bytes(512)}};
  try {
    run(d, host);
    FAIL() << "expected a SimulationError";
  } catch (const SimulationError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("core (0,2) blocked at acquire consume 'in_l1'"), std::string::npos) << m;
    EXPECT_NE(m.find("from_device task of fifo 'out_l2'"), std::string::npos) << m;
  }
}

TEST(Simulator, DroppedOutputTaskLeavesUndeliveredObjects) {
  Design d = two_task_design();
  d.launches[0].sequence.pop_back();
  HostMemory host{{"in", iota_bytes(512)}};
  try {
    run(d, host);
    FAIL() << "expected a SimulationError";
  } catch (const SimulationError& e) {
    EXPECT_NE(std::string(e.what()).find("never consumed"), std::string::npos) << e.what();
  }
}

TEST(Simulator, LocalBufferAccumulatesAndUninitialisedMemoryIsPoisoned) {
  auto make = [](bool zero_first) {
    Design d = passthrough_design(1, 256);
    Launch& l = d.launches[0];
    l.fifos[0].object_bytes = l.fifos[1].object_bytes = 64;  // 32 u16 per input object
    d.host_buffers[0].bytes = 4 * 64;
    l.buffers = {{"acc", {0, 2}, 32 * 4, -1}};
    std::vector<CoreOp> prog;
    if (zero_first) prog.push_back(call("t_zero", {"acc"}));
    prog.push_back(loop(4, {acquire_in("in_l1"), call("t_acc", {"in_l1", "acc"}, {{"n", int64_t{32}}}),
                            release_in("in_l1")}));
    prog.push_back(acquire_out("out_l1"));
    prog.push_back(call("t_store", {"acc", "out_l1"}, {{"n", int64_t{32}}}));
    prog.push_back(release_out("out_l1"));
    l.fifos[2].object_bytes = l.fifos[3].object_bytes = 64;
    d.host_buffers[1].bytes = 64;
    l.cores[0].program = prog;
    return d;
  };
  HostMemory host{{"in", iota_bytes(128)}};
  SimStats s = run(make(true), host);
  for (int i = 0; i < 32; ++i) {
    uint32_t sum = 0;
    for (int k = 0; k < 4; ++k) sum += u16_at(host.at("in"), k * 32 + i);
    ASSERT_EQ(u16_at(host.at("out"), i), static_cast<uint16_t>(sum)) << i;
  }
  EXPECT_EQ(s.macs(), 4 * 32);
  HostMemory dirty{{"in", iota_bytes(128)}};
  run(make(false), dirty);  // accumulator never zeroed: garbage, not luck
  EXPECT_NE(dirty.at("out"), host.at("out"));
}

TEST(Simulator, SharedMemoryFifoBetweenNeighboursUsesNoDma) {
  Design d = passthrough_design(2, 256);
  Launch& l = d.launches[0];
  l.fifos[2].producer = {0, 3};  // out_l1 now comes from (0,3)
  l.fifos.push_back(fifo("mid", {0, 2}, {{0, 3}}, 256));
  l.cores = {{{0, 2}, {loop(2, {acquire_in("in_l1"), acquire_out("mid"), call("t_add_one", {"in_l1", "mid"}),
                                release_in("in_l1"), release_out("mid")})}},
             {{0, 3}, {loop(2, {acquire_in("mid"), acquire_out("out_l1"), call("t_add_one", {"mid", "out_l1"}),
                                release_in("mid"), release_out("out_l1")})}}};
  HostMemory host{{"in", iota_bytes(256)}};
  SimStats s = run(d, host);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(u16_at(host.at("out"), i), u16_at(host.at("in"), i) + 2);
  EXPECT_EQ(s.launches[0].l1_bytes, 2 * 512);  // only the in and out DMAs touch L1
}

TEST(Simulator, LaunchesRunInOrderAndHostBuffersPersist) {
  Design d = passthrough_design(2, 256, "t_add_one");
  d.host_buffers.push_back({"final", 512, 2});
  Launch second = d.launches[0];
  second.name = "second";
  second.sequence = {to_device("in_l2", "out"), from_device("out_l2", "final")};
  d.launches.push_back(second);
  HostMemory host{{"in", iota_bytes(256)}};
  SimStats s = run(d, host);
  ASSERT_EQ(s.launches.size(), 2u);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(u16_at(host.at("final"), i), u16_at(host.at("in"), i) + 2);
}

TEST(Simulator, RepeatReissuesTheHostPattern) {
  Design d = passthrough_design(4, 256);
  d.launches[0].sequence[0].pattern = pattern({{128, 1}}, 0, 4);  // first object four times
  HostMemory host{{"in", iota_bytes(512)}};
  run(d, host);
  for (int i = 0; i < 512; ++i) ASSERT_EQ(u16_at(host.at("out"), i), u16_at(host.at("in"), i % 128)) << i;
}

// A mem tile re-sends groups of objects (Fifo::repeat): 4 objects in, groups
// of 2 sent 3 times each, 12 objects reach the core in cyclic order; the
// timing model charges every re-send on the L2 -> L1 ports, DDR only once.
Design repeat_design(int repeat, int group, int depth) {
  Design d = passthrough_design(4, 256);
  d.host_buffers[1].bytes = 4 * repeat * 256;
  Launch& l = d.launches[0];
  l.fifos[0].depth = depth;
  l.fifos[1].repeat = repeat;
  l.fifos[1].repeat_group = group;
  l.cores[0].program[0].count = 4 * repeat;
  return d;
}

TEST(Simulator, MemTileRepeatResendsGroupsInCyclicOrder) {
  Design d = repeat_design(3, 2, 2);
  HostMemory host{{"in", iota_bytes(512)}};
  run(d, host);
  const int order[] = {0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3};
  for (int o = 0; o < 12; ++o)
    for (int i = 0; i < 128; ++i)
      ASSERT_EQ(u16_at(host.at("out"), o * 128 + i), u16_at(host.at("in"), order[o] * 128 + i)) << o;
  DispatchTiming t = estimate_time(d, DeviceSpec::preset("xdna2"), test_kernels());
  EXPECT_EQ(t.ddr_bytes, 4 * 256 + 12 * 256);
  for (const auto& c : t.launches[0].channels)
    if (c.fifo == "in_l1") {
      EXPECT_EQ(c.bytes, 12 * 256);
    }
}

// A resident group with a streamed tail (Fifo::repeat_tail): per cycle, 2
// objects stay in L2 and are re-sent 3 times, each time followed by one
// fresh object passed through; with one tail slot or two, the core sees the
// same order, and the timing model charges DDR for every object that came
// in (group once, tail per repeat) and the L2 -> L1 port for every re-send.
Design tail_design(int depth) {
  Design d = passthrough_design(10, 256);
  d.host_buffers[1].bytes = 18 * 256;
  Launch& l = d.launches[0];
  l.fifos[0].depth = depth;
  l.fifos[1].repeat = 3;
  l.fifos[1].repeat_group = 2;
  l.fifos[1].repeat_tail = 1;
  l.cores[0].program[0].count = 18;
  return d;
}

TEST(Simulator, MemTileKeepsAGroupResidentAndStreamsTheTail) {
  for (int depth : {3, 4}) {
    Design d = tail_design(depth);
    HostMemory host{{"in", iota_bytes(10 * 128)}};
    run(d, host);
    const int order[] = {0, 1, 2, 0, 1, 3, 0, 1, 4, 5, 6, 7, 5, 6, 8, 5, 6, 9};
    for (int o = 0; o < 18; ++o)
      for (int i = 0; i < 128; ++i)
        ASSERT_EQ(u16_at(host.at("out"), o * 128 + i), u16_at(host.at("in"), order[o] * 128 + i)) << depth << " " << o;
    DispatchTiming t = estimate_time(d, DeviceSpec::preset("xdna2"), test_kernels());
    EXPECT_EQ(t.ddr_bytes, 10 * 256 + 18 * 256);
    for (const auto& c : t.launches[0].channels)
      if (c.fifo == "in_l1") {
        EXPECT_EQ(c.bytes, 18 * 256);
      }
  }
  EXPECT_NE(tail_design(3).dump().find("repeat=3 repeat_group=2 repeat_tail=1"), std::string::npos);
}

TEST(Simulator, RepeatNeedsAMemTileProducerAndAPoolForTheGroup) {
  const DeviceSpec spec = DeviceSpec::preset("xdna2");
  Design shim = repeat_design(3, 1, 2);
  shim.launches[0].fifos[0].repeat = 2;  // the shim end cannot re-send
  EXPECT_THROW(validate(shim, spec, test_kernels()), DesignError);
  EXPECT_THROW(validate(repeat_design(3, 4, 2), spec, test_kernels()), DesignError);
  EXPECT_NO_THROW(validate(repeat_design(3, 4, 4), spec, test_kernels()));
}

TEST(Simulator, HostBufferOfWrongSizeIsRejected) {
  HostMemory host{{"in", iota_bytes(10)}};
  EXPECT_THROW(run(passthrough_design(), host), SimulationError);
}

// Two copies through mem tiles: "in" -> "mid" by column 0, then "mid" ->
// "out" by column 1, whose read waits for the first copy (DmaTask::after_wait).
Design waited_copy_design(bool wait) {
  Design d;
  d.name = "waited_copy";
  d.host_buffers = {{"in", 1024, 2}, {"mid", 1024, 2}, {"out", 1024, 2}};
  Launch l;
  l.name = "main";
  for (int c : {0, 1}) {
    std::string a = "a" + std::to_string(c), b = "b" + std::to_string(c);
    l.fifos.push_back(fifo(a, {c, 0}, {{c, 1}}, 128));
    l.fifos.push_back(fifo(b, {c, 1}, {{c, 0}}, 128));
    l.links.push_back({{c, 1}, {a}, {b}, {}});
  }
  l.sequence = {to_device("a0", "in"), from_device("b0", "mid"), to_device("a1", "mid"),
                from_device("b1", "out")};
  l.sequence[2].after_wait = wait;
  d.launches = {l};
  return d;
}

// The simulator holds a task after a wait until every earlier task is done:
// the second copy reads what the first wrote. Without the wait it snapshots
// "mid" while the first copy is still filling it (the check can fail).
TEST(Simulator, TaskAfterAWaitSeesEveryEarlierTaskDone) {
  HostMemory host{{"in", iota_bytes(512)}};
  run(waited_copy_design(true), host);
  EXPECT_EQ(host.at("out"), host.at("in"));
  HostMemory racing{{"in", iota_bytes(512)}};
  run(waited_copy_design(false), racing);
  EXPECT_NE(racing.at("out"), racing.at("in"));
}

// A wait frees the shim BDs of the tasks before it: 18 tasks on one shim
// are refused (16 BDs), the same tasks with a wait among them validate,
// and the wait is charged one more pipeline drain and refill.
TEST(Simulator, WaitsLetAShimReuseItsBds) {
  const DeviceSpec spec = DeviceSpec::preset("xdna2-sourced");
  Design d = passthrough_design(17, 128);
  auto& seq = d.launches[0].sequence;
  seq.clear();
  for (int64_t i = 0; i < 16; ++i) seq.push_back(to_device("in_l2", "in", pattern({{64, 1}}, i * 64)));
  seq.push_back(from_device("out_l2", "out"));
  seq.insert(seq.begin() + 16, to_device("in_l2", "in", pattern({{64, 1}}, 16 * 64)));
  try {
    validate(d, spec, test_kernels());
    FAIL() << "17 tasks on one shim without a wait must be refused";
  } catch (const DesignError& e) {
    EXPECT_NE(std::string(e.what()).find("shim tile (0,0) needs 18 buffer descriptors"), std::string::npos)
        << e.what();
  }
  Design waited = d;
  // Early enough that the objects before it fit the pools (else a deadlock).
  waited.launches[0].sequence[4].after_wait = true;
  EXPECT_NO_THROW(validate(waited, spec, test_kernels()));
  EXPECT_NE(waited.dump().find("      wait\n"), std::string::npos);
  HostMemory host{{"in", iota_bytes(17 * 64)}};
  run(waited, host);
  EXPECT_EQ(host.at("out"), host.at("in"));
  const auto plain = estimate_time(d, spec, test_kernels());
  const auto with_wait = estimate_time(waited, spec, test_kernels());
  EXPECT_DOUBLE_EQ(with_wait.launches[0].fill_drain_seconds, 2 * plain.launches[0].fill_drain_seconds);
  EXPECT_GT(with_wait.total_seconds, plain.total_seconds);
}

TEST(Simulator, IsDeterministic) {
  HostMemory a{{"in", iota_bytes(1024)}}, b{{"in", iota_bytes(1024)}};
  run(split_join_design({0, 256}), a);
  run(split_join_design({0, 256}), b);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace tessera::npu
