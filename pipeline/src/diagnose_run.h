#pragma once
// The deploy phases' hooks into the diagnosers (diagnose.h, diagnose_run.cpp).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "deploy_internal.h"
#include "tessera/compiler/graph.h"
#include "tessera/pipeline/diagnose.h"
#include "tessera/pipeline/phase1.h"

namespace tessera::pipeline::detail {

// Phase 1: the Phase1Options::on_failure hook, diagnosing each failed kernel
// as it ran into `out` (in the order of the report's failed results).
std::function<void(const KernelFailure&)> phase1_diagnoser(Context& ctx, std::vector<Diagnosis>& out);
// Appends each diagnosis to its failed check's message, to issues.md and to
// the phase's details["diagnoses"].
void attach_phase1(Context& ctx, PhaseResult& r, const Phase1Report& rep, const std::vector<Diagnosis>& ds);

// Phases 2 / 3: the diagnosis of the first node of `g` whose NPU output (in
// `npu`, every value of the run) disagrees with the oracle op on the NPU's own
// inputs; nullopt when every node agrees. `last_row`: the row a last_row
// input takes (-1: the last), as the run took it (a bucketed prefill's last
// real token).
std::optional<Diagnosis> diagnose_run(Context& ctx, const compiler::Graph& g, const runtime::Values& npu,
                                      const runtime::Values& host, const std::string& phase,
                                      int64_t last_row = -1);
// Phase 6: the first decode step (the oracle's first token after the gate
// prompt, on the NPU prefill's own KV cache) run on the executor keeping every
// value, then diagnose_run on it.
std::optional<Diagnosis> diagnose_decode(Context& ctx);
// Runs `run` and appends its diagnosis (or "unknown" for nullopt) to the first failed check's
// message, to issues.md and to details["diagnoses"].
// `run` throwing an Error leaves an issue line instead: the gate's verdict stands.
void attach(Context& ctx, PhaseResult& r, const std::function<std::optional<Diagnosis>()>& run);

}  // namespace tessera::pipeline::detail
