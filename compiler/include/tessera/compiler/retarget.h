#pragma once
// Moving a lowered plan to another past length without re-running its passes.
#include <cstdint>

#include "tessera/compiler/plan.h"

namespace tessera::compiler {

// `base` (lowered for `config`) moved to `past` cached positions: the launches
// whose shape depends on P (attention, kv_append) rebuilt at the new shape with
// the base's tiles, every pass decision kept, figures recomputed
// (plan_retarget.cpp). Equal to lower() at `past` whenever the passes would
// decide there as they did at base.past. UsageError when seq + past exceeds
// the context; InternalError when `config` lowers to another graph.
Plan retarget(const Plan& base, const model::ModelConfig& config, int64_t past, DesignCache& cache);
// The same on `plan` itself (a plan lowered or retargeted before), without
// copying the launches that keep their shape: a decode session's per-token
// step. On an exception `plan` is left part-way and must be dropped.
void retarget_in_place(Plan& plan, const model::ModelConfig& config, int64_t past,
                       DesignCache& cache);

}  // namespace tessera::compiler
