// DeployReport, phase JSON (written and read back on resume), plan.md and
// issues.md.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deploy_internal.h"
#include "tessera/core/error.h"

namespace tessera::pipeline {

namespace {

nlohmann::json threshold_json(const Threshold& t) {
  return {{"op", t.op}, {"max_rel", t.max_rel}, {"mean_rel", t.mean_rel},
          {"min_pearson", t.min_pearson}, {"min_cosine", t.min_cosine}, {"reason", t.reason},
          {"noise", {{"enabled", t.noise.enabled}, {"elem_roundings", t.noise.elem_roundings},
                     {"row_roundings", t.noise.row_roundings}, {"row_width", t.noise.row_width},
                     {"path", t.noise.path}}}};
}

std::string fig(double v, const char* f = "{:.3g}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(f), v) : std::string("nan");
}

}  // namespace

bool DeployReport::passed() const {
  if (phases.empty()) return false;
  return std::all_of(phases.begin(), phases.end(), [](const PhaseResult& p) { return p.status != "failed"; });
}

std::string DeployReport::failure() const {
  for (const PhaseResult& p : phases) {
    if (p.status != "failed") continue;
    for (const GateCheck& c : p.checks)
      if (!c.passed) return fmt::format("phase {} ({}): {} {}", p.phase, p.name, c.name, c.message);
    const std::string why = p.details.is_object() && p.details.contains("error")
                                ? p.details["error"].get<std::string>()
                                : "no check passed";
    return fmt::format("phase {} ({}): {}", p.phase, p.name, why);
  }
  return "";
}

nlohmann::json DeployReport::to_json() const {
  nlohmann::json ps = nlohmann::json::array();
  for (const auto& p : phases) ps.push_back(detail::phase_to_json(p));
  return {{"model", model}, {"passed", passed()}, {"failure", failure()}, {"phases", ps}};
}

namespace detail {

std::string metric_failures(const Metrics& m, const Threshold& t) {
  std::vector<std::string> parts;
  for (const std::string& f : failed_metrics(m, t)) {
    if (f == "non_finite") parts.push_back(fmt::format("non_finite {} of {} values", m.non_finite, m.count));
    if (f == "max_rel") parts.push_back(fmt::format("max_rel {} > {}", fig(m.max_rel), fig(t.max_rel)));
    if (f == "mean_rel") parts.push_back(fmt::format("mean_rel {} > {}", fig(m.mean_rel), fig(t.mean_rel)));
    if (f == "pearson") parts.push_back(fmt::format("pearson {} < {}", fig(m.pearson, "{:.6f}"), fig(t.min_pearson, "{:.6f}")));
    if (f == "cosine") parts.push_back(fmt::format("cosine {} < {}", fig(m.cosine, "{:.6f}"), fig(t.min_cosine, "{:.6f}")));
    if (const std::string s = stat_failure(m, f); !s.empty()) parts.push_back(s);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

GateCheck make_check(std::string name, const Metrics& m, const Threshold& t) {
  GateCheck c{std::move(name), m, t, false, ""};
  c.message = metric_failures(m, t);
  c.passed = c.message.empty();
  return c;
}

nlohmann::json phase_to_json(const PhaseResult& r) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : r.checks)
    checks.push_back({{"name", c.name}, {"passed", c.passed}, {"message", c.message},
                      {"metrics", to_json(c.metrics)}, {"threshold", threshold_json(c.threshold)}});
  return {{"phase", r.phase}, {"name", r.name}, {"status", r.status}, {"host_seconds", r.host_seconds},
          {"checks", checks}, {"details", r.details}};
}

PhaseResult phase_from_json(const nlohmann::json& j) {
  PhaseResult r;
  r.phase = j.at("phase").get<int>();
  r.name = j.at("name").get<std::string>();
  r.status = j.at("status").get<std::string>();
  r.host_seconds = j.at("host_seconds").get<double>();
  r.details = j.at("details");
  for (const auto& c : j.at("checks")) {
    GateCheck g;
    g.name = c.at("name").get<std::string>();
    g.passed = c.at("passed").get<bool>();
    g.message = c.at("message").get<std::string>();
    g.metrics = metrics_from_json(c.at("metrics"));
    const auto& t = c.at("threshold");
    g.threshold = {t.value("op", ""), t.value("max_rel", 0.0), t.value("mean_rel", 0.0),
                   t.value("min_pearson", 1.0), t.value("min_cosine", 1.0), t.value("reason", "")};
    if (t.contains("noise")) {  // every field threshold_json writes: report.json is audited against it
      const auto& n = t.at("noise");
      g.threshold.noise.enabled = n.value("enabled", false);
      g.threshold.noise.elem_roundings = n.value("elem_roundings", 0.0);
      g.threshold.noise.row_roundings = n.value("row_roundings", 0.0);
      g.threshold.noise.row_width = n.value("row_width", int64_t{0});
      g.threshold.noise.path = n.value("path", false);
    }
    r.checks.push_back(std::move(g));
  }
  return r;
}

void write_text(const fs::path& file, const std::string& text) {
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw_error<FileError>("cannot write {}", tmp.string());
    out << text;
    if (!out) throw_error<FileError>("write error on {}", tmp.string());
  }
  fs::rename(tmp, file);  // never a half-written artifact under the real name
}

void write_json(const fs::path& file, const nlohmann::json& j) { write_text(file, j.dump(2) + "\n"); }

std::vector<int32_t> top_ids(const std::vector<float>& row, size_t k) {
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  k = std::min(k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                    [&](int32_t a, int32_t b) {
                      const float x = row[static_cast<size_t>(a)], y = row[static_cast<size_t>(b)];
                      return x > y || (x == y && a < b);
                    });
  ids.resize(k);
  return ids;
}

namespace {

// The bounding terms of a plan's steps, most time first: "compute 61% (12 steps)".
std::string bound_summary(const compiler::Plan& p) {
  std::map<std::string, std::pair<double, int>> by;
  for (const auto& s : p.steps) {
    auto& [sec, n] = by[s.bound()];
    sec += s.seconds();
    ++n;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> v(by.begin(), by.end());
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
  std::vector<std::string> parts;
  const double total = std::max(p.predicted_seconds(), 1e-30);
  for (const auto& [b, st] : v)
    parts.push_back(fmt::format("{} {:.0f}% ({} steps)", b, 100 * st.first / total, st.second));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The slowest steps of a plan, one table row each.
std::string slowest_steps(const compiler::Plan& p, size_t n) {
  std::vector<const compiler::Step*> s;
  for (const auto& st : p.steps) s.push_back(&st);
  std::sort(s.begin(), s.end(), [](auto* a, auto* b) { return a->seconds() > b->seconds(); });
  std::string out = "| step | op | predicted us | bound |\n|---|---|---|---|\n";
  for (size_t i = 0; i < std::min(n, s.size()); ++i)
    out += fmt::format("| {} | {} | {:.1f} | {} |\n", s[i]->name(), s[i]->front().shape.op, s[i]->seconds() * 1e6,
                       s[i]->bound());
  return out;
}

}  // namespace

std::string plan_markdown(const compiler::Plan& prefill, const compiler::Plan& decode) {
  std::string md = fmt::format("# Plan: {} ({} style)\n\n", prefill.model, compiler::plan_style_name(prefill.style));
  md += "| call | S | P | steps | NPU dispatches | per layer | predicted ms |\n|---|---|---|---|---|---|---|\n";
  for (const auto* p : {&prefill, &decode})
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {:.3f} |\n", p == &prefill ? "prefill" : "decode",
                      p->seq, p->past, p->steps.size(), p->dispatches(), p->dispatches_per_layer(),
                      p->predicted_seconds() * 1e3);
  md += fmt::format("\nPrefill of {} tokens: {:.3f} ms predicted ({:.1f} tok/s); one decode token at "
                    "context {}: {:.3f} ms ({:.1f} tok/s).\n",
                    prefill.seq, prefill.predicted_seconds() * 1e3,
                    static_cast<double>(prefill.seq) / std::max(prefill.predicted_seconds(), 1e-30),
                    decode.past + 1, decode.predicted_seconds() * 1e3,
                    1.0 / std::max(decode.predicted_seconds(), 1e-30));
  md += "\n## What bounds the time\n\n";
  md += "- prefill: " + bound_summary(prefill) + "\n- decode: " + bound_summary(decode) + "\n";
  md += "\n## Slowest prefill steps\n\n" + slowest_steps(prefill, 8);
  md += "\n## Slowest decode steps\n\n" + slowest_steps(decode, 8);
  md += "\nThe full step list is in plan.txt (Plan::dump()).\n";
  return md;
}

std::string issues_markdown(const std::string& previous, const DeployReport& rep,
                            const std::vector<std::string>& notes) {
  std::string md = previous.empty() ? fmt::format("# Issues: {}\n", rep.model) : previous;
  int run = 1;
  for (size_t pos = 0; (pos = md.find("\n## Run ", pos)) != std::string::npos; ++pos) ++run;
  md += fmt::format("\n## Run {}: {}\n\n", run, rep.passed() ? "passed" : "FAILED");
  for (const auto& p : rep.phases) md += fmt::format("- phase {} ({}): {}\n", p.phase, p.name, p.status);
  if (!rep.passed()) md += "- failure: " + rep.failure() + "\n";
  for (const auto& n : notes) md += "- " + n + "\n";
  if (rep.passed() && notes.empty()) md += "- nothing to report\n";
  return md;
}

}  // namespace detail
}  // namespace tessera::pipeline
