// Plan::dump (stable text for golden tests) and Plan::to_json (the CLI).
// Times are printed with 3 significant digits: enough to read a plan, and
// stable against last-bit changes in the timing model's float sums.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/compiler/plan.h"

namespace tessera::compiler {
namespace {

// 3 significant digits in the largest unit that keeps them without an
// exponent: "46.6us", "2.94ms", "1.2s".
std::string time_text(double seconds) {
  for (const auto& [scale, unit] : {std::pair{1e6, "us"}, std::pair{1e3, "ms"}}) {
    const std::string t = fmt::format("{:.3g}", seconds * scale);
    if (t.find('e') == std::string::npos && std::abs(seconds * scale) < 999.5) return t + unit;
  }
  return fmt::format("{:.3g}s", seconds);
}

std::string tiles_text(const kernels::TileOptions& t) {
  if (t.empty()) return "-";
  std::string out;
  for (const auto& [k, v] : t) out += fmt::format("{}{}={}", out.empty() ? "" : ",", k, v);
  return out;
}

const char* buffer_kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::weight: return "weight";
    case BufferKind::activation: return "activation";
    case BufferKind::kv_cache: return "kv_cache";
    case BufferKind::io: return "io";
  }
  return "?";
}

// Seconds and NPU dispatches per layer (-1: the model-level steps).
struct LayerTotal {
  double seconds = 0;
  int64_t dispatches = 0;
};
std::map<int, LayerTotal> per_layer(const Plan& p) {
  std::map<int, LayerTotal> out;
  for (const Step& s : p.steps) {
    LayerTotal& t = out[p.graph.nodes[s.node].layer];
    t.seconds += s.seconds();
    t.dispatches += s.kind == StepKind::npu;
  }
  return out;
}

// Bounding terms by the time of the steps they bound, largest first (ties by
// name). The host re-layout around a dispatch is a term of its own: charging
// it to the dispatch's bound would hide the largest cost of per-op plans.
std::vector<std::pair<std::string, double>> bound_times(const Plan& p) {
  std::map<std::string, double> by;
  for (const Step& s : p.steps) {
    by[s.bound()] += s.seconds() - s.relayout_seconds;
    if (s.relayout_seconds > 0) by["relayout"] += s.relayout_seconds;
  }
  std::vector<std::pair<std::string, double>> v(by.begin(), by.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return v;
}

}  // namespace

std::string Plan::dump() const {
  std::string out = fmt::format("plan {} style={} S={} P={} context={} spec={}\n", model,
                                plan_style_name(style), seq, past, context, spec);
  out += fmt::format("steps ({}, {} npu dispatches)\n", steps.size(), dispatches());
  for (const Step& s : steps) {
    std::string t = time_text(s.seconds());
    if (s.kind == StepKind::npu && s.relayout_seconds > 0)
      t += fmt::format(" (relayout {})", time_text(s.relayout_seconds));
    out += fmt::format("  {:<4} {:<16} {:<58} {:<24} {} {}\n",
                       s.kind == StepKind::npu ? "npu" : "host", s.name, shape_text(s.shape),
                       tiles_text(s.tiles), t, s.bound());
  }
  int64_t total_bytes = 0;
  for (const BufferDecl& b : buffers) total_bytes += b.bytes;
  out += fmt::format("buffers ({}, {} bytes)\n", buffers.size(), total_bytes);
  for (const BufferDecl& b : buffers)
    out += fmt::format("  {:<10} {:<32} {}\n", buffer_kind_name(b.kind), b.name, b.bytes);
  for (const auto& [layer, t] : per_layer(*this))
    out += fmt::format("{:<6} {} {} dispatches\n",
                       layer < 0 ? std::string("model") : fmt::format("L{}", layer), time_text(t.seconds),
                       t.dispatches);
  out += fmt::format("total {} {} dispatches, {} per layer\n", time_text(predicted_seconds()),
                     dispatches(), dispatches_per_layer());
  const auto bounds = bound_times(*this);
  const double total = predicted_seconds();
  for (size_t i = 0; i < bounds.size() && i < 3; ++i)
    out += fmt::format("bound {:<10} {} ({:.3g}%)\n", bounds[i].first, time_text(bounds[i].second),
                       total > 0 ? 100 * bounds[i].second / total : 0.0);
  return out;
}

nlohmann::json Plan::to_json() const {
  using nlohmann::json;
  json j = {{"model", model},
            {"style", plan_style_name(style)},
            {"spec", spec},
            {"seq", seq},
            {"past", past},
            {"context", context},
            {"predicted_seconds", predicted_seconds()},
            {"dispatches", dispatches()},
            {"dispatches_per_layer", dispatches_per_layer()}};
  json steps_j = json::array();
  for (const Step& s : steps) {
    json st = {{"kind", s.kind == StepKind::npu ? "npu" : "host"},
               {"name", s.name},
               {"op", s.shape.op},
               {"layer", graph.nodes[s.node].layer},
               {"shape", shape_text(s.shape)},
               {"tiles", s.tiles},
               {"seconds", s.seconds()},
               {"relayout_seconds", s.relayout_seconds},
               {"bound", s.bound()},
               {"weight_layouts", s.weight_layouts}};
    if (s.kind == StepKind::npu) st["design"] = s.timing.design;
    steps_j.push_back(std::move(st));
  }
  j["steps"] = std::move(steps_j);
  json bufs = json::array();
  for (const BufferDecl& b : buffers)
    bufs.push_back({{"name", b.name}, {"kind", buffer_kind_name(b.kind)}, {"bytes", b.bytes}});
  j["buffers"] = std::move(bufs);
  json bounds = json::array();
  for (const auto& [name, secs] : bound_times(*this))
    bounds.push_back({{"bound", name}, {"seconds", secs}});
  j["bounds"] = std::move(bounds);
  return j;
}

}  // namespace tessera::compiler
