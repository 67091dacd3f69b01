// retarget() (retarget.h): a decode plan lowered at one position and moved to
// another is the plan lower() makes there, byte for byte in its text dump and
// in its predicted time, for the models and styles a session decodes with.
#include <gtest/gtest.h>

#include "tessera/compiler/passes.h"
#include "tessera/compiler/retarget.h"
#include "tessera/core/error.h"
#include "compiler_test_util.h"

namespace tessera::compiler {
namespace {

DesignCache& cache() {
  static DesignCache c(npu::DeviceSpec::preset("xdna2"));
  return c;
}

Plan lower_at(const model::ModelConfig& c, int64_t P, PlanStyle style, int64_t context) {
  PlanOptions o;
  o.style = style;
  o.context = context;
  return lower(c, 1, P, cache(), o);
}

TEST(Retarget, DecodePlanMovedToAnotherPositionIsTheOneLowerMakesThere) {
  for (const char* preset : {"tiny", "smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b"})
    for (PlanStyle style : {PlanStyle::standard, PlanStyle::per_op}) {
      const model::ModelConfig c = testing_util::small_vocab(preset, 2);
      const int64_t context = 96;
      for (int64_t base_p : {0, 15}) {
        const Plan base = lower_at(c, base_p, style, context);
        for (int64_t P : {1, 16, 31, 95}) {
          const Plan fresh = lower_at(c, P, style, context);
          const Plan moved = retarget(base, c, P, cache());
          EXPECT_EQ(moved.dump(), fresh.dump()) << preset << " P " << base_p << " -> " << P;
          EXPECT_EQ(moved.predicted_seconds(), fresh.predicted_seconds()) << preset << " " << P;
          // The comparison sees a position change: the base itself differs.
          if (P != base_p) {
            EXPECT_NE(base.dump(), fresh.dump()) << preset << " " << P;
          }
        }
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
