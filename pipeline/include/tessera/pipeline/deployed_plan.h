#pragma once
// The plans a deployment was gated with (plan_final.txt: the prefill and the
// decode plan phases 4 and 5 kept, which phase 6 ran), turned back into the
// session options that execute exactly those plans. `run` (and everything
// that generates from a deployment) must not compile its own plans: a style,
// context or pass pipeline other than the gated one would run code no gate
// has seen (a pass rolled back in phase 4 applied again, a per-op deployment
// run with the default passes).
//
// The session lowers a plan per (S, P) bucket, so the stored text cannot be
// executed as is for every call. Instead the stored plans' options are
// re-lowered at their own (S, P) and the dumps compared byte for byte: the
// lowering that reproduces the gated plans exactly is the one the session
// uses. A difference (other builders, another spec, an edited plan) is refused.
#include <filesystem>
#include <string>

#include "tessera/compiler/plan.h"
#include "tessera/model/config.h"
#include "tessera/npu/device_spec.h"
#include "tessera/runtime/session.h"

namespace tessera::pipeline {

struct DeployedPlans {
  std::string prefill_text, decode_text;  // the two dumps as stored
  compiler::Plan prefill, decode;         // parsed back (parse_plan)
};

// Reads and parses DIR/plan_final.txt. InputError naming the file when it is
// missing (a deployment from before phases 4 / 5: redeploy), malformed, made
// for another spec or with layout keys the builders no longer produce.
DeployedPlans load_deployed_plans(const std::filesystem::path& dir, compiler::DesignCache& cache);

// Session options that lower exactly the stored plans: their style, context,
// host model and each phase's pass pipeline. Throws InputError naming the
// first differing line when re-lowering `config` with them at the stored
// (S, P) does not reproduce the stored text byte for byte.
runtime::SessionOptions gated_session_options(const DeployedPlans& plans, const model::ModelConfig& config,
                                              compiler::DesignCache& cache);

}  // namespace tessera::pipeline
