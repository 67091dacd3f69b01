// Phase 7 inside `tessera deploy`: the evaluator (evaluate.h) on the
// directory as phases 0-6 left it. Only glue: the evaluator itself takes
// nothing from the deploy context but the directory and the source path.
#include <chrono>

#include <fmt/format.h>

#include "deploy_internal.h"
#include "tessera/pipeline/evaluate.h"

namespace tessera::pipeline::detail {

PhaseResult run_phase7(Context& ctx, std::vector<std::string>& artifacts) {
  const auto t0 = std::chrono::steady_clock::now();
  EvaluateOptions o;
  o.dir = ctx.out;
  o.source = ctx.source_dir();
  o.decode_tokens = ctx.opts.eval_tokens;
  o.progress = ctx.opts.progress;
  const Evaluation e = evaluate(o);
  write_evaluation(ctx.out, e);
  artifacts.push_back("evaluation.json");
  artifacts.push_back("evaluation.md");
  PhaseResult r{7, "evaluation", e.verdict() == "FAIL" ? "failed" : "passed", {}, 0, nlohmann::json::object()};
  int warnings = 0;
  for (const EvalCheck& c : e.checks) {
    if (c.severity == "ok") continue;
    warnings += c.severity == "warning";
    GateCheck g;
    g.name = c.area + ": " + c.name;
    g.passed = c.severity != "fail";
    g.message = (c.severity == "warning" ? "warning: " : "") + c.evidence;
    r.checks.push_back(std::move(g));
  }
  r.details = {{"verdict", e.verdict()}, {"checks", e.checks.size()}, {"warnings", warnings},
               {"measures", e.measures}};
  r.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tessera::pipeline::detail
