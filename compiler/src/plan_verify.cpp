// verify_plan (passes.h): the invariants a pass must keep, checked after each.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "passes_internal.h"
#include "tessera/compiler/passes.h"

namespace tessera::compiler {

namespace {

using detail::whole;

std::string check_order(const Plan& p) {
  std::vector<int> seen(p.graph.nodes.size(), 0);
  std::unordered_set<std::string> made;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    if (s.launches.empty()) return fmt::format("step {} has no launches", i);
    if (s.kind == StepKind::host && s.launches.size() != 1)
      return fmt::format("host step {} has {} launches", s.name(), s.launches.size());
    // value -> out layout of launches earlier in this step
    std::unordered_map<std::string, std::string> inside;
    for (const Launch& l : s.launches) {
      if (l.node >= seen.size()) return fmt::format("launch {} names node {}", l.name, l.node);
      if (seen[l.node]++) return fmt::format("node n{} ({}) runs twice", l.node, l.name);
      const Node& n = p.graph.nodes[l.node];
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const ValueRef& r = n.inputs[k];
        if (r.kind != ValueKind::activation) continue;
        const std::string name = whole(r);
        if (!made.count(name))
          return fmt::format("{} reads {} before it is made", l.name, r.str());
        auto it = inside.find(name);
        if (s.kind == StepKind::npu && it != inside.end() && s.launches.size() > 1 &&
            (r.last_row || !layouts_match(it->second, l.in_layouts.at(k))))
          return fmt::format("dispatch {} hands {} to {} in layout {}, which reads {}: a host "
                             "re-layout inside one dispatch", s.name(), r.str(), l.name, it->second,
                             r.last_row ? "one row" : l.in_layouts.at(k));
      }
      made.insert(l.name);
      inside[l.name] = l.out_layout;
    }
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) return fmt::format("node n{} ({}) is in no step", i, p.graph.nodes[i].output.str());
  return "";
}

// An activation buffer lives from the step that makes it to its last reader.
std::string check_lifetimes(const Plan& p) {
  std::unordered_map<std::string, std::pair<int64_t, int64_t>> live;
  for (size_t i = 0; i < p.steps.size(); ++i)
    for (const Launch& l : p.steps[i].launches) {
      const auto at = static_cast<int64_t>(i);
      live.emplace(l.name, std::pair{at, at});
      for (const ValueRef& r : p.graph.nodes.at(l.node).inputs)
        if (r.kind == ValueKind::activation) {
          auto it = live.find(whole(r));
          if (it != live.end()) it->second.second = std::max(it->second.second, at);
        }
    }
  for (const BufferDecl& b : p.buffers) {
    if (b.kind != BufferKind::activation) continue;
    auto it = live.find(b.name);
    if (it == live.end()) return fmt::format("activation buffer {} is made by no step", b.name);
    if (b.first != it->second.first || b.last != it->second.second)
      return fmt::format("activation buffer {} is declared live {}..{}, the steps use it {}..{}",
                         b.name, b.first, b.last, it->second.first, it->second.second);
  }
  return "";
}

// By offset: only a buffer that starts before another ends can share its
// bytes (every pair was a quarter of a decode retarget's checks).
std::string check_arena(const Plan& p) {
  std::vector<const BufferDecl*> acts;
  for (const BufferDecl& b : p.buffers)
    if (b.kind == BufferKind::activation && b.offset >= 0) acts.push_back(&b);
  std::ranges::stable_sort(acts, {}, &BufferDecl::offset);
  for (size_t i = 0; i < acts.size(); ++i)
    for (size_t j = i + 1; j < acts.size() && acts[j]->offset < acts[i]->offset + acts[i]->bytes; ++j) {
      const BufferDecl& a = *acts[i];
      const BufferDecl& b = *acts[j];
      const bool live = a.first <= b.last && b.first <= a.last;
      if (live && a.offset < b.offset + b.bytes)
        return fmt::format("buffers {} (steps {}..{}, @{}+{}) and {} (steps {}..{}, @{}+{}) are live "
                           "together in the same arena bytes", a.name, a.first, a.last, a.offset,
                           a.bytes, b.name, b.first, b.last, b.offset, b.bytes);
    }
  return "";
}

// Bytes of each named host buffer of a built design, in the given order.
std::vector<int64_t> buffer_sizes(const Launch& l, const std::vector<std::string>& names) {
  std::vector<int64_t> out;
  for (const std::string& n : names)
    for (const npu::HostBuffer& h : l.op->design.host_buffers)
      if (h.name == n) out.push_back(h.bytes);
  return out;
}

// A reader whose layout key matches its producer's takes the producer's bytes
// as they are (runtime executor): its design must hold them in buffers of the
// same number and sizes, or the key claims an alignment the design lacks.
std::string check_handoffs(const Plan& p) {
  std::unordered_map<std::string, const Launch*> made;
  for (const Step& s : p.steps)
    for (const Launch& l : s.launches) {
      const Node& n = p.graph.nodes.at(l.node);
      for (size_t k = 0; s.kind == StepKind::npu && l.op && k < n.inputs.size(); ++k) {
        const ValueRef& r = n.inputs[k];
        auto it = made.find(whole(r));
        if (r.kind != ValueKind::activation || r.last_row || it == made.end()) continue;
        const Launch& src = *it->second;
        if (!layouts_match(src.out_layout, l.in_layouts.at(k))) continue;
        if (buffer_sizes(src, src.out_buffers) != buffer_sizes(l, l.in_buffers.at(k)))
          return fmt::format("{} reads {} as the producer's bytes (layout {}), but its buffers "
                             "[{}] are not the producer's [{}]", l.name, r.str(), src.out_layout,
                             fmt::join(l.in_buffers.at(k), " "), fmt::join(src.out_buffers, " "));
      }
      if (s.kind == StepKind::npu && l.op) made[l.name] = &l;
    }
  return "";
}

// A resident input (kResidentLayout) is an elided copy: the value stays in
// DDR between calls in the launch's output layout, so every reader of the
// output must take it as it is, on the NPU; one that wants another layout
// means the copy the plan no longer charges is still needed.
std::string check_resident(const Plan& p) {
  std::unordered_map<std::string, const Launch*> resident;  // output -> its resident writer
  for (const Step& s : p.steps)
    for (const Launch& l : s.launches) {
      const Node& n = p.graph.nodes.at(l.node);
      for (size_t k = 0; k < n.inputs.size() && k < l.in_layouts.size(); ++k) {
        auto it = resident.find(whole(n.inputs[k]));
        if (n.inputs[k].kind != ValueKind::activation || it == resident.end()) continue;
        if (s.kind != StepKind::npu || n.inputs[k].last_row ||
            !layouts_match(it->second->out_layout, l.in_layouts[k]))
          return fmt::format("{} is resident in layout {}, but {} reads it as {}: the elided "
                             "copy is needed", it->first, it->second->out_layout, l.name,
                             n.inputs[k].last_row ? "one row" : l.in_layouts[k]);
      }
      for (const std::string& in : l.in_layouts)
        if (in == kResidentLayout) resident[l.name] = &l;
    }
  return "";
}

}  // namespace

std::string verify_plan(const Plan& p) {
  if (p.steps.empty()) return "";  // not placed yet
  std::string e = check_order(p);
  if (e.empty()) e = check_handoffs(p);
  if (e.empty()) e = check_resident(p);
  if (e.empty()) e = check_lifetimes(p);
  if (e.empty()) e = check_arena(p);
  return e;
}

}  // namespace tessera::compiler
