// deploy(): phases 0 to 7 in order with resume (deploy.h). A phase is
// skipped only when the manifest says it passed, every artifact it wrote still
// has its recorded sha256 (and, where it can be re-derived from the source and
// options, is what they give), and what it read (options, source, every earlier
// artifact) hashes the same; anything else is redone with every later phase,
// and issues.md says why (manifest.h: the verdict chain).
#include <exception>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deploy_internal.h"
#include "tessera/core/mutants.h"
#include "tessera/core/error.h"
#include "tessera/pipeline/report_html.h"

namespace tessera::pipeline {

namespace {

using detail::Context;
using PhaseFn = PhaseResult (*)(Context&, std::vector<std::string>&);

struct PhaseEntry {
  int phase;
  PhaseFn run;
};

constexpr PhaseEntry kPhases[] = {{0, detail::run_phase0},
                                  {1, detail::run_phase1_gate},
                                  {2, detail::run_phase2},
                                  {3, detail::run_phase3},
                                  {4, detail::run_phase4},
                                  {5, detail::run_phase5},
                                  {6, detail::run_phase6},
                                  {7, detail::run_phase7}};

std::string phase_file(int p) { return fmt::format("phase{}.json", p); }

// DESIGN.md's phase names, for a phase that ended in an error before naming itself.
std::string phase_name(int p) {
  static const char* const kNames[] = {"oracle", "kernels", "block", "model", "prefill", "decode", "integration", "evaluation"};
  return p >= 0 && p < 8 ? kNames[p] : fmt::format("phase{}", p);
}

std::string read_file(const std::filesystem::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The skip decision; every reason to redo a previously passed phase becomes an issue line.
bool can_skip(Context& ctx, int p) {
  if (!ctx.opts.resume) return false;
  auto it = ctx.manifest.phases.find(p);
  if (it == ctx.manifest.phases.end()) return false;
  if (it->second.status != "passed") {
    ctx.issues.push_back(fmt::format("phase {} had status '{}': redone", p, it->second.status));
    return false;
  }
  if ((ctx.opts.tamper_packed && p >= 2) || (active_mutant() != Mutant::none && p >= 1)) {
    ctx.issues.push_back(fmt::format("phase {} redone: a planted bug is active", p));
    return false;
  }
  std::vector<std::string> stale = ctx.manifest.stale(ctx.hasher(), p);
  for (const std::string& s : ctx.underived(p)) stale.push_back(s);
  if (!stale.empty()) {
    ctx.issues.push_back(fmt::format("phase {} redone, its artifacts are not trusted: {}", p, fmt::join(stale, "; ")));
    return false;
  }
  std::vector<std::string> changed;
  const auto now = ctx.inputs_of(p);
  for (const auto& [name, sha] : now) {
    auto old = it->second.inputs.find(name);
    if (old == it->second.inputs.end() || old->second != sha) changed.push_back(name);
  }
  for (const auto& [name, sha] : it->second.inputs)
    if (!now.count(name)) changed.push_back(name);
  if (!changed.empty()) {
    ctx.issues.push_back(fmt::format("phase {} redone: its inputs changed ({})", p, fmt::join(changed, ", ")));
    return false;
  }
  return true;
}

// A phase about to run drops itself and every later phase from the manifest
// and is saved as "running" first: if it fails or is killed, nothing after it
// still claims to have passed, and a resume redoes it.
PhaseResult run_one(Context& ctx, const PhaseEntry& e) {
  std::erase_if(ctx.manifest.phases, [&](const auto& kv) { return kv.first >= e.phase; });
  std::erase_if(ctx.manifest.artifacts, [&](const auto& kv) { return kv.second.phase >= e.phase; });
  ctx.forget_hashes();
  auto inputs = ctx.inputs_of(e.phase);
  ctx.manifest.phases[e.phase] = {"running", inputs};
  ctx.manifest.save(ctx.out);
  std::vector<std::string> artifacts;
  PhaseResult r;
  try {
    r = e.run(ctx, artifacts);
  } catch (const std::exception& err) {
    // Not a gate but an error (bad input, a device limit, a bug): the phase
    // failed for that reason, report.json and issues.md say so, and the error
    // goes on to the caller once they are written.
    r = PhaseResult{e.phase, phase_name(e.phase), "failed", {}, 0, {{"error", err.what()}}};
    ctx.failure = std::current_exception();
  }
  ctx.release_pages();
  detail::write_json(ctx.out / phase_file(e.phase), detail::phase_to_json(r));
  artifacts.push_back(phase_file(e.phase));
  // Artifacts before status: a crash in between leaves a phase that is redone.
  for (const auto& a : artifacts) ctx.manifest.record(ctx.out, a, e.phase);
  ctx.forget_hashes();
  ctx.manifest.phases[e.phase] = {r.status, inputs};
  ctx.manifest.save(ctx.out);
  return r;
}

}  // namespace

std::function<void(compiler::PackedWeights&)> negate_packed_weight(const std::string& key_prefix) {
  return [key_prefix](compiler::PackedWeights& pw) {
    bool found = false;
    for (const std::string& k : pw.keys()) {
      if (!k.starts_with(key_prefix)) continue;
      found = true;
      for (auto& [name, buf] : pw.get_mut(k)) {
        const std::span<std::byte> bytes = buf.mutable_bytes();  // a private copy of a mapped buffer
        for (size_t i = 1; i < bytes.size(); i += 2) bytes[i] ^= std::byte{0x80};  // bf16 sign bit (LE)
      }
    }
    if (!found) throw_error<UsageError>("planted bug: no packed weight key starts with '{}'", key_prefix);
  };
}

DeployReport deploy(const DeployOptions& opts) {
  Manifest manifest;
  Context ctx(opts, manifest);  // checks every option before anything is written
  std::filesystem::create_directories(ctx.out);
  const DirLock lock(ctx.out, DirLock::Mode::exclusive, "deploy");
  std::string problem;
  if (opts.resume) manifest = Manifest::load(opts.out, &problem);
  if (!problem.empty()) ctx.issues.push_back(problem);
  DeployReport rep;
  rep.model = ctx.config.name;
  for (const auto& s : model::tensor_specs(ctx.config)) rep.weight_bf16_bytes += 2 * shape_numel(s.shape);
  for (const PhaseEntry& e : kPhases) {
    if (e.phase > opts.last_phase) break;
    if (e.phase == 6) detail::load_optimized_passes(ctx, 5);  // phases 4 / 5 ran or were resumed
    if (can_skip(ctx, e.phase)) {
      std::ifstream in(ctx.out / phase_file(e.phase));
      PhaseResult r = detail::phase_from_json(nlohmann::json::parse(in));
      r.status = "skipped (resumed)";
      rep.phases.push_back(std::move(r));
      continue;
    }
    // The evaluator audits report.json against the phase files: it must exist
    // and cover phases 0-6 before phase 7 runs (rewritten with 7 below).
    if (e.phase == 7) detail::write_json(ctx.out / "report.json", rep.to_json());
    rep.phases.push_back(run_one(ctx, e));
    if (rep.phases.back().status == "failed") {
      ctx.issues.push_back(fmt::format("stopped at phase {}: later phases not run", e.phase));
      break;
    }
  }
  detail::write_json(ctx.out / "report.json", rep.to_json());
  try {
    detail::write_text(ctx.out / "report.html", report_html(ctx.out));
  } catch (const std::exception& e) {  // the page is a view; the gates' verdicts stand without it
    ctx.issues.push_back(fmt::format("report.html not written: {}", e.what()));
  }
  const auto issues = ctx.out / "issues.md";
  detail::write_text(issues, detail::issues_markdown(std::filesystem::exists(issues) ? read_file(issues) : "",
                                                     rep, ctx.issues));
  if (ctx.failure) std::rethrow_exception(ctx.failure);
  return rep;
}

}  // namespace tessera::pipeline
