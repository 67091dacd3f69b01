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
// Edges that were each slower alone are then tried together, one layer at a
// time: a decode layer's q, k and v edges pay only once all are aligned and
// the whole chain fuses.
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "passes_internal.h"
#include "tessera/compiler/fused_cost.h"
#include "tessera/compiler/passes.h"
#include "tessera/core/error.h"
#include "tessera/kernels/activation_layout.h"

namespace tessera::compiler {

namespace {

using kernels::kRowMajorOutTile;
using kernels::kRowMajorTile;

using detail::whole;

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

// The blocked x layout every reader of the edge reads, as tile options for a
// row-wise producer (activation_layout.h kGemmX*); empty when a reader is not
// a linear reading x blocked, or two readers block x differently.
kernels::TileOptions readers_gemm_x(const Edge& e) {
  kernels::TileOptions want;
  for (const auto& [l, k] : e.readers) {
    if (l->shape.op != "linear" || k != 0 || !l->op || has(*l, kRowMajorTile)) return {};
    const kernels::TileOptions& t = l->op->tiles;
    // A gemv's x is one row of k blocks (m = 1, one row group).
    const bool gemm = t.count("gemm") && t.at("gemm") != 0;
    kernels::TileOptions x = {{kernels::kGemmXM, gemm ? t.at("m") : 1}, {kernels::kGemmXK, t.at("k")},
                              {kernels::kGemmXRows, gemm ? t.at("rows") : 1}};
    if (!want.empty() && want != x) return {};
    want = std::move(x);
  }
  return want;
}

// The producer rebuilt to write the blocked x its gemm readers read (they stay
// as they are: a row-major gemm x costs a short DDR run per block on every N
// block, the producer pays them once). 1 kept (faster once fused), 0 built but
// slower or not aligned, -1 refused or not applicable.
int write_readers_layout(const Plan& p, Edge& e, DesignCache& cache, const FusedCost& cost, double& best) {
  const kernels::TileOptions x = readers_gemm_x(e);
  if (x.empty()) return -1;
  const Launch saved = *e.producer;
  try {
    e.producer->tiles.erase(kRowMajorOutTile);
    for (const auto& [k, v] : x) e.producer->tiles[k] = v;
    detail::build_launch(p, *e.producer, cache);
  } catch (const LimitError&) {
    *e.producer = saved;
    return -1;
  } catch (const UsageError&) {
    *e.producer = saved;
    return -1;
  }
  if (aligned(e)) {
    if (const double t = cost.seconds(cache.spec()); t < best) {
      best = t;
      return 1;
    }
  }
  *e.producer = saved;
  return 0;
}

// An edge that alone made the plan slower, with the variant that built.
struct Slower {
  Edge* edge = nullptr;
  std::vector<Launch*> readers;
  int variant = 0;
};

// The edges of a layer that were each slower alone, aligned together: only
// the whole chain of a layer aligned lets fuse merge its dispatches (each
// edge alone buys a re-layout of a few bytes for a few short DDR runs).
// Returns the edges kept.
int align_layer_groups(const Plan& p, DesignCache& cache, const FusedCost& cost, std::vector<Slower>& slow,
                       double& best, std::set<std::string>& ops) {
  std::map<int, std::vector<const Slower*>> by_layer;
  for (const Slower& s : slow) by_layer[p.graph.nodes.at(s.edge->producer->node).layer].push_back(&s);
  int kept = 0;
  std::vector<Launch> saved;
  for (const auto& [layer, group] : by_layer) {
    if (group.size() < 2) continue;
    std::vector<std::pair<Launch*, const char*>> ends;
    for (const Slower* s : group)
      for (const auto& end : attempt(*s->edge, s->readers, s->variant))
        if (std::find(ends.begin(), ends.end(), end) == ends.end()) ends.push_back(end);
    if (!rebuild(p, ends, cache, saved)) continue;
    bool all = true;
    for (const Slower* s : group) all = all && aligned(*s->edge);
    if (const double t = all ? cost.seconds(cache.spec()) : best; t < best) {
      best = t;
      kept += static_cast<int>(group.size());
      for (const auto& [l, k] : ends) ops.insert(fmt::format("{}:{}", l->shape.op, k));
      continue;
    }
    for (size_t i = 0; i < ends.size(); ++i) *ends[i].first = saved[i];
  }
  return kept;
}

}  // namespace

std::string pass_align_layouts(Plan& p, DesignCache& cache, bool bug) {
  const npu::DeviceSpec& spec = cache.spec();
  // Judged once fused: an aligned edge can merge two dispatches, and the
  // overhead that saves shows only in the fused plan. Each trial rebuilds a
  // few launches in place; FusedCost re-costs them without copying the plan
  // (the step figures of `p` itself are recomputed once, at the end).
  const FusedCost cost(p);
  double best = cost.seconds(spec);
  int aligned_edges = 0, refused = 0, slower = 0;
  std::set<std::string> ops;
  std::vector<Launch> saved;
  std::vector<Edge> edges = edges_of(p);
  std::vector<Slower> slow;
  for (Edge& e : edges) {
    if (!e.eligible || e.readers.empty() || aligned(e)) continue;
    std::vector<Launch*> readers;
    for (const auto& [l, k] : e.readers)
      if (!bug && !has(*l, kRowMajorTile) && l != e.producer &&
          std::find(readers.begin(), readers.end(), l) == readers.end())
        readers.push_back(l);
    bool kept = false, built = false;
    int first_built = -1;
    for (int variant = 0; variant < 3 && !kept; ++variant) {
      const auto ends = attempt(e, readers, variant);
      if (ends.empty() || !rebuild(p, ends, cache, saved)) continue;
      if (variant == 2 && !aligned(e)) {  // readers as they are: only worth it when it aligns
        for (size_t i = 0; i < ends.size(); ++i) *ends[i].first = saved[i];
        continue;
      }
      built = true;
      if (first_built < 0) first_built = variant;
      if (bug) {  // planted: the readers are told the new layout, not rebuilt for it
        for (const auto& [l, k] : e.readers) l->in_layouts.at(k) = e.producer->out_layout;
        update_costs(p, spec);
        return fmt::format("{} (planted: readers not rebuilt)", e.value);
      }
      if (const double t = cost.seconds(spec); t < best) {
        best = t;
        kept = true;
        for (const auto& [l, k] : ends) ops.insert(fmt::format("{}:{}", l->shape.op, k));
        break;
      }
      for (size_t i = 0; i < ends.size(); ++i) *ends[i].first = saved[i];
    }
    if (!kept && !bug) {
      const int w = write_readers_layout(p, e, cache, cost, best);
      built = built || w >= 0;
      kept = w > 0;
      if (kept) ops.insert(fmt::format("{}:gemm_x", e.producer->shape.op));
    }
    aligned_edges += kept;
    slower += built && !kept;
    refused += !built;
    if (built && !kept && first_built >= 0) slow.push_back({&e, readers, first_built});
  }
  const int grouped = align_layer_groups(p, cache, cost, slow, best, ops);
  update_costs(p, spec);
  aligned_edges += grouped;
  slower -= grouped;
  std::string changed = fmt::format("{} edges row-major ({} kept blocked: slower once fused; {} "
                                    "refused by a builder)", aligned_edges, slower, refused);
  if (!ops.empty()) changed += fmt::format(", ops {}", fmt::join(ops, " "));
  return changed;
}

}  // namespace tessera::compiler
