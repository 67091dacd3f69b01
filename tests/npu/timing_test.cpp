// Timing model on hand-computed designs, one per bounding term. The spec is
// simplified so every figure is easy arithmetic: 1 GHz, 4 B/cycle per port
// (4 GB/s), 45 us dispatch overhead, 3 us per extra launch.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tessera/npu/timing.h"

namespace tessera::npu {
namespace {

DeviceSpec spec() {
  DeviceSpec s = DeviceSpec::preset("xdna2-sourced");
  s.dma_object_overhead_cycles = 0;  // its own test below
  s.clock_hz = 1e9;
  s.stream_bytes_per_cycle = 4;
  s.ddr_bytes_per_second = 60e9;
  s.dispatch_overhead_seconds = 45e-6;
  s.reconfigure_seconds = 3e-6;
  s.kernel_efficiency = {{"default", 1.0}};
  return s;
}

// "work": costs its `cycles` parameter, counts its `macs` parameter.
const KernelRegistry& work_registry() {
  static KernelRegistry r = [] {
    KernelRegistry k;
    auto get = [](const KernelParams& p, const char* key) { return std::get<int64_t>(p.at(key)); };
    k.add({"work", [](const KernelInvocation&) {},
           [get](const KernelParams& p, const DeviceSpec&) { return get(p, "cycles"); },
           [get](const KernelParams& p) { return get(p, "macs"); }});
    // Same cycles, spent on the vector unit / as per-call overhead.
    KernelDef vec = k.get("work"), ovh = k.get("work");
    vec.name = "vec";
    vec.cost = [get](const KernelParams& p, const DeviceSpec&) {
      return KernelCost{0, static_cast<double>(get(p, "cycles")), 0};
    };
    ovh.name = "ovh";
    ovh.cost = [get](const KernelParams& p, const DeviceSpec&) {
      return KernelCost{0, 0, static_cast<double>(get(p, "cycles"))};
    };
    k.add(vec);
    k.add(ovh);
    return k;
  }();
  return r;
}

Fifo timing_fifo(const std::string& name, TileCoord p, std::vector<TileCoord> c, int64_t bytes) {
  Fifo f;
  f.name = name;
  f.producer = p;
  f.consumers = std::move(c);
  f.object_bytes = bytes;
  return f;
}

CoreOp op(CoreOp::Kind k, const std::string& fifo_or_kernel, int64_t count = 1) {
  CoreOp o;
  o.kind = k;
  o.count = count;
  (k == CoreOp::Kind::call ? o.kernel : o.fifo) = fifo_or_kernel;
  return o;
}

// Host "in" (bytes, bf16) -> shim (col,0) -> compute (col,2); the core
// consumes `objects` objects, calling "work" once per object.
Launch feed_core(int col, int64_t object_bytes, int64_t objects, int64_t cycles, int64_t macs) {
  Launch l;
  l.name = "feed" + std::to_string(col);
  std::string f = "in" + std::to_string(col);
  l.fifos.push_back(timing_fifo(f, {col, 0}, {{col, 2}}, object_bytes));
  CoreOp call = op(CoreOp::Kind::call, "work");
  call.params = {{"cycles", cycles}, {"macs", macs}};
  CoreOp loop = op(CoreOp::Kind::loop, "", objects);
  loop.body = {op(CoreOp::Kind::acquire, f), call, op(CoreOp::Kind::release, f)};
  l.cores.push_back({{col, 2}, {loop}});
  int64_t elems = object_bytes * objects / 2;
  l.sequence.push_back({f, "in", {col * elems, {{elems / 1024, 1024}, {1024, 1}}, 1}, true});
  return l;
}

Design one(Launch l, int64_t host_bytes) {
  Design d;
  d.name = "t";
  d.host_buffers = {{"in", host_bytes, 2}};
  d.launches.push_back(std::move(l));
  return d;
}

TEST(Timing, ComputeBound) {
  DeviceSpec s = spec();
  s.kernel_efficiency["work"] = 0.5;
  // 4 objects of 1 KiB; 4 x 100000 cycles at 50 % efficiency = 800 us.
  DispatchTiming t = estimate_time(one(feed_core(0, 1024, 4, 100000, 1000), 4096), s, work_registry());
  const LaunchTiming& l = t.launches.at(0);
  EXPECT_DOUBLE_EQ(l.compute_seconds, 800e-6);
  EXPECT_DOUBLE_EQ(l.stream_seconds, 4096 / 4e9);
  EXPECT_DOUBLE_EQ(l.dma_seconds, 4096 / 4e9);  // one contiguous run, whole bursts
  EXPECT_DOUBLE_EQ(l.ddr_seconds, 4096 / 60e9);
  EXPECT_DOUBLE_EQ(l.fill_drain_seconds, 1024 / 4e9);  // first object's one hop, no output
  EXPECT_EQ(l.bound, "compute");
  EXPECT_EQ(l.busiest_tile, "(0,2)");
  EXPECT_DOUBLE_EQ(t.total_seconds, 45e-6 + 800e-6 + 1024 / 4e9);
  EXPECT_EQ(t.bound, "compute");
  EXPECT_EQ(t.macs, 4000);
  EXPECT_EQ(t.ddr_bytes, 4096);
  EXPECT_EQ(t.l1_bytes, 4096);
  EXPECT_EQ(t.l2_bytes, 0);
  EXPECT_DOUBLE_EQ(t.utilization, 4000 / (256.0 * 32 * 1e9 * t.total_seconds));
}

TEST(Timing, StreamBoundThroughMemTile) {
  // 64 objects of 16 KiB forwarded by a mem tile: 1 MiB per port = 262.144 us.
  Launch l = feed_core(0, 16384, 64, 100, 0);
  l.fifos[0].consumers = {{0, 1}};
  l.fifos.push_back(timing_fifo("l1", {0, 1}, {{0, 2}}, 16384));
  l.links.push_back({{0, 1}, {"in0"}, {"l1"}, {0}});
  for (auto& o : l.cores[0].program[0].body) o.fifo = o.fifo.empty() ? "" : "l1";
  DispatchTiming t = estimate_time(one(l, 1 << 20), spec(), work_registry());
  const LaunchTiming& lt = t.launches.at(0);
  EXPECT_DOUBLE_EQ(lt.stream_seconds, (1 << 20) / 4e9);
  EXPECT_DOUBLE_EQ(lt.dma_seconds, lt.stream_seconds);  // contiguous: a tie goes to stream
  EXPECT_EQ(lt.bound, "stream");
  EXPECT_EQ(lt.l2_bytes, 2 << 20);  // into and out of L2
  EXPECT_EQ(lt.l1_bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(lt.fill_drain_seconds, 2 * 16384 / 4e9);  // two hops
  EXPECT_DOUBLE_EQ(t.total_seconds, 45e-6 + (1 << 20) / 4e9 + 2 * 16384 / 4e9);
}

TEST(Timing, DmaBoundByShortRuns) {
  // The shim gathers 64-byte runs (32 bf16 at stride 64): each costs a 512 B burst.
  Launch l = feed_core(0, 16384, 64, 100, 0);
  l.sequence[0].pattern = {0, {{1024, 64}, {32, 1}}, 1};  // 32768 elements = 64 KiB... per repeat
  l.sequence[0].pattern.repeat = 16;                        // x16 = 1 MiB
  DispatchTiming t = estimate_time(one(l, 1 << 17), spec(), work_registry());
  const LaunchTiming& lt = t.launches.at(0);
  EXPECT_DOUBLE_EQ(lt.stream_seconds, (1 << 20) / 4e9);
  EXPECT_DOUBLE_EQ(lt.dma_seconds, 8.0 * (1 << 20) / 4e9);
  EXPECT_EQ(lt.bound, "dma");
  EXPECT_NE(lt.busiest_channel.find("in0 (0,0) out"), std::string::npos) << lt.busiest_channel;
  // DDR serves whole bursts too: 8x the payload.
  EXPECT_DOUBLE_EQ(lt.ddr_seconds, 8.0 * (1 << 20) / 60e9);
  EXPECT_EQ(lt.ddr_bytes, 1 << 20);
  EXPECT_EQ(lt.ddr_burst_bytes, 8 << 20);
}

// The compute term is named after the unit that spends most of the busiest
// tile's cycles.
TEST(Timing, ComputeTermNamesItsUnit) {
  for (const char* kernel : {"work", "vec", "ovh"}) {
    Launch l = feed_core(0, 1024, 4, 100000, 0);
    l.cores[0].program[0].body[1].kernel = kernel;
    DispatchTiming t = estimate_time(one(l, 4096), spec(), work_registry());
    const std::string want = std::string(kernel) == "work" ? "compute"
                             : std::string(kernel) == "vec" ? "vector"
                                                            : "overhead";
    EXPECT_EQ(t.launches[0].bound, want) << kernel;
    EXPECT_DOUBLE_EQ(t.launches[0].compute_seconds, 400e-6) << kernel;
    EXPECT_EQ(t.bound, want) << kernel;
  }
}

// Every object a DMA channel moves pays the BD / lock overhead: many small
// objects make a contiguous stream DMA-bound.
TEST(Timing, PerObjectDmaOverhead) {
  DeviceSpec s = spec();
  s.dma_object_overhead_cycles = 100;
  // 1024 objects of 256 B: 64 cycles of stream each, plus 100 of overhead.
  DispatchTiming t = estimate_time(one(feed_core(0, 256, 1024, 1, 0), 1 << 18), s, work_registry());
  const LaunchTiming& l = t.launches[0];
  EXPECT_DOUBLE_EQ(l.stream_seconds, (1 << 18) / 4e9);
  EXPECT_NEAR(l.dma_seconds, (1 << 18) / 4e9 + 1024 * 100e-9, 1e-12);
  EXPECT_EQ(l.bound, "dma");
  s.dma_object_overhead_cycles = 0;
  EXPECT_EQ(estimate_time(one(feed_core(0, 256, 1024, 1, 0), 1 << 18), s, work_registry()).launches[0].bound,
            "stream");
}

TEST(Timing, DdrBound) {
  DeviceSpec s = spec();
  s.ddr_bytes_per_second = 10e9;
  // Four columns each stream 1 MiB (262 us per port) but share 10 GB/s of DDR: 419 us.
  Design d;
  d.name = "ddr";
  d.host_buffers = {{"in", 4 << 20, 2}};
  Launch l;
  for (int c = 0; c < 4; ++c) {
    Launch one_col = feed_core(c, 16384, 64, 100, 0);
    l.fifos.push_back(one_col.fifos[0]);
    l.cores.push_back(one_col.cores[0]);
    l.sequence.push_back(one_col.sequence[0]);
  }
  d.launches.push_back(l);
  DispatchTiming t = estimate_time(d, s, work_registry());
  EXPECT_DOUBLE_EQ(t.launches[0].ddr_seconds, (4 << 20) / 10e9);
  EXPECT_EQ(t.launches[0].bound, "ddr");
  EXPECT_EQ(t.bound, "ddr");
  EXPECT_EQ(t.ddr_bytes, 4 << 20);
}

TEST(Timing, OverheadBoundAcrossLaunches) {
  Design d = one(feed_core(0, 1024, 2, 100, 0), 2048);
  d.launches.push_back(d.launches[0]);
  DispatchTiming t = estimate_time(d, spec(), work_registry());
  ASSERT_EQ(t.launches.size(), 2u);
  EXPECT_DOUBLE_EQ(t.launches[0].reconfigure_seconds, 0);
  EXPECT_DOUBLE_EQ(t.launches[1].reconfigure_seconds, 3e-6);
  double body = 2048 / 4e9 + 1024 / 4e9;  // stream (ties dma) + fill
  EXPECT_DOUBLE_EQ(t.total_seconds, 45e-6 + 3e-6 + 2 * body);
  EXPECT_EQ(t.bound, "overhead");
  EXPECT_NE(t.summary().find("bound by overhead"), std::string::npos) << t.summary();
  EXPECT_EQ(t.to_json()["launches"].size(), 2u);
}

TEST(Timing, BroadcastPortCarriesEachObjectOnce) {
  // One shim port feeds two cores: the producer port moves 64 KiB, not 128.
  Launch l = feed_core(0, 16384, 4, 100, 0);
  l.fifos[0].consumers = {{0, 2}, {0, 3}};
  l.cores.push_back(l.cores[0]);
  l.cores[1].tile = {0, 3};
  DispatchTiming t = estimate_time(one(l, 1 << 16), spec(), work_registry());
  int64_t producer = 0, consumers = 0;
  for (const auto& c : t.launches[0].channels) (c.s2mm ? consumers : producer) += c.bytes;
  EXPECT_EQ(producer, 1 << 16);
  EXPECT_EQ(consumers, 2 << 16);
  EXPECT_EQ(t.ddr_bytes, 1 << 16);
}

// One buffer at the core (depth 1, aircc's omit_pingpong): the DMA cannot load
// object i + 1 until the core releases object i, so each refill after the
// first (the fill term's) adds to the compute instead of hiding under it.
// 4 objects of 4 KiB at 4 B/cycle: 1.024 us per hop; 4 x 2000 cycles = 8 us.
TEST(Timing, SingleBufferedFifoSerializesItsRefillsWithCompute) {
  Launch l = feed_core(0, 4096, 4, 2000, 0);
  const double compute = 8e-6, hop = 4096 / 4e9;
  const LaunchTiming pingpong = estimate_time(one(l, 4 * 4096), spec(), work_registry()).launches[0];
  EXPECT_DOUBLE_EQ(pingpong.compute_seconds, compute);
  EXPECT_EQ(pingpong.bound, "compute");
  l.fifos[0].depth = 1;
  const LaunchTiming single = estimate_time(one(l, 4 * 4096), spec(), work_registry()).launches[0];
  EXPECT_DOUBLE_EQ(single.compute_seconds, compute + 3 * hop);
  EXPECT_DOUBLE_EQ(single.total_seconds - pingpong.total_seconds, 3 * hop);
  EXPECT_EQ(single.bound, "compute");
  // With 500 cycles per object the waits (3.07 us) outweigh the work (2 us).
  Launch fast = feed_core(0, 4096, 4, 500, 0);
  fast.fifos[0].depth = 1;
  const LaunchTiming f = estimate_time(one(fast, 4 * 4096), spec(), work_registry()).launches[0];
  EXPECT_DOUBLE_EQ(f.compute_seconds, 2e-6 + 3 * hop);
  EXPECT_EQ(f.bound, "stream");
}

// Two single-buffered inputs refill side by side on their own channels: each
// trip waits for the longer hop (1.024 us), not the sum with the 256 ns one.
TEST(Timing, SingleBufferedRefillsOverlapEachOther) {
  Launch l = feed_core(0, 4096, 4, 2000, 0);
  l.fifos[0].depth = 1;
  l.fifos.push_back(timing_fifo("in1", {1, 0}, {{0, 2}}, 1024));
  l.fifos[1].depth = 1;
  auto& body = l.cores[0].program[0].body;
  body.insert(body.begin(), op(CoreOp::Kind::acquire, "in1"));
  body.push_back(op(CoreOp::Kind::release, "in1"));
  l.sequence.push_back({"in1", "in", {0, {{4, 512}, {512, 1}}, 1}, true});
  const LaunchTiming t = estimate_time(one(l, 4 * 4096), spec(), work_registry()).launches[0];
  EXPECT_DOUBLE_EQ(t.compute_seconds, 8e-6 + 3 * 4096 / 4e9);
}

// An output drained while the core computes the next object costs nothing:
// one buffer stalls only when the compute between uses is shorter than a hop.
TEST(Timing, SingleBufferedOutputDrainsUnderLaterCompute) {
  Launch l = feed_core(0, 4096, 4, 2000, 0);
  l.fifos.push_back(timing_fifo("out", {0, 2}, {{0, 0}}, 4096));
  l.fifos[1].depth = 1;
  auto& body = l.cores[0].program[0].body;
  body.push_back(op(CoreOp::Kind::acquire, "out"));
  body.push_back(op(CoreOp::Kind::release, "out"));
  body.back().port = body[body.size() - 2].port = CoreOp::Port::produce;
  l.sequence.push_back({"out", "in", {0, {{4, 2048}, {2048, 1}}, 1}, false});
  const LaunchTiming t = estimate_time(one(l, 4 * 4096), spec(), work_registry()).launches[0];
  EXPECT_DOUBLE_EQ(t.compute_seconds, 8e-6);  // each drain (1 us) hides under 2 us of work
}

}  // namespace
}  // namespace tessera::npu
