// The align-layouts pass (passes.h): the producer writes the layout its
// readers read. Each builder packs activations in its own blocked layout, so
// every NPU -> NPU edge costs the host an unpack and a repack (update_costs).
// Builders that know kRowMajorTile can all read and write one canonical
// layout instead (kernels/activation_layout.h); the shim DMA then cuts the
// blocks, which costs DDR bursts where its runs are short. Whether that pays
// is the timing model's call, so the pass is greedy on the plan's predicted
// time: an edge is aligned only when the whole plan gets faster.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "passes_internal.h"
#include "tessera/compiler/passes.h"
#include "tessera/core/error.h"
#include "tessera/kernels/activation_layout.h"

namespace tessera::compiler {

namespace {

using kernels::kRowMajorTile;

std::string whole(const ValueRef& r) {
  ValueRef w = r;
  w.last_row = false;
  return w.str();
}

bool rowmajor(const Launch& l) {
  auto it = l.tiles.find(kRowMajorTile);
  return it != l.tiles.end() && it->second != 0;
}

// An activation edge: its producer and readers (launch pointers stay valid:
// the pass never adds or removes launches).
struct Edge {
  std::string value;
  Launch* producer = nullptr;
  std::vector<std::pair<Launch*, size_t>> readers;  // (launch, input index)
  bool eligible = true;  // every end on the NPU, no one-row reader
};

std::vector<Edge> edges_of(Plan& p) {
  std::map<std::string, size_t> index;
  std::vector<Edge> edges;
  for (Step& s : p.steps)
    for (Launch& l : s.launches) {
      const Node& n = p.graph.nodes.at(l.node);
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const ValueRef& r = n.inputs[k];
        if (r.kind != ValueKind::activation) continue;
        auto it = index.find(whole(r));
        if (it == index.end()) continue;
        Edge& e = edges[it->second];
        e.readers.emplace_back(&l, k);
        e.eligible = e.eligible && s.kind == StepKind::npu && !r.last_row;
      }
      index.emplace(l.name, edges.size());
      edges.push_back({l.name, &l, {}, s.kind == StepKind::npu});
    }
  return edges;
}

bool aligned(const Edge& e) {
  for (const auto& [l, k] : e.readers)
    if (!layouts_match(e.producer->out_layout, l->in_layouts.at(k))) return false;
  return true;
}

// Rebuilds `ls` row-major; false (and every launch as it was) when a builder
// refuses the shape.
bool rebuild(const Plan& p, const std::vector<Launch*>& ls, DesignCache& cache,
             std::vector<Launch>& saved) {
  saved.clear();
  for (Launch* l : ls) saved.push_back(*l);
  try {
    for (Launch* l : ls) {
      l->tiles[kRowMajorTile] = 1;
      detail::build_launch(p, *l, cache);
    }
    return true;
  } catch (const LimitError&) {
  } catch (const UsageError&) {  // a builder that does not know the layout
  }
  for (size_t i = 0; i < ls.size(); ++i) *ls[i] = saved[i];
  return false;
}

}  // namespace

std::string pass_align_layouts(Plan& p, DesignCache& cache, bool bug) {
  const npu::DeviceSpec& spec = cache.spec();
  update_costs(p, spec);
  const double t0 = p.predicted_seconds();
  double best = t0;
  int aligned_edges = 0, refused = 0, slower = 0;
  std::set<std::string> ops;
  std::vector<Launch> saved;
  for (Edge& e : edges_of(p)) {
    if (!e.eligible || e.readers.empty() || aligned(e)) continue;
    std::vector<Launch*> ends;
    if (!rowmajor(*e.producer)) ends.push_back(e.producer);
    for (const auto& [l, k] : e.readers)
      if (!bug && !rowmajor(*l) && std::find(ends.begin(), ends.end(), l) == ends.end())
        ends.push_back(l);
    if (!rebuild(p, ends, cache, saved)) {
      ++refused;
      continue;
    }
    if (bug) {  // planted: the readers are told the new layout, not rebuilt for it
      for (const auto& [l, k] : e.readers) l->in_layouts.at(k) = e.producer->out_layout;
      return fmt::format("{} (planted: readers not rebuilt)", e.value);
    }
    update_costs(p, spec);
    const double t = p.predicted_seconds();
    if (t < best) {
      best = t;
      ++aligned_edges;
      for (Launch* l : ends) ops.insert(l->shape.op);
      continue;
    }
    for (size_t i = 0; i < ends.size(); ++i) *ends[i] = saved[i];
    update_costs(p, spec);
    ++slower;
  }
  std::string changed = fmt::format("{} edges row-major ({} kept blocked: slower; {} refused by a "
                                    "builder)", aligned_edges, slower, refused);
  if (!ops.empty()) changed += fmt::format(", ops {}", fmt::join(ops, " "));
  return changed;
}

}  // namespace tessera::compiler
