// The fuse pass (passes.h): consecutive NPU steps of one layer become one
// multi-launch dispatch when every value one of its launches hands to a later
// one is already in the layout the reader wants. A dispatch's launches run
// back to back on the array; the host cannot re-lay-out a value between them,
// so an edge that needs a re-layout ends the dispatch.
#include <map>
#include <set>

#include <fmt/format.h>

#include "tessera/compiler/passes.h"

namespace tessera::compiler {

namespace {

bool fusable(const Step& s) {
  if (s.kind != StepKind::npu) return false;
  for (const Launch& l : s.launches)
    if (!l.op || l.op->patch) return false;  // runtime-patched designs run alone
  return true;
}

// Can `next` join a dispatch whose launches produced `inside` (value -> layout)?
bool joins(const Plan& p, const std::map<std::string, std::string>& inside, const Step& next) {
  for (const Launch& l : next.launches) {
    const Node& n = p.graph.nodes.at(l.node);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const ValueRef& r = n.inputs[k];
      if (r.kind != ValueKind::activation) continue;
      ValueRef whole = r;
      whole.last_row = false;
      auto it = inside.find(whole.str());
      if (it == inside.end()) continue;
      if (r.last_row || !layouts_match(it->second, l.in_layouts.at(k))) return false;
    }
  }
  return true;
}

}  // namespace

std::string pass_fuse(Plan& p, DesignCache&, bool bug) {
  std::vector<Step> out;
  std::map<std::string, std::string> inside;  // values made by the open dispatch
  const int64_t before = p.dispatches();
  for (Step& s : p.steps) {
    const bool extend = !out.empty() && fusable(out.back()) && fusable(s) &&
                        p.layer_of(out.back()) == p.layer_of(s) && (bug || joins(p, inside, s));
    if (!extend) {
      inside.clear();
      out.push_back(std::move(s));
    } else {
      for (Launch& l : s.launches) out.back().launches.push_back(std::move(l));
    }
    for (const Launch& l : out.back().launches) inside[l.name] = l.out_layout;
  }
  p.steps = std::move(out);
  return fmt::format("{} -> {} NPU dispatches ({} per layer)", before, p.dispatches(),
                     p.dispatches_per_layer());
}

}  // namespace tessera::compiler
