// Phase 7's evaluator (evaluate.h): runs the audits and measures in order and
// turns their checks into a verdict, evaluation.json and evaluation.md.
#include <chrono>
#include <fstream>

#include <fmt/format.h>

#include "evaluate_internal.h"
#include "tessera/core/error.h"

namespace tessera::pipeline {

namespace eval {

void Checks::ok(const std::string& area, const std::string& name, const std::string& evidence) {
  all.push_back({area, name, "ok", evidence});
}
void Checks::warn(const std::string& area, const std::string& name, const std::string& evidence) {
  all.push_back({area, name, "warning", evidence});
}
void Checks::fail(const std::string& area, const std::string& name, const std::string& evidence) {
  all.push_back({area, name, "fail", evidence});
}

std::optional<nlohmann::json> read_json(const fs::path& dir, const std::string& rel, Checks& c,
                                        const std::string& area) {
  std::ifstream in(dir / rel);
  if (!in) {
    c.fail(area, rel, "missing");
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) {
    c.fail(area, rel, "does not parse as JSON");
    return std::nullopt;
  }
  return j;
}

}  // namespace eval

std::string Evaluation::verdict() const {
  bool warned = false;
  for (const EvalCheck& c : checks) {
    if (c.severity == "fail") return "FAIL";
    warned = warned || c.severity == "warning";
  }
  return warned ? "PASS-with-warnings" : "PASS";
}

nlohmann::json Evaluation::to_json() const {
  nlohmann::json cs = nlohmann::json::array();
  for (const EvalCheck& c : checks)
    cs.push_back({{"area", c.area}, {"name", c.name}, {"severity", c.severity}, {"evidence", c.evidence}});
  return {{"format", "tessera-evaluation"}, {"version", 1}, {"model", model},
          {"verdict", verdict()}, {"checks", cs}, {"measures", measures}};
}

std::string Evaluation::markdown() const {
  std::string md = fmt::format("# Evaluation (phase 7): {}\n\n**Verdict: {}**\n\n", model, verdict());
  md += "Re-derived from the raw artifacts by the evaluator's own code path (pipeline/src/evaluate*.cpp); "
        "report.json's verdicts are not read as truth. Limits come from the canonical threshold tables, "
        "fixed before the run. Times are predictions of the timing model.\n";
  for (const char* sev : {"fail", "warning"}) {
    bool head = false;
    for (const EvalCheck& c : checks) {
      if (c.severity != sev) continue;
      if (!head) md += fmt::format("\n## {}\n\n", std::string(sev) == "fail" ? "Failures" : "Warnings");
      head = true;
      md += fmt::format("- **{}** ({}): {}\n", c.name, c.area, c.evidence);
    }
  }
  md += "\n## Every check\n\n| area | check | result | evidence |\n|---|---|---|---|\n";
  for (const EvalCheck& c : checks) {
    std::string ev = c.evidence;
    for (char& ch : ev)
      if (ch == '|' || ch == '\n') ch = ' ';
    md += fmt::format("| {} | {} | {} | {} |\n", c.area, c.name, c.severity, ev);
  }
  if (measures.contains("limits")) {
    md += "\n## Limits of the measures (fixed before the run)\n\n";
    for (const auto& l : measures["limits"])
      md += fmt::format("- {}: {} ({})\n", l.value("name", ""), l["value"].dump(), l.value("derivation", ""));
  }
  if (measures.contains("reference")) md += fmt::format("\nReference text: {}.\n", measures["reference"].get<std::string>());
  return md;
}

Evaluation evaluate(const EvaluateOptions& opts) {
  if (!std::filesystem::exists(opts.dir / "manifest.json"))
    throw_error<InputError>("evaluate: {} is not a deployment (no manifest.json)", opts.dir.string());
  const auto t0 = std::chrono::steady_clock::now();
  eval::Checks c;
  eval::Loaded d;
  eval::audit_integrity(opts.dir, c);
  eval::load_deployment(d, opts, c);
  eval::audit_plan(d, c);
  eval::audit_weights(d, c);
  eval::audit_totals(d, c);
  eval::audit_thresholds(d, c);
  eval::audit_report(opts.dir, c);
  Evaluation e;
  e.model = d.config ? d.config->name : opts.dir.filename().string();
  eval::measure_numerics(d, opts, c, e.measures);
  eval::measure_determinism(d, c, e.measures);
  e.checks = std::move(c.all);
  e.measures["host_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return e;
}

void write_evaluation(const std::filesystem::path& dir, const Evaluation& e) {
  const std::pair<std::string, std::string> files[] = {{"evaluation.json", e.to_json().dump(2) + "\n"},
                                                       {"evaluation.md", e.markdown()}};
  for (const auto& [name, text] : files) {
    const auto tmp = dir / (name + ".tmp");
    {
      std::ofstream out(tmp, std::ios::binary);
      if (!out) throw_error<FileError>("cannot write {}", tmp.string());
      out << text;
    }
    std::filesystem::rename(tmp, dir / name);
  }
}

}  // namespace tessera::pipeline
