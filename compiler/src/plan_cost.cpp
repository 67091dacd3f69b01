// Derived figures of a plan (passes.h update_costs): each NPU step's dispatch
// time and bound from its launches, and the host re-layout charged on every
// edge whose producer layout differs from its consumer's.
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "passes_internal.h"
#include "tessera/compiler/passes.h"
#include "tessera/core/error.h"

namespace tessera::compiler {

bool layouts_match(const std::string& out, const std::string& in) {
  return out == in && in.starts_with("a:") && in != "a:opaque" && in != "a:host";
}

namespace {

int64_t bf16_bytes(const Shape& s) { return shape_numel(s) * 2; }

// The largest term of a launch's own time (the design may hold several launches).
std::string body_bound(const npu::DispatchTiming& t) {
  const npu::LaunchTiming* best = nullptr;
  for (const auto& l : t.launches)
    if (!best || l.total_seconds > best->total_seconds) best = &l;
  return best ? best->bound : t.bound;
}

// One dispatch overhead + each launch's own time + a reconfiguration per
// extra launch: what estimate_time charges a merged multi-launch design.
void dispatch_time(Step& s, const npu::DeviceSpec& spec) {
  if (s.launches.size() == 1) {
    s.dispatch_seconds = s.front().timing->total_seconds;
    s.dispatch_bound = s.front().timing->bound;
    return;
  }
  const double extra = static_cast<double>(s.launches.size() - 1) * spec.reconfigure_seconds;
  std::map<std::string, double> terms = {{"overhead", s.front().timing->overhead_seconds + extra}};
  s.dispatch_seconds = terms["overhead"];
  for (const Launch& l : s.launches) {
    const double body = l.timing->total_seconds - l.timing->overhead_seconds;
    s.dispatch_seconds += body;
    terms[body_bound(*l.timing)] += body;
  }
  s.dispatch_bound = "overhead";
  for (const auto& [term, secs] : terms)
    if (secs > terms[s.dispatch_bound]) s.dispatch_bound = term;
}

struct Producer {
  const Launch* launch = nullptr;
  bool host = false;
};

}  // namespace

void update_costs(Plan& plan, const npu::DeviceSpec& spec) {
  std::unordered_map<std::string, Producer> producer;
  // Readers of each value: (layout they read it in, reader is the host); the
  // layouts point into the plan.
  static const std::string kOneRow;
  std::unordered_map<std::string, std::vector<std::pair<const std::string*, bool>>> readers;
  for (const Step& s : plan.steps)
    for (const Launch& l : s.launches) {
      producer[l.name] = {&l, s.kind == StepKind::host};
      const Node& n = plan.graph.nodes.at(l.node);
      for (size_t k = 0; k < n.inputs.size() && k < l.in_layouts.size(); ++k) {
        if (n.inputs[k].kind != ValueKind::activation) continue;
        // A last-row reader takes one row on the host: never the buffer as it is.
        readers[detail::whole(n.inputs[k])].emplace_back(n.inputs[k].last_row ? &kOneRow : &l.in_layouts[k],
                                                         s.kind == StepKind::host);
      }
    }
  for (Step& s : plan.steps) {
    if (s.kind == StepKind::host) {
      s.host_seconds = 0;
      for (const Launch& l : s.launches) s.host_seconds += l.host_seconds;
      s.relayout_seconds = 0;
      continue;
    }
    bool built = true;
    for (const Launch& l : s.launches) built = built && l.op != nullptr;
    if (!built) continue;  // placed, not built yet: no figures
    dispatch_time(s, spec);
    int64_t bytes = 0;
    std::set<std::pair<std::string, std::string>> packed;  // (value, layout) packed once per dispatch
    for (const Launch& l : s.launches) {
      const Node& n = plan.graph.nodes.at(l.node);
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const ValueRef& r = n.inputs[k];
        if (r.kind == ValueKind::weight || l.in_layouts.at(k) == kResidentLayout) continue;
        auto p = producer.find(detail::whole(r));
        const bool same = p != producer.end() && !p->second.host && !r.last_row &&
                          layouts_match(p->second.launch->out_layout, l.in_layouts.at(k));
        // Host-supplied inputs are not probed ("a:host"): each launch packs its own.
        if (!same && (l.in_layouts.at(k) == "a:host" || packed.insert({r.str(), l.in_layouts.at(k)}).second))
          bytes += bf16_bytes(l.op->inputs.at(k).shape);
      }
      // Unpacked when it leaves the plan or some reader wants another layout.
      auto rd = readers.find(l.name);
      bool unpack = rd == readers.end();
      if (!unpack)
        for (const auto& [layout, host] : rd->second) unpack = unpack || host || !layouts_match(l.out_layout, *layout);
      if (unpack)
        for (const auto& o : l.op->outputs) bytes += bf16_bytes(o.shape);
    }
    s.relayout_seconds = static_cast<double>(bytes) / plan.host.bytes_per_second;
  }
}

}  // namespace tessera::compiler

namespace tessera::compiler {

namespace {

// Logical MACs of one op instance (the work, not the padded tiles).
int64_t logical_macs(const kernels::OpShape& s) {
  if (s.op == "linear") return s.dim("M") * s.dim("K") * s.dim("N");
  if (s.op == "attention_prefill") {
    const int64_t S = s.dim("S"), P = s.dim("P");
    const int64_t pairs = S * P + S * (S + 1) / 2;  // causal (query, key) pairs
    return 2 * s.dim("heads") * s.dim("head_dim") * pairs;
  }
  if (s.op == "attention_decode") return 2 * s.dim("heads") * s.dim("head_dim") * s.dim("T");
  return 0;
}

}  // namespace

PlanBounds plan_bounds(const Plan& plan, const npu::DeviceSpec& spec) {
  PlanBounds b;
  for (const Step& s : plan.steps)
    for (const Launch& l : s.launches) {
      b.macs += logical_macs(l.shape);
      if (s.kind != StepKind::npu || !l.op) continue;
      const Node& n = plan.graph.nodes.at(l.node);
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (n.inputs[k].kind == ValueKind::weight) b.weight_bytes += shape_numel(l.op->inputs.at(k).shape) * 2;
    }
  const double peak = static_cast<double>(spec.compute_tiles()) * spec.macs_per_cycle_bf16 * spec.clock_hz;
  b.compute_seconds = static_cast<double>(b.macs) / peak;
  b.weight_ddr_seconds = static_cast<double>(b.weight_bytes) / spec.ddr_bytes_per_second;
  return b;
}

}  // namespace tessera::compiler
