// Phase 2: one transformer block on the NPU (the model truncated to layer 0,
// same weights, the packed copy phases 3 and 6 use), every tap of the block
// gated against the oracle's layer-0 taps with thresholds derived from the
// op path (deploy_thresholds.h). Also writes the compiled artifacts:
// weights.safetensors, plan.txt, plan.md.
#include <chrono>

#include <fmt/format.h>

#include "deploy_internal.h"
#include "diagnose_run.h"
#include "tessera/core/error.h"
#include "tessera/oracle/taps.h"
#include "tessera/pipeline/deploy_thresholds.h"

namespace tessera::pipeline::detail {

namespace {
using Clock = std::chrono::steady_clock;
}

PhaseResult run_phase2(Context& ctx, std::vector<std::string>& artifacts) {
  std::shared_ptr<compiler::PackedWeights> pw = ctx.packed();
  const compiler::Plan& pre = ctx.prefill_plan();
  const compiler::Plan& dec = ctx.decode_plan();
  write_text(ctx.out / "plan.txt", pre.dump() + "\n" + dec.dump());
  write_text(ctx.out / "plan.md", plan_markdown(pre, dec));
  write_json(ctx.out / "spec.json", ctx.opts.spec.to_json());  // what `tessera run` simulates
  for (const char* a : {"weights.safetensors", "plan.txt", "plan.md", "spec.json"}) artifacts.push_back(a);
  return gate_block(ctx);
}

PhaseResult gate_block(Context& ctx) {
  const auto t0 = Clock::now();
  PhaseResult r{2, "block", "passed", {}, 0, nlohmann::json::object()};
  std::shared_ptr<compiler::PackedWeights> pw = ctx.packed();
  const compiler::Plan& pre = ctx.prefill_plan();
  const compiler::Plan& dec = ctx.decode_plan();

  model::ModelConfig c1 = ctx.config;
  c1.num_layers = 1;
  const compiler::Plan block = compiler::lower(c1, ctx.seq(), 0, ctx.cache(), ctx.plan_options(false));
  const OracleRun& orc = ctx.oracle();
  runtime::Executor exec(ctx.opts.spec, *pw);
  const runtime::ExecResult res = exec.run(block, host_inputs(c1, orc.prompt), nullptr,
                                           [&](size_t d, size_t t) { ctx.progress("phase 2: block", d, t); });
  const auto limits = block_thresholds(block.graph);
  for (const std::string& tap : oracle::layer_tap_names()) {
    const std::string key = "L0." + tap;
    auto ref = orc.taps.find(key);
    if (ref == orc.taps.end()) continue;  // a tap this architecture does not have (q_norm on Llama)
    auto got = res.values.find(key);
    auto lim = limits.find(key);
    if (got == res.values.end() || lim == limits.end()) {
      GateCheck c{key, {}, {}, false, "the NPU plan produced no value " + key};
      r.checks.push_back(std::move(c));
      continue;
    }
    NoiseModel nm = lim->second.noise;
    nm.row_width = stat_row_width(lim->second.op, c1.head_dim, ref->second.size(), ctx.seq());
    r.checks.push_back(make_check(key, compare(ref->second, got->second, nm), lim->second));
  }
  const int64_t local = add_local_checks(ctx, block.graph, res.values, orc.prompt, "local ", r);
  for (const auto& c : r.checks)
    if (!c.passed) r.status = "failed";
  r.details = {{"seq", ctx.seq()},
               {"local_checks", local},
               {"block_predicted_seconds", res.predicted_seconds},
               {"block_host_seconds", res.host_seconds},
               {"block_dispatches", block.dispatches()},
               {"prefill_predicted_seconds", pre.predicted_seconds()},
               {"decode_predicted_seconds", dec.predicted_seconds()},
               {"packed_weight_bytes", pw->bytes()},
               {"rules", nlohmann::json::array()}};
  for (const auto& rule : phase2_rules())
    r.details["rules"].push_back({{"name", rule.name}, {"value", rule.value}, {"reason", rule.reason}});
  if (r.status == "failed")
    attach(ctx, r, [&] { return diagnose_run(ctx, block.graph, res.values, host_inputs(c1, orc.prompt), "phase 2"); });
  r.host_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace tessera::pipeline::detail
