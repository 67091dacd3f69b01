// fused_seconds and FusedCost (fused_cost.h). FusedCost::seconds mirrors
// pass_fuse (which steps merge) and update_costs (what each merged step
// costs) on the launches as they are; the equality with fused_seconds is what
// tests/compiler/fused_cost_test.cpp checks, so a change to either rule must
// be made in both places.
#include "tessera/compiler/fused_cost.h"

#include <algorithm>
#include <map>
#include <utility>

#include "tessera/compiler/passes.h"
#include "passes_internal.h"
#include "tessera/core/error.h"

namespace tessera::compiler {

std::string pass_fuse(Plan& plan, DesignCache& cache, bool bug);  // pass_fuse.cpp

double fused_seconds(const Plan& plan, DesignCache& cache) {
  Plan trial = plan;
  pass_fuse(trial, cache, false);
  update_costs(trial, cache.spec());
  return trial.predicted_seconds();
}

using detail::whole;

FusedCost::FusedCost(const Plan& plan) : plan_(plan) {
  std::map<std::string, size_t> by_name;
  for (size_t s = 0; s < plan.steps.size(); ++s)
    for (const Launch& l : plan.steps[s].launches) {
      by_name.emplace(l.name, launches_.size());
      launches_.push_back(&l);
      step_of_.push_back(s);
      host_.push_back(plan.steps[s].kind == StepKind::host);
      layer_.push_back(plan.graph.nodes.at(l.node).layer);
    }
  inputs_.resize(launches_.size());
  readers_.resize(launches_.size());
  for (size_t i = 0; i < launches_.size(); ++i) {
    const Node& n = plan.graph.nodes.at(launches_[i]->node);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const ValueRef& r = n.inputs[k];
      auto p = r.kind == ValueKind::weight ? by_name.end() : by_name.find(whole(r));
      const size_t producer = p == by_name.end() ? kNone : p->second;
      inputs_[i].push_back({producer, &r, r.str()});
      if (producer != kNone && r.kind == ValueKind::activation) readers_[producer].push_back({i, k, r.last_row});
    }
  }
  // Segments: a new one wherever a step's first launch is of another layer
  // than the step before's (seconds() never extends a dispatch there).
  std::vector<size_t> seg_of(launches_.size());
  for (size_t i = 0; i < launches_.size(); ++i) {
    index_.emplace(launches_[i], i);
    const bool step_start = i == 0 || step_of_[i] != step_of_[i - 1];
    if (step_start && (i == 0 || layer_[i] != layer_[seg_first_.back()])) seg_first_.push_back(i);
    seg_of[i] = seg_first_.size() - 1;
  }
  const size_t segments = seg_first_.size();
  seg_first_.push_back(launches_.size());
  // A launch's change reaches its own segment (which dispatches form, what
  // they cost), its producers' (whether they unpack for it) and its readers'
  // (whether they pack what it writes).
  affects_.resize(launches_.size());
  for (size_t i = 0; i < launches_.size(); ++i) {
    std::vector<size_t>& a = affects_[i];
    a.push_back(seg_of[i]);
    for (const Input& in : inputs_[i])
      if (in.producer != kNone) a.push_back(seg_of[in.producer]);
    for (const Reader& r : readers_[i]) a.push_back(seg_of[r.launch]);
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
  }
  seen_.resize(launches_.size());
  dirty_.assign(segments, 1);
  costs_.resize(segments);
}

// Host re-layout of a dispatch of launches [first, end), as update_costs
// charges it: a pack per input whose producer wrote another layout (once per
// (ref, layout) in the dispatch), an unpack per output some reader wants in
// another layout or on the host.
int64_t FusedCost::relayout_bytes(size_t first, size_t end) const {
  int64_t bytes = 0;
  std::vector<std::pair<const std::string*, const std::string*>> packed;
  for (size_t i = first; i < end; ++i) {
    const Launch& l = *launches_[i];
    for (size_t k = 0; k < inputs_[i].size(); ++k) {
      const Input& in = inputs_[i][k];
      const std::string& layout = l.in_layouts.at(k);
      if (in.ref->kind == ValueKind::weight || layout == kResidentLayout) continue;
      const bool same = in.producer != kNone && !host_[in.producer] && !in.ref->last_row &&
                        layouts_match(launches_[in.producer]->out_layout, layout);
      if (same) continue;
      bool fresh = layout == "a:host";
      if (!fresh) {
        fresh = true;
        for (const auto& [ref, lay] : packed) fresh = fresh && !(*ref == in.ref_text && *lay == layout);
        if (fresh) packed.emplace_back(&in.ref_text, &layout);
      }
      if (fresh) bytes += shape_numel(l.op->inputs.at(k).shape) * 2;
    }
    bool read = false, unpack = false;
    for (const Reader& rd : readers_[i]) {
      const Launch& r = *launches_[rd.launch];
      if (rd.input >= r.in_layouts.size()) continue;  // update_costs lists no such reader
      read = true;
      // A last-row reader takes one row on the host, never the buffer as it is.
      unpack = unpack || host_[rd.launch] || rd.last_row || !layouts_match(l.out_layout, r.in_layouts[rd.input]);
    }
    if (unpack || !read)  // a value no launch reads leaves the plan
      for (const auto& o : l.op->outputs) bytes += shape_numel(o.shape) * 2;
  }
  return bytes;
}

// One dispatch of launches [first, end), or one host step: Step::seconds of
// the step pass_fuse would make of them, after update_costs.
double FusedCost::step_seconds(size_t first, size_t end, const npu::DeviceSpec& spec) const {
  if (host_[first]) {
    double s = 0;
    for (size_t i = first; i < end; ++i) s += launches_[i]->host_seconds;
    return s;
  }
  for (size_t i = first; i < end; ++i)
    TESSERA_CHECK(launches_[i]->op != nullptr, "fused cost of {}: launch {} is not built", plan_.model,
                  launches_[i]->name);
  double dispatch = 0;
  if (end - first == 1) {
    dispatch = launches_[first]->timing->total_seconds;
  } else {
    const double extra = static_cast<double>(end - first - 1) * spec.reconfigure_seconds;
    dispatch = launches_[first]->timing->overhead_seconds + extra;
    for (size_t i = first; i < end; ++i)
      dispatch += launches_[i]->timing->total_seconds - launches_[i]->timing->overhead_seconds;
  }
  return dispatch + static_cast<double>(relayout_bytes(first, end)) / plan_.host.bytes_per_second;
}

bool FusedCost::fusable(size_t step) const {
  if (plan_.steps[step].kind != StepKind::npu) return false;
  for (const Launch& l : plan_.steps[step].launches)
    if (!l.op || l.op->patch) return false;  // runtime-patched designs run alone
  return true;
}

// The dispatches of segment `seg` as pass_fuse forms them, each one's seconds
// into costs_[seg] in order.
void FusedCost::cost_segment(size_t seg, const npu::DeviceSpec& spec) const {
  std::vector<double>& out = costs_[seg];
  out.clear();
  const size_t first = seg_first_[seg], last = seg_first_[seg + 1];
  size_t group = first;  // first launch of the open dispatch
  bool group_fusable = false;
  size_t i = first;
  while (i < last) {
    const size_t step = step_of_[i];
    size_t end = i;
    while (end < last && step_of_[end] == step) ++end;
    // pass_fuse's joins(): every value the step reads from the open dispatch
    // is whole and in the layout it reads.
    bool extend = i > first && group_fusable && fusable(step) && layer_[group] == layer_[i];
    for (size_t j = i; extend && j < end; ++j)
      for (size_t k = 0; extend && k < inputs_[j].size(); ++k) {
        const Input& in = inputs_[j][k];
        if (in.ref->kind != ValueKind::activation || in.producer == kNone) continue;
        if (in.producer < group || in.producer >= i) continue;  // not made inside the dispatch
        extend = !in.ref->last_row &&
                 layouts_match(launches_[in.producer]->out_layout, launches_[j]->in_layouts.at(k));
      }
    if (!extend) {
      if (i > first) out.push_back(step_seconds(group, i, spec));
      group = i;
      group_fusable = fusable(step);
    }
    i = end;
  }
  if (last > first) out.push_back(step_seconds(group, last, spec));
}

bool FusedCost::changed(size_t i) const {
  const Launch& l = *launches_[i];
  const Seen& s = seen_[i];
  return l.op != s.op || l.timing->total_seconds != s.total || l.timing->overhead_seconds != s.overhead ||
         l.host_seconds != s.host;
}

void FusedCost::touched(const Launch& l) const {
  auto it = index_.find(&l);
  TESSERA_CHECK(it != index_.end(), "fused cost of {}: launch {} is not one of the plan's", plan_.model, l.name);
  for (size_t seg : affects_[it->second]) dirty_[seg] = 1;
}

double FusedCost::seconds(const npu::DeviceSpec& spec) const {
  if (spec_ != &spec) dirty_.assign(dirty_.size(), 1);
  spec_ = &spec;
  for (size_t i = 0; i < launches_.size(); ++i) {
    if (!changed(i)) continue;
    const Launch& l = *launches_[i];
    seen_[i] = {l.op, l.timing->total_seconds, l.timing->overhead_seconds, l.host_seconds};
    for (size_t seg : affects_[i]) dirty_[seg] = 1;
  }
  for (size_t seg = 0; seg < costs_.size(); ++seg) {
    if (!dirty_[seg]) continue;
    try {
      cost_segment(seg, spec);
    } catch (...) {
      spec_ = nullptr;  // a segment half done: start again next call
      throw;
    }
    dirty_[seg] = 0;
  }
  // Summed in plan order, dispatch by dispatch, as a walk over the whole plan
  // would: the same floating-point operations, so the same bits.
  double total = 0;
  for (const std::vector<double>& seg : costs_)
    for (double s : seg) total += s;
  return total;
}

}  // namespace tessera::compiler
