// Plan::dump (the plan IR as text; plan_parse.cpp reads it back) and
// Plan::to_json (the CLI). Times are printed with 3 significant digits: enough
// to read a plan, and stable against last-bit changes in the timing model's
// float sums. Lines after the buffers are derived totals the parser skips.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "plan_text.h"
#include "tessera/compiler/plan.h"

namespace tessera::compiler {

namespace detail {

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

// "op K=1 M=2 | eps=1e-05": dims, then attrs in shortest round-trip form.
std::string ir_shape(const kernels::OpShape& s) {
  std::string out = s.op;
  for (const auto& [k, v] : s.dims) out += fmt::format(" {}={}", k, v);
  out += " |";
  for (const auto& [k, v] : s.attrs) out += fmt::format(" {}={}", k, v);
  return out;
}

std::string keys_text(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ",") + (k.empty() ? std::string("-") : k);
  return out.empty() ? "-" : out;
}

std::string num_or_dash(int64_t v) { return v < 0 ? "-" : std::to_string(v); }

}  // namespace detail

namespace {

using namespace detail;

// Seconds and NPU dispatches per layer (-1: the model-level steps).
struct LayerTotal {
  double seconds = 0;
  int64_t dispatches = 0;
};
std::map<int, LayerTotal> per_layer(const Plan& p) {
  std::map<int, LayerTotal> out;
  for (const Step& s : p.steps) {
    LayerTotal& t = out[p.layer_of(s)];
    t.seconds += s.seconds();
    t.dispatches += s.kind == StepKind::npu;
  }
  return out;
}

// Bounding terms by time, largest first (ties by name).
std::vector<std::pair<std::string, double>> bound_times(const Plan& p) {
  const auto by = p.bound_seconds();
  std::vector<std::pair<std::string, double>> v(by.begin(), by.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return v;
}

std::string node_line(const Node& n, size_t i) {
  std::string ins;
  for (const ValueRef& r : n.inputs) ins += (ins.empty() ? "" : ",") + r.str();
  const std::string where = n.layer >= 0 ? fmt::format("L{}", n.layer) : std::string("M");
  return fmt::format("  n{} {} {} {} : {} -> {}\n", i, where, n.name, ir_shape(n.shape),
                     ins.empty() ? "-" : ins, n.output.str());
}

std::string launch_line(const Step& s, const Launch& l) {
  if (s.kind == StepKind::host)
    return fmt::format("    n{} host in={} w={} out={} {}\n", l.node, keys_text(l.in_layouts),
                       keys_text(l.weight_layouts), l.out_layout, time_text(l.host_seconds));
  return fmt::format("    n{} tiles={} in={} w={} out={} {} {}\n", l.node, tiles_text(l.tiles),
                     keys_text(l.in_layouts), keys_text(l.weight_layouts), l.out_layout,
                     time_text(l.timing->total_seconds), l.timing->bound);
}

}  // namespace

std::string Plan::dump() const {
  std::string out = fmt::format("plan {} style={} S={} P={} context={} spec={}\n", model,
                                plan_style_name(style), seq, past, context, spec);
  out += fmt::format("host bytes_per_second={} step_overhead_seconds={}\n", host.bytes_per_second,
                     host.step_overhead_seconds);
  out += fmt::format("passes {}\n", passes.empty() ? std::string("-") : fmt::format("{}", fmt::join(passes, ",")));
  out += fmt::format("nodes {}\n", graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) out += node_line(graph.nodes[i], i);
  out += fmt::format("steps ({}, {} npu dispatches)\n", steps.size(), dispatches());
  for (const Step& s : steps) {
    std::string t = time_text(s.seconds());
    if (s.kind == StepKind::npu && s.relayout_seconds > 0)
      t += fmt::format(" (relayout {})", time_text(s.relayout_seconds));
    out += fmt::format("  {:<4} {:<16} {:<44} {} {}\n", s.kind == StepKind::npu ? "npu" : "host",
                       s.name(), shape_text(s.front().shape), t, s.bound());
    for (const Launch& l : s.launches) out += launch_line(s, l);
  }
  int64_t total_bytes = 0;
  for (const BufferDecl& b : buffers) total_bytes += b.bytes;
  out += fmt::format("buffers ({}, {} bytes)\n", buffers.size(), total_bytes);
  for (const BufferDecl& b : buffers)
    out += fmt::format("  {:<10} {:<32} {} live={}..{} @{}\n", buffer_kind_name(b.kind), b.name,
                       b.bytes, num_or_dash(b.first), num_or_dash(b.last), num_or_dash(b.offset));
  out += fmt::format("arena {} bytes\n", arena_bytes());
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
            {"passes", passes},
            {"predicted_seconds", predicted_seconds()},
            {"dispatches", dispatches()},
            {"dispatches_per_layer", dispatches_per_layer()},
            {"arena_bytes", arena_bytes()}};
  json steps_j = json::array();
  for (const Step& s : steps) {
    json launches = json::array();
    for (const Launch& l : s.launches) {
      json lj = {{"name", l.name},       {"op", l.shape.op},
                 {"shape", shape_text(l.shape)}, {"tiles", l.tiles},
                 {"weight_layouts", l.weight_layouts}, {"in_layouts", l.in_layouts},
                 {"out_layout", l.out_layout}};
      if (s.kind == StepKind::npu) lj["design"] = l.timing->design;
      launches.push_back(std::move(lj));
    }
    steps_j.push_back({{"kind", s.kind == StepKind::npu ? "npu" : "host"},
                       {"name", s.name()},
                       {"op", s.front().shape.op},
                       {"layer", layer_of(s)},
                       {"shape", shape_text(s.front().shape)},
                       {"seconds", s.seconds()},
                       {"relayout_seconds", s.relayout_seconds},
                       {"bound", s.bound()},
                       {"launches", std::move(launches)}});
  }
  j["steps"] = std::move(steps_j);
  json bufs = json::array();
  for (const BufferDecl& b : buffers)
    bufs.push_back({{"name", b.name}, {"kind", buffer_kind_name(b.kind)}, {"bytes", b.bytes},
                    {"first", b.first}, {"last", b.last}, {"offset", b.offset}});
  j["buffers"] = std::move(bufs);
  json bounds = json::array();
  for (const auto& [name, secs] : bound_times(*this))
    bounds.push_back({{"bound", name}, {"seconds", secs}});
  j["bounds"] = std::move(bounds);
  return j;
}

}  // namespace tessera::compiler
