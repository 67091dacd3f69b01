// tessera evaluate DIR: phase 7, the independent evaluator (pipeline/
// evaluate.h), on a deployment directory. Writes evaluation.json,
// evaluation.md and report.html into it; when the manifest holds a phase 7
// (deploy ran it) its record is updated to this verdict, so that a FAIL also
// stops `tessera run`. Exit 0 for PASS / PASS-with-warnings, 5 for FAIL.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "command.h"
#include "tessera/core/error.h"
#include "tessera/core/log.h"
#include "tessera/pipeline/evaluate.h"
#include "tessera/pipeline/manifest.h"
#include "tessera/pipeline/report_html.h"

namespace {

struct EvalArgs {
  std::string dir, source;
  int64_t tokens = 64, max_prompt = 64;
  bool json = false;
};

int run(const EvalArgs& a) {
  using namespace tessera;
  const std::filesystem::path dir(a.dir);
  if (!std::filesystem::exists(dir / "manifest.json"))
    throw_error<InputError>("evaluate: {} is not a deployment (no manifest.json; run tessera deploy first)", dir.string());
  pipeline::EvaluateOptions o;
  o.dir = dir;
  o.source = a.source;
  o.decode_tokens = a.tokens;
  o.max_prompt = a.max_prompt;
  o.progress = [](const std::string& step, size_t done, size_t total) { report_progress(step, done, total); };
  pipeline::Evaluation e;
  {
    const pipeline::DirLock lock(dir, pipeline::DirLock::Mode::exclusive, "evaluate");
    e = pipeline::evaluate(o);
    pipeline::write_evaluation(dir, e);
    std::string problem;
    pipeline::Manifest m = pipeline::Manifest::load(dir, &problem);
    if (problem.empty() && m.phases.count(7)) {
      m.record(dir, "evaluation.json", 7);
      m.record(dir, "evaluation.md", 7);
      m.phases[7].status = e.verdict() == "FAIL" ? "failed" : "passed";
      m.save(dir);
    }
    pipeline::write_report_html(dir);
  }
  if (a.json) {
    std::printf("%s\n", e.to_json().dump(2).c_str());
  } else {
    for (const auto& c : e.checks)
      if (c.severity != "ok") std::printf("%s %s: %s: %s\n", c.severity.c_str(), c.area.c_str(), c.name.c_str(), c.evidence.c_str());
    std::printf("%s: %s (%zu checks; %s/evaluation.md, report.html)\n", e.verdict().c_str(), e.model.c_str(),
                e.checks.size(), a.dir.c_str());
  }
  if (e.verdict() == "FAIL") {
    for (const auto& c : e.checks)
      if (c.severity == "fail")
        throw_error<GateError>("evaluate: {} FAIL: {} ({}): {}", e.model, c.name, c.area, c.evidence);
  }
  return 0;
}

tessera::cli::Action setup_evaluate(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* sub = app.add_subcommand("evaluate", "Phase 7: re-derive a deployment's verdicts independently (PASS / PASS-with-warnings / FAIL)");
  sub->add_option("dir", a->dir, "Deployment directory (tessera deploy --out)")->required();
  sub->add_option("--source", a->source, "Source model directory (default: the one phase0.json names)");
  sub->add_option("--tokens", a->tokens, "Teacher-forced decode steps over the reference text")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  sub->add_option("--max-prompt", a->max_prompt, "Cap of the longest fresh prompt (simulation time)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{17}, int64_t{4096}));
  sub->add_flag("--json", a->json, "Print evaluation.json instead of the findings");
  return [a] { return run(*a); };
}
TESSERA_COMMAND("evaluate", setup_evaluate);

}  // namespace
