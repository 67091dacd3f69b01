// Simulator replay (npu/src/simulator_trace.h): from its second run a
// prepared design replays the byte operations its first run recorded. Every design a
// tiny model's decode and prefill plans launch runs four times on new inputs
// each time, through a replaying simulator and through one that interprets
// every run: host memory and every statistic must be equal, and the decode
// designs must have replayed (else the comparison proves nothing).
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "tessera/compiler/plan.h"
#include "tessera/core/bf16.h"
#include "tessera/core/threads.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/model/config.h"
#include "tessera/npu/simulator.h"

namespace tessera::compiler {
namespace {

// Host buffers of `op` packed from values drawn with `seed`.
npu::HostMemory packed_inputs(const kernels::BuiltOp& op, uint32_t seed) {
  npu::HostMemory host;
  for (const auto& h : op.design.host_buffers) host[h.name].assign(static_cast<size_t>(h.bytes), std::byte{0});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    std::vector<float> v(static_cast<size_t>(shape_numel(op.inputs[i].shape)));
    // Ids (embedding, argmax inputs) stay small non-negative integers.
    for (auto& x : v) x = op.inputs[i].name == "ids" ? 0.0f : bf16_to_f32(f32_to_bf16(u(rng)));
    op.pack(i, v, host);
  }
  return host;
}

// SmolLM2-135M's decode k projection (576 -> 192): a GEMV whose weights are
// read in place.
kernels::BuiltOp k_projection(const npu::DeviceSpec& spec) {
  return kernels::op_builder("linear").build(kernels::OpShape{"linear", {{"M", 1}, {"K", 576}, {"N", 192}}, {}},
                                             spec);
}

// The k projection with a replaying simulator and one that interprets every run.
struct KProjectionRig {
  npu::DeviceSpec spec = [] {
    kernels::ensure_tile_kernels_registered();
    return npu::DeviceSpec::preset("xdna2");
  }();
  kernels::BuiltOp op = k_projection(spec);
  npu::Simulator replaying{spec}, interpreting{spec};
  KProjectionRig() { interpreting.set_replay(false); }
};

void expect_same(const npu::LaunchStats& a, const npu::LaunchStats& b) {
  EXPECT_EQ(a.ddr_read_bytes, b.ddr_read_bytes);
  EXPECT_EQ(a.ddr_write_bytes, b.ddr_write_bytes);
  EXPECT_EQ(a.l2_bytes, b.l2_bytes);
  EXPECT_EQ(a.l1_bytes, b.l1_bytes);
  EXPECT_EQ(a.transfers, b.transfers);
  EXPECT_EQ(a.host_partitions, b.host_partitions);
  EXPECT_TRUE(a.tiles == b.tiles);
  EXPECT_TRUE(a.channels == b.channels);
}

// Runs every distinct design of `plan` four times; returns how many of the
// runs from the second on replayed, and how many such runs there were.
std::pair<int, int> compare_runs(const Plan& plan, const npu::DeviceSpec& spec) {
  npu::Simulator replaying(spec), interpreting(spec);
  interpreting.set_replay(false);
  std::set<const kernels::BuiltOp*> seen;
  int replayed = 0, later = 0;
  for (const Step& s : plan.steps)
    for (const Launch& l : s.launches) {
      if (s.kind != StepKind::npu || l.op == nullptr || l.op->patch || !seen.insert(l.op.get()).second) continue;
      SCOPED_TRACE(l.op->shape.key());
      const auto prepared = replaying.prepare(l.op->design);
      for (uint32_t run = 0; run < 4; ++run) {
        npu::HostMemory a = packed_inputs(*l.op, 100 * run + 7), b = a;
        const npu::SimStats sa = replaying.run(*prepared, a);
        const npu::SimStats sb = interpreting.run(l.op->design, b);
        EXPECT_TRUE(a == b) << "run " << run << ": host memory differs";
        EXPECT_EQ(sa.launches.size(), sb.launches.size());
        for (size_t i = 0; i < std::min(sa.launches.size(), sb.launches.size()); ++i) {
          expect_same(sa.launches[i], sb.launches[i]);
          EXPECT_FALSE(sb.launches[i].replayed);
          if (run == 0) {
            EXPECT_FALSE(sa.launches[i].replayed) << "run " << run;
          } else {
            replayed += sa.launches[i].replayed;
            ++later;
          }
        }
      }
    }
  return {replayed, later};
}

TEST(SimulatorReplay, DecodeDesignsReplayWithTheInterpretersBytesAndStats) {
  kernels::ensure_tile_kernels_registered();
  const npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2");
  DesignCache cache(spec);
  for (const char* preset : {"tiny", "tiny-qwen3"}) {
    SCOPED_TRACE(preset);
    const Plan decode = lower(model::preset(preset), 1, 9, cache, {});
    const auto [replayed, later] = compare_runs(decode, spec);
    // Every decode design runs its cores serially or by partitions: all replay.
    EXPECT_GT(later, 0);
    EXPECT_EQ(replayed, later);
  }
}

// SmolLM2-135M's decode designs at full width (one layer): its attention and
// its larger GEMVs stream enough to run by partitions on host threads, and a
// to-device stream gathered into staging before the partitions ran is read
// out inside one (the attention's partial states); those launches recorded
// nothing before the staging buffers were shared by the run's threads.
TEST(SimulatorReplay, PartitionedDecodeDesignsOfAFullWidthModelReplay) {
  if (thread_count() < 2) GTEST_SKIP() << "partitions run side by side only with two host threads";
  kernels::ensure_tile_kernels_registered();
  const npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2");
  DesignCache cache(spec);
  model::ModelConfig config = model::preset("smollm2-135m");
  config.num_layers = 1;
  const Plan decode = lower(config, 1, 16, cache, {});
  const auto [replayed, later] = compare_runs(decode, spec);
  EXPECT_GT(later, 0);
  EXPECT_EQ(replayed, later);
}

// Prefill designs too; a GEMM whose cores run on threads within a round is
// not recorded and keeps the interpreter, with the same results.
TEST(SimulatorReplay, PrefillDesignsGiveTheInterpretersBytesAndStats) {
  kernels::ensure_tile_kernels_registered();
  const npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2");
  DesignCache cache(spec);
  const Plan prefill = lower(model::preset("tiny-qwen3"), 7, 0, cache, {});
  const auto [replayed, later] = compare_runs(prefill, spec);
  EXPECT_GT(replayed, 0);
  EXPECT_GT(later, 0);
}

// A replay moves bytes by offsets recorded against one alignment of each
// region: a run whose read-only view sits at another address modulo 8 (where
// a slot may not alias it) goes back to the interpreter, with its results.
TEST(SimulatorReplay, AViewAtAnotherAlignmentIsInterpreted) {
  KProjectionRig rig;
  const kernels::BuiltOp& op = rig.op;
  npu::Simulator &replaying = rig.replaying, &interpreting = rig.interpreting;
  const auto prepared = replaying.prepare(op.design);
  for (int run = 0; run < 4; ++run) {
    npu::HostMemory a = packed_inputs(op, 11 + run), b = a;
    // The weights as a view; on the last run 2 bytes into its storage.
    const int shift = run == 3 ? 2 : 0;
    std::map<std::string, std::vector<std::byte>> storage;
    npu::HostViews views;
    for (auto it = a.begin(); it != a.end();) {
      if (it->first.rfind("w_", 0) != 0) {
        ++it;
        continue;
      }
      auto& s = storage[it->first];
      s.assign(it->second.size() + 8, std::byte{0});
      std::copy(it->second.begin(), it->second.end(), s.begin() + shift);
      views[it->first] = std::span<const std::byte>(s.data() + shift, it->second.size());
      it = a.erase(it);
    }
    ASSERT_FALSE(views.empty());
    const npu::SimStats sa = replaying.run(*prepared, a, &views);
    const npu::SimStats sb = interpreting.run(op.design, b);
    for (const auto& [name, bytes] : a) EXPECT_TRUE(bytes == b.at(name)) << "run " << run << ": " << name;
    ASSERT_EQ(sa.launches.size(), 1u);
    expect_same(sa.launches[0], sb.launches[0]);
    EXPECT_EQ(sa.launches[0].replayed, run == 1 || run == 2) << "run " << run;
  }
}

// run_bytes() (the executor's run: no statistics) writes the bytes run()
// writes, through the interpreted first run and the replays after it; and its
// first run records the trace that a later run() replays.
TEST(SimulatorReplay, RunBytesWritesWhatRunWrites) {
  KProjectionRig rig;
  const kernels::BuiltOp& op = rig.op;
  npu::Simulator &sim = rig.replaying, &interpreting = rig.interpreting;
  const auto prepared = sim.prepare(op.design);
  for (uint32_t run = 0; run < 4; ++run) {
    npu::HostMemory a = packed_inputs(op, 31 + run), b = a;
    sim.run_bytes(*prepared, a);
    interpreting.run(op.design, b);
    EXPECT_TRUE(a == b) << "run " << run << ": host memory differs";
  }
  npu::HostMemory c = packed_inputs(op, 99), d = c;
  const npu::SimStats sc = sim.run(*prepared, c);
  const npu::SimStats sd = interpreting.run(op.design, d);
  EXPECT_TRUE(c == d);
  ASSERT_EQ(sc.launches.size(), 1u);
  EXPECT_TRUE(sc.launches[0].replayed);
  expect_same(sc.launches[0], sd.launches[0]);
}

// Traces count against a process-wide budget: past it a design keeps the
// interpreter (with its results), and a trace's bytes return to the budget
// when its prepared design goes.
TEST(SimulatorReplay, TracesStayWithinTheirBudget) {
  KProjectionRig rig;
  const kernels::BuiltOp& op = rig.op;
  npu::Simulator &sim = rig.replaying, &interpreting = rig.interpreting;
  const int64_t before = npu::Simulator::trace_bytes();
  auto runs = [&](const npu::PreparedDesign& prepared) {
    std::vector<bool> replayed;
    for (uint32_t run = 0; run < 3; ++run) {
      npu::HostMemory a = packed_inputs(op, 50 + run), b = a;
      replayed.push_back(sim.run(prepared, a).launches.at(0).replayed);
      interpreting.run(op.design, b);
      EXPECT_TRUE(a == b) << "run " << run;
    }
    return replayed;
  };
  {
    const auto prepared = sim.prepare(op.design);
    EXPECT_EQ(runs(*prepared), (std::vector<bool>{false, true, true}));
    EXPECT_GT(npu::Simulator::trace_bytes(), before);
  }
  EXPECT_EQ(npu::Simulator::trace_bytes(), before);  // the trace went with its design
  const int64_t budget = npu::Simulator::set_trace_budget(before);  // no room for another
  const auto prepared = sim.prepare(op.design);
  EXPECT_EQ(runs(*prepared), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(npu::Simulator::trace_bytes(), before);
  npu::Simulator::set_trace_budget(budget);
}

}  // namespace
}  // namespace tessera::compiler
