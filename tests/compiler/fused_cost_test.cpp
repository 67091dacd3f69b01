// FusedCost (fused_cost.h) against the figure it stands for, fused_seconds
// (fuse a copy of the plan, re-cost it). They are compared with ==, not
// within a tolerance: align-layouts and kv-resident keep a rewrite when this
// sum drops (`t < best`), so one ulp apart could flip a decision and change
// the plan a session runs.
#include <memory>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/compiler/fused_cost.h"
#include "tessera/compiler/passes.h"
#include "compiler_test_util.h"

namespace tessera::compiler {
namespace {

using testing_util::cache;

Plan fused_cost_plan(const std::string& preset, int64_t S, int64_t P, std::set<std::string> disabled) {
  PlanOptions o;
  o.disabled = std::move(disabled);
  return lower(testing_util::small_vocab(preset, 2), S, P, cache(), o);
}

// Plans as the passes that call it see them (before fuse, before or after
// align-layouts), already fused plans (multi-launch steps fused further),
// per-op plans, decode and prefill, with and without q/k/v bias and qk-norm.
TEST(FusedCost, EqualsFusingACopyOnLoweredPlans) {
  const std::vector<std::set<std::string>> pipelines = {
      {"fuse", "align-layouts", "kv-resident"}, {"fuse", "align-layouts"}, {"fuse"}, {}};
  for (const char* preset : {"qwen2.5-0.5b", "qwen3-0.6b", "smollm2-135m"})
    for (auto [S, P] : {std::pair<int64_t, int64_t>{1, 17}, {17, 0}, {1, 0}})
      for (const auto& disabled : pipelines) {
        SCOPED_TRACE(fmt::format("{} S={} P={} disabled={}", preset, S, P, disabled.size()));
        const Plan p = fused_cost_plan(preset, S, P, disabled);
        EXPECT_EQ(FusedCost(p).seconds(cache().spec()), fused_seconds(p, cache()));
      }
  PlanOptions per_op;
  per_op.style = PlanStyle::per_op;
  const Plan q = lower(testing_util::small_vocab("qwen3-0.6b", 2), 1, 5, cache(), per_op);
  EXPECT_EQ(FusedCost(q).seconds(cache().spec()), fused_seconds(q, cache()));
}

// One index, launches changed in place between calls: every edge made to
// match (so dispatches merge and re-layouts
// vanish one by one), timings changed, a design made runtime-patched (it must
// then run alone), a host step's cost changed.
TEST(FusedCost, FollowsLaunchesChangedInPlace) {
  for (auto [S, P] : {std::pair<int64_t, int64_t>{1, 17}, {17, 0}}) {
    SCOPED_TRACE(fmt::format("S={} P={}", S, P));
    Plan p = fused_cost_plan("qwen2.5-0.5b", S, P, {"fuse", "align-layouts"});
    const FusedCost cost(p);
    const npu::DeviceSpec& spec = cache().spec();
    std::map<std::string, Launch*> by_name;
    for (Step& s : p.steps)
      for (Launch& l : s.launches) by_name[l.name] = &l;
    int matched = 0;
    for (Step& s : p.steps)
      for (Launch& l : s.launches) {
        const Node& n = p.graph.nodes.at(l.node);
        for (size_t k = 0; k < n.inputs.size(); ++k) {
          auto it = by_name.find(n.inputs[k].str());
          if (it == by_name.end() || s.kind != StepKind::npu || !it->second->op) continue;
          l.in_layouts.at(k) = it->second->out_layout;
          cost.touched(l);  // a hand edit under the same design: announced
          ++matched;
          ASSERT_EQ(cost.seconds(spec), fused_seconds(p, cache())) << l.name << " input " << k;
        }
      }
    EXPECT_GT(matched, 10);
    int changed = 0;
    for (Step& s : p.steps) {
      Launch& l = s.launches.front();
      if (s.kind == StepKind::host) {
        l.host_seconds *= 3;
      } else if (++changed % 3 == 0) {
        npu::DispatchTiming t = *l.timing;  // shared with the cache entry: a changed copy
        t.total_seconds *= 1.7;
        t.overhead_seconds *= 0.3;
        l.timing = std::move(t);
      } else if (changed % 5 == 1) {
        auto op = std::make_shared<kernels::BuiltOp>(*l.op);
        op->patch = [](const npu::Design& d, const npu::HostMemory&) { return d; };
        l.op = op;
      }
      ASSERT_EQ(cost.seconds(spec), fused_seconds(p, cache())) << l.name;
    }
  }
}

// One index, launches rebuilt and restored between calls as align-layouts'
// trials do: each launch of a plan lowered without align-layouts replaced by
// its counterpart in the plan with it (another design, other layout keys, not
// announced), then every other one put back as it was. The kept costs of the
// segments a change does not reach must still be right, and those it reaches
// (its layer, its producers' and its readers') redone.
TEST(FusedCost, FollowsRebuildsAndRestoresWithoutBeingTold) {
  for (auto [S, P] : {std::pair<int64_t, int64_t>{1, 17}, {17, 0}})
    for (const char* preset : {"smollm2-135m", "qwen3-0.6b"}) {
      SCOPED_TRACE(fmt::format("{} S={} P={}", preset, S, P));
      Plan p = fused_cost_plan(preset, S, P, {"fuse", "align-layouts"});
      const Plan aligned = fused_cost_plan(preset, S, P, {"fuse"});
      ASSERT_EQ(p.steps.size(), aligned.steps.size());
      const FusedCost cost(p);
      const npu::DeviceSpec& spec = cache().spec();
      ASSERT_EQ(cost.seconds(spec), fused_seconds(p, cache()));
      std::vector<std::pair<Launch*, Launch>> saved;
      for (size_t s = 0; s < p.steps.size(); ++s)
        for (size_t i = 0; i < p.steps[s].launches.size(); ++i) {
          Launch& l = p.steps[s].launches[i];
          const Launch& other = aligned.steps[s].launches.at(i);
          if (l.op == other.op) continue;
          saved.emplace_back(&l, l);
          l = other;
          ASSERT_EQ(cost.seconds(spec), fused_seconds(p, cache())) << "rebuilt " << l.name;
        }
      EXPECT_GT(saved.size(), 4u) << "align-layouts changed too few launches to test";
      for (size_t i = 0; i < saved.size(); i += 2) {
        *saved[i].first = saved[i].second;
        ASSERT_EQ(cost.seconds(spec), fused_seconds(p, cache())) << "restored " << saved[i].first->name;
      }
    }
}

}  // namespace
}  // namespace tessera::compiler
