// tessera deploy: phases 0 to 7 (pipeline/deploy.h) into a deployment
// directory, resumable; one line per phase, then PASS or the failing gate in
// one line (exit 5).
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include "cli_common.h"
#include "command.h"
#include "tessera/core/error.h"
#include "tessera/core/log.h"
#include "tessera/core/mutants.h"
#include "tessera/model/gguf_model.h"
#include "tessera/pipeline/deploy.h"

namespace {

struct DeployArgs {
  std::string model_dir, preset, out, style = "default", spec = "xdna2", plant_bug;
  int layers = 0;
  int64_t seq = 17, tokens = 32;
  uint64_t seed = 1;
  int until = 7;
  int64_t eval_tokens = 64;
  bool fresh = false, json = false;
};

std::string phase_line(const tessera::pipeline::PhaseResult& p) {
  size_t failed = 0;
  for (const auto& c : p.checks) failed += c.passed ? 0 : 1;
  return fmt::format("phase {} {:<12} {:<18} {:>4} checks, {} failed, {:.2f} s", p.phase, p.name, p.status,
                     p.checks.size(), failed, p.host_seconds);
}

// Issue 16's budget: peak RSS at most 1.5x the weights in bf16 (source mapped
// plus one phase's working set) plus a fixed allowance: kResidentAllowance of
// packed weights kept resident, activations, taps and the process itself.
std::string rss_line(int64_t weight_bf16_bytes) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  constexpr double kMB = 1 << 20;
  const double peak = static_cast<double>(ru.ru_maxrss) * 1024.0 / kMB;  // ru_maxrss is KiB
  const double weights = static_cast<double>(weight_bf16_bytes) / kMB;
  const double allowance = static_cast<double>(tessera::compiler::PackedWeights::kResidentAllowance) / kMB;
  const double budget = 1.5 * weights + allowance;
  return fmt::format("peak RSS {:.0f} MB ({} budget {:.0f} MB: 1.5 x {:.0f} MB of bf16 weights + {:.0f} MB)", peak,
                     peak <= budget ? "within" : "OVER", budget, weights, allowance);
}

int run(const DeployArgs& a) {
  using namespace tessera;
  if (a.model_dir.empty() == a.preset.empty())
    throw_error<UsageError>("deploy: give exactly one of -m DIR|GGUF or --preset NAME");
  pipeline::DeployOptions o;
  o.model_dir = a.model_dir;
  if (!a.model_dir.empty() && model::is_gguf_file(a.model_dir)) {
    // The pipeline deploys HF directories; a GGUF becomes one inside the
    // deployment (bf16 weights, as the NPU computes with). Conversion is
    // deterministic, so a rerun hashes the same source and resumes.
    const std::filesystem::path gguf(a.model_dir);
    o.model_dir = std::filesystem::path(a.out) / "gguf" / gguf.stem();
    model::convert_gguf(a.model_dir, o.model_dir);
  }
  o.preset = a.preset;
  o.layers = a.layers;
  o.out = a.out;
  o.style = compiler::parse_plan_style(a.style);
  o.gate_seq = a.seq;
  o.continuation = a.tokens;
  o.seed = a.seed;
  o.resume = !a.fresh;
  o.last_phase = a.until;
  o.eval_tokens = a.eval_tokens;
  o.spec = cli::spec_from_arg(a.spec);
  // "pass:NAME" plants a compiler pass's bug (phases 4 / 5 roll it back);
  // anything else negates the packed weights it prefixes.
  check_mutant_env();
  if (a.plant_bug.starts_with("pass:")) o.plant_pass_bug = a.plant_bug.substr(5);
  else if (a.plant_bug.starts_with("mutant:")) set_active_mutant(mutant_by_name(a.plant_bug.substr(7)));
  else if (!a.plant_bug.empty()) o.tamper_packed = pipeline::negate_packed_weight(a.plant_bug);
  o.progress = [](const std::string& step, size_t done, size_t total) { report_progress(step, done, total); };
  const pipeline::DeployReport rep = pipeline::deploy(o);
  if (a.json) {
    std::printf("%s\n", rep.to_json().dump(2).c_str());
  } else {
    // Every predicted time below comes from this spec and calibration.
    std::printf("spec %s (calibration: %s)\n", o.spec.name.c_str(), o.spec.calibration.c_str());
    for (const auto& p : rep.phases) std::printf("%s\n", phase_line(p).c_str());
  }
  // Memory is what limits which models deploy on a machine (issue 16);
  // printed on failure too, where it matters most.
  if (!a.json) std::printf("%s\n", rss_line(rep.weight_bf16_bytes).c_str());
  if (!rep.passed()) throw_error<GateError>("deploy: {} failed {}", rep.model, rep.failure());
  if (!a.json)
    std::printf("PASS: %s deployed to %s (report.json, report.html, evaluation.md, plan.md, issues.md)\n",
                rep.model.c_str(), a.out.c_str());
  return 0;
}

tessera::cli::Action setup_deploy(CLI::App& app) {
  auto a = std::make_shared<DeployArgs>();
  auto* sub = app.add_subcommand("deploy", "Deploy a model onto the NPU: phases 0-7, each gated (7: the independent evaluator)");
  sub->add_option("-m,--model", a->model_dir, "Model directory (config.json + safetensors) or .gguf file");
  sub->add_option("--preset", a->preset, "Built-in preset with seeded synthetic weights");
  sub->add_option("--out", a->out, "Deployment directory (created; rerun resumes)")->required();
  sub->add_option("--layers", a->layers, "Keep only the first N layers")->check(CLI::PositiveNumber);
  sub->add_option("--style", a->style, "Plan style: default | per-op")->capture_default_str();
  sub->add_option("--seq", a->seq, "Gate prompt length in tokens")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{4096}));
  sub->add_option("--tokens", a->tokens, "Greedy tokens checked in phase 6")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  sub->add_option("--spec", a->spec, "Device: xdna2 (calibrated) | xdna2-sourced | xdna1 | spec JSON file")->capture_default_str();
  sub->add_option("--seed", a->seed, "Seed of the gate prompt and synthetic weights")->capture_default_str();
  sub->add_option("--until", a->until, "Stop after this phase (0 .. 7)")
      ->capture_default_str()
      ->check(CLI::IsMember({0, 1, 2, 3, 4, 5, 6, 7}));
  sub->add_option("--eval-tokens", a->eval_tokens, "Phase 7: teacher-forced decode steps the evaluator runs")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  sub->add_option("--plant-bug", a->plant_bug,
                  "Negate packed weights whose key starts with this (e.g. w:L0.v_proj@) on the "
                  "device, to see a gate fail; pass:NAME plants that compiler pass's bug "
                  "(phase 4 / 5 rolls the pass back and names it); mutant:NAME switches on a "
                  "subtle numeric mutant (core/mutants.h; also env TESSERA_MUTANT=NAME)");
  sub->add_flag("--fresh", a->fresh, "Redo every phase (ignore the manifest)");
  sub->add_flag("--json", a->json, "Print report.json instead of the phase lines");
  return [a] { return run(*a); };
}
TESSERA_COMMAND("deploy", setup_deploy);

}  // namespace
