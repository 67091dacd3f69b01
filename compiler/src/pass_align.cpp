// The align-layouts pass (passes.h): the producer writes the layout its
// readers read. Each builder packs activations in its own blocked layout, so
// every NPU -> NPU edge costs the host an unpack and a repack (update_costs).
// Builders that know kRowMajorTile can all read and write one canonical
// layout instead (kernels/activation_layout.h); the shim DMA then cuts the
// blocks, which costs DDR bursts where its runs are short. Whether that pays
// is the timing model's call, so the pass is greedy on the plan's predicted
// time once fused: an edge is aligned only when the whole plan, fused as the
// fuse pass would, gets faster (an aligned edge that lets two dispatches
// merge saves their dispatch overhead, which the unfused plan cannot show).
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

using kernels::kRowMajorOutTile;
using kernels::kRowMajorTile;

std::string whole(const ValueRef& r) {
  ValueRef w = r;
  w.last_row = false;
  return w.str();
}

bool has(const Launch& l, const char* key) {
  auto it = l.tiles.find(key);
  return it != l.tiles.end() && it->second != 0;
}
bool out_rowmajor(const Launch& l) { return has(l, kRowMajorTile) || has(l, kRowMajorOutTile); }

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

// Rebuilds each launch with its key set (a reader's kRowMajorTile replaces an
// output-only request); false, and every launch as it was, when a builder
// refuses the shape.
bool rebuild(const Plan& p, const std::vector<std::pair<Launch*, const char*>>& ls,
             DesignCache& cache, std::vector<Launch>& saved) {
  saved.clear();
  for (const auto& [l, key] : ls) saved.push_back(*l);
  try {
    for (const auto& [l, key] : ls) {
      if (key == std::string(kRowMajorTile)) l->tiles.erase(kRowMajorOutTile);
      l->tiles[key] = 1;
      detail::build_launch(p, *l, cache);
    }
    return true;
  } catch (const LimitError&) {
  } catch (const UsageError&) {  // a builder that does not know the layout
  }
  for (size_t i = 0; i < ls.size(); ++i) *ls[i].first = saved[i];
  return false;
}

// The launches one attempt rebuilds, and with which key: `variant` 0 the
// producer and its readers whole row-major, 1 the producer's output alone
// and its readers whole row-major, 2 the producer's output alone with its
// readers as they are (they may read the plain layout already: a decode rope
// or gemv x of one row).
std::vector<std::pair<Launch*, const char*>> attempt(const Edge& e, const std::vector<Launch*>& readers,
                                                     int variant) {
  std::vector<std::pair<Launch*, const char*>> ends;
  const char* key = variant == 0 ? kRowMajorTile : kRowMajorOutTile;
  if (!has(*e.producer, kRowMajorTile) && (variant == 0 || !out_rowmajor(*e.producer)))
    ends.emplace_back(e.producer, key);
  if (variant < 2)
    for (Launch* l : readers) ends.emplace_back(l, kRowMajorTile);
  return ends;
}

}  // namespace

std::string pass_align_layouts(Plan& p, DesignCache& cache, bool bug) {
  const npu::DeviceSpec& spec = cache.spec();
  update_costs(p, spec);
  // Judged once fused: an aligned edge can merge two dispatches, and the
  // overhead that saves shows only in the fused plan.
  double best = detail::fused_seconds(p, cache);
  int aligned_edges = 0, refused = 0, slower = 0;
  std::set<std::string> ops;
  std::vector<Launch> saved;
  for (Edge& e : edges_of(p)) {
    if (!e.eligible || e.readers.empty() || aligned(e)) continue;
    std::vector<Launch*> readers;
    for (const auto& [l, k] : e.readers)
      if (!bug && !has(*l, kRowMajorTile) && l != e.producer &&
          std::find(readers.begin(), readers.end(), l) == readers.end())
        readers.push_back(l);
    bool kept = false, built = false;
    for (int variant = 0; variant < 3 && !kept; ++variant) {
      const auto ends = attempt(e, readers, variant);
      if (ends.empty() || !rebuild(p, ends, cache, saved)) continue;
      if (variant == 2 && !aligned(e)) {  // readers as they are: only worth it when it aligns
        for (size_t i = 0; i < ends.size(); ++i) *ends[i].first = saved[i];
        continue;
      }
      built = true;
      if (bug) {  // planted: the readers are told the new layout, not rebuilt for it
        for (const auto& [l, k] : e.readers) l->in_layouts.at(k) = e.producer->out_layout;
        return fmt::format("{} (planted: readers not rebuilt)", e.value);
      }
      update_costs(p, spec);
      if (const double t = detail::fused_seconds(p, cache); t < best) {
        best = t;
        kept = true;
        for (const auto& [l, k] : ends) ops.insert(fmt::format("{}:{}", l->shape.op, k));
        break;
      }
      for (size_t i = 0; i < ends.size(); ++i) *ends[i].first = saved[i];
      update_costs(p, spec);
    }
    aligned_edges += kept;
    slower += built && !kept;
    refused += !built;
  }
  std::string changed = fmt::format("{} edges row-major ({} kept blocked: slower once fused; {} "
                                    "refused by a builder)", aligned_edges, slower, refused);
  if (!ops.empty()) changed += fmt::format(", ops {}", fmt::join(ops, " "));
  return changed;
}

}  // namespace tessera::compiler
