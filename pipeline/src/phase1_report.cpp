// Phase-1 report (text table, JSON) and the two model sources: a model
// directory with real weights, or a preset with seeded synthetic weights.
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/synth.h"
#include "tessera/pipeline/phase1.h"

namespace tessera::pipeline {

bool Phase1Report::passed() const {
  if (results.empty()) return false;  // a gate that judged nothing has not passed
  for (const auto& r : results)
    if (r.status != KernelStatus::pass) return false;
  return true;
}

namespace {

std::string fig(double v, const char* f = "{:.2e}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(f), v) : std::string("nan/inf");
}

bool judged(const KernelResult& r) {
  return r.status == KernelStatus::pass || r.status == KernelStatus::fail;
}

// "max_rel 1.2e-01 > 1.6e-02, cosine 0.51 < 0.9995"
std::string why(const KernelResult& r) {
  const Metrics& m = r.metrics;
  const Threshold& t = r.threshold;
  std::vector<std::string> parts;
  for (const std::string& f : r.failed) {
    if (f == "non_finite") parts.push_back(fmt::format("non_finite {} of {} values", m.non_finite, m.count));
    if (f == "max_rel") parts.push_back(fmt::format("max_rel {} > {}", fig(m.max_rel), fig(t.max_rel)));
    if (f == "mean_rel")
      parts.push_back(fmt::format("mean_rel {} > {}", fig(m.mean_rel), fig(t.mean_rel)));
    if (f == "pearson")
      parts.push_back(fmt::format("pearson {} < {}", fig(m.pearson, "{:.6f}"), t.min_pearson));
    if (f == "cosine")
      parts.push_back(fmt::format("cosine {} < {}", fig(m.cosine, "{:.6f}"), t.min_cosine));
    if (const std::string s = stat_failure(m, f); !s.empty()) parts.push_back(s);
  }
  if (m.worst_index >= 0)
    parts.push_back(fmt::format("worst element {}: got {:.6g}, oracle {:.6g}", m.worst_index,
                                m.worst_got, m.worst_ref));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

double KernelResult::ddr_gb_per_second() const {
  return predicted_seconds > 0 ? static_cast<double>(ddr_bytes) / predicted_seconds / 1e9 : 0.0;
}

double KernelResult::launch_ddr_gb_per_second() const {
  return launch_seconds > 0 ? static_cast<double>(ddr_bytes) / launch_seconds / 1e9 : 0.0;
}

double KernelResult::roofline_share() const {
  return launch_seconds > 0 ? roofline_seconds / launch_seconds : 0.0;
}

std::string Phase1Report::table() const {
  std::string out =
      seq == 1 ? fmt::format("phase 1 kernel gate: {} on {}, first decode step (P=0)\n", model, spec)
               : fmt::format("phase 1 kernel gate: {} on {}, prefill S={}, decode P={}\n", model,
                             spec, seq, seq);
  // launch_GBs and roof exclude the fixed dispatch overhead (fusion amortizes
  // it); roof is the share of the op's own roofline, c(ompute) or d(dr) roof.
  out += fmt::format("{:<7} {:<30} {:<58} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:<10} {:>6} {:>7} {:>10} {:>8} {:>7} {}\n",
                     "phase", "node", "op", "max_abs", "max_rel", "mean_rel", "pearson", "cosine",
                     "pred_us", "bound", "util", "ddr_GBs", "launch_GBs", "roof", "host_s", "result");
  for (const auto& r : results) {
    const bool j = judged(r) && r.metrics.count > 0;
    const Metrics& m = r.metrics;
    out += fmt::format("{:<7} {:<30} {:<58} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:<10} {:>6} {:>7} {:>10} {:>8} {:>7.2f} {}\n",
                       r.phase, fmt::format("{}", fmt::join(r.nodes, ",")), r.shape,
                       j ? fig(m.max_abs) : "-", j ? fig(m.max_rel) : "-", j ? fig(m.mean_rel) : "-",
                       j ? fig(m.pearson, "{:.6f}") : "-", j ? fig(m.cosine, "{:.6f}") : "-",
                       r.bound.empty() ? "-" : fmt::format("{:.1f}", r.predicted_seconds * 1e6),
                       r.bound.empty() ? "-" : r.bound,
                       r.bound.empty() ? "-" : fmt::format("{:.1f}%", r.utilization * 100),
                       r.bound.empty() ? "-" : fmt::format("{:.1f}", r.ddr_gb_per_second()),
                       r.bound.empty() ? "-" : fmt::format("{:.1f}", r.launch_ddr_gb_per_second()),
                       r.bound.empty() ? "-"
                                       : fmt::format("{:.1f}%{}", r.roofline_share() * 100,
                                                     r.roofline_bound.substr(0, 1)),
                       r.host_seconds, status_name(r.status));
  }
  int failures = 0;
  for (const auto& r : results) {
    if (r.status == KernelStatus::pass) continue;
    ++failures;
    out += fmt::format("{} {} {} [{}]: {}\n", status_name(r.status), r.phase, r.node, r.shape,
                       r.status == KernelStatus::fail ? why(r) : r.message);
  }
  out += fmt::format("{}: {} of {} (kernel, shape) pairs passed; host time {:.1f} s\n",
                     passed() ? "PASS" : "FAIL", results.size() - static_cast<size_t>(failures),
                     results.size(), host_seconds);
  return out;
}

nlohmann::json Phase1Report::to_json() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json j = {{"phase", r.phase},
                        {"node", r.node},
                        {"nodes", r.nodes},
                        {"shape", r.shape},
                        {"status", status_name(r.status)},
                        {"failed_metrics", r.failed},
                        {"message", r.message},
                        {"predicted_seconds", r.predicted_seconds},
                        {"bound", r.bound},
                        {"utilization", r.utilization},
                        {"macs", r.macs},
                        {"ddr_bytes", r.ddr_bytes},
                        {"ddr_gb_per_second", r.ddr_gb_per_second()},
                        {"launch_seconds", r.launch_seconds},
                        {"launch_ddr_gb_per_second", r.launch_ddr_gb_per_second()},
                        {"roofline_seconds", r.roofline_seconds},
                        {"roofline_bound", r.roofline_bound},
                        {"roofline_share", r.roofline_share()},
                        {"host_seconds", r.host_seconds},
                        {"threshold",
                         {{"max_rel", r.threshold.max_rel},
                          {"mean_rel", r.threshold.mean_rel},
                          {"min_pearson", r.threshold.min_pearson},
                          {"min_cosine", r.threshold.min_cosine}}}};
    if (judged(r)) j["metrics"] = pipeline::to_json(r.metrics);
    rows.push_back(std::move(j));
  }
  return {{"phase", 1},           {"gate", "kernels"}, {"model", model},
          {"spec", spec},         {"seq", seq},        {"passed", passed()},
          {"host_seconds", host_seconds}, {"results", rows}};
}

Phase1Report run_phase1_dir(const std::filesystem::path& dir, const npu::DeviceSpec& spec,
                            const Phase1Options& opts) {
  const model::ModelDir m = model::load_model_dir(dir);
  return run_phase1(m.config, m.weights, spec, opts);
}

Phase1Report run_phase1_preset(const std::string& preset, const npu::DeviceSpec& spec,
                               const Phase1Options& opts) {
  const model::ModelConfig c = model::preset(preset);
  // A private directory per call (pid + seed) so parallel runs do not collide.
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("tessera-gate-{}-{}-{}", preset, ::getpid(), opts.seed);
  struct Cleanup {
    std::filesystem::path p;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  } cleanup{dir};
  model::write_synthetic_model(c, dir, opts.seed, 1);
  const model::ModelDir m = model::load_model_dir(dir);
  Phase1Report rep = run_phase1(m.config, m.weights, spec, opts);
  rep.model = preset;
  return rep;
}

}  // namespace tessera::pipeline
