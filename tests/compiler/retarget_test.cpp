// retarget() (retarget.h): a decode plan lowered at one position and moved to
// another is the plan lower() makes there, byte for byte in its text dump and
// in its predicted time, for the models and styles a session decodes with.
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/compiler/passes.h"
#include "tessera/compiler/retarget.h"
#include "tessera/core/error.h"
#include "compiler_test_util.h"

namespace tessera::compiler {
namespace {

using testing_util::cache;

Plan lower_at(const model::ModelConfig& c, int64_t P, PlanStyle style, int64_t context) {
  PlanOptions o;
  o.style = style;
  o.context = context;
  return lower(c, 1, P, cache(), o);
}

struct Bucket {
  int64_t base;                  // the bucket's first position (T = P + 1 a power of two)
  std::vector<int64_t> targets;  // later positions of the same bucket
};
const std::vector<Bucket> kBuckets = {{15, {16, 23, 30}}, {31, {32, 47, 62}}, {63, {64, 80, 95}}};

// Within a power-of-two bucket of cache lengths T = P + 1 (how a Session
// uses it: lowered at the bucket's first position, retargeted to the rest),
// for the architectures whose pass decisions do not move with T there (the
// tiny model and SmolLM2, as in tests/cli/bitexact_slow.sh), the retargeted
// plan is the one lower() makes at that position.
TEST(Retarget, DecodePlanMovedInsideItsBucketIsTheOneLowerMakesThere) {
  for (const char* preset : {"tiny", "smollm2-135m"})
    for (PlanStyle style : {PlanStyle::standard, PlanStyle::per_op}) {
      const model::ModelConfig c = testing_util::small_vocab(preset, 2);
      for (const Bucket& b : kBuckets) {
        const Plan base = lower_at(c, b.base, style, 96);
        for (const int64_t P : b.targets) {
          const Plan fresh = lower_at(c, P, style, 96);
          const Plan moved = retarget(base, c, P, cache());
          EXPECT_EQ(moved.dump(), fresh.dump()) << preset << " P " << b.base << " -> " << P;
          EXPECT_EQ(moved.predicted_seconds(), fresh.predicted_seconds()) << preset << " " << P;
          // The comparison sees a position change: the base itself differs.
          EXPECT_NE(base.dump(), fresh.dump()) << preset << " " << P;
        }
      }
    }
}

// Elsewhere the passes may decide otherwise at another T (qwen2.5-0.5b makes
// the KV cache resident at T = 48 but not at T = 32): the retargeted plan
// keeps the base's decisions - the same steps, host or NPU, the same launches
// in each - with every launch at the new position's shape.
TEST(Retarget, KeepsTheBasePlansDecisionsAtTheNewShapes) {
  for (const char* preset : {"qwen2.5-0.5b", "llama-3.2-1b"}) {
    const model::ModelConfig c = testing_util::small_vocab(preset, 2);
    for (const Bucket& b : kBuckets) {
      const Plan base = lower_at(c, b.base, PlanStyle::standard, 96);
      for (const int64_t P : b.targets) {
        const Plan moved = retarget(base, c, P, cache());
        const Graph graph = build_graph(c, 1, P);
        ASSERT_EQ(moved.steps.size(), base.steps.size()) << preset << " " << P;
        for (size_t i = 0; i < base.steps.size(); ++i) {
          EXPECT_EQ(moved.steps[i].kind, base.steps[i].kind) << preset << " step " << i;
          ASSERT_EQ(moved.steps[i].launches.size(), base.steps[i].launches.size()) << preset << " step " << i;
          for (const Launch& l : moved.steps[i].launches)
            EXPECT_EQ(shape_text(l.shape), shape_text(graph.nodes.at(l.node).shape)) << preset << " " << l.name;
        }
        EXPECT_EQ(moved.past, P);
      }
    }
  }
}

// A session retargets one plan in place from token to token: after a chain
// P0 -> P1 -> ... -> Pn it is the plan retarget() makes from P0 to Pn (the
// arena included), also where the cache's layout makes the activations
// change size (qwen2.5-0.5b), and a chain that revisits a position returns
// to that position's plan.
TEST(Retarget, InPlaceChainIsTheDirectRetarget) {
  for (const char* preset : {"smollm2-135m", "qwen2.5-0.5b"}) {
    const model::ModelConfig c = testing_util::small_vocab(preset, 2);
    for (const Bucket& b : kBuckets) {
      const Plan base = lower_at(c, b.base, PlanStyle::standard, 96);
      Plan chained = base;
      for (const int64_t P : b.targets) {
        retarget_in_place(chained, c, P, cache());
        const Plan direct = retarget(base, c, P, cache());
        EXPECT_EQ(chained.dump(), direct.dump()) << preset << " " << b.base << " -> " << P;
        EXPECT_EQ(chained.predicted_seconds(), direct.predicted_seconds()) << preset << " " << P;
      }
      retarget_in_place(chained, c, b.base, cache());
      EXPECT_EQ(chained.dump(), base.dump()) << preset << " back to " << b.base;
    }
  }
}

TEST(Retarget, RefusesPositionsPastTheContextAndAnotherModelsGraph) {
  const model::ModelConfig c = testing_util::small_vocab("tiny", 2);
  const Plan base = lower_at(c, 3, PlanStyle::standard, 32);
  EXPECT_THROW(retarget(base, c, 32, cache()), UsageError);  // S + P = 33 > 32
  EXPECT_THROW(retarget(base, c, -1, cache()), UsageError);
  // Three layers lower to more nodes than the base plan's two.
  EXPECT_THROW(retarget(base, testing_util::small_vocab("tiny", 3), 4, cache()), InternalError);
}

}  // namespace
}  // namespace tessera::compiler
