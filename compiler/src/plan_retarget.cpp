// retarget() (retarget.h): a lowered plan moved to another past length P. Only
// the launches whose op shape depends on P (attention over T = P + S cached
// positions, kv_append at pos = P) are rebuilt; every pass decision (what
// runs on the host, which layouts, what is fused, the arena) is the base
// plan's. A decode session lowers once per position bucket and retargets per
// token, instead of running the whole pass pipeline (its greedy trials cost
// as much host time as simulating the token).
#include <map>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "passes_internal.h"
#include "tessera/compiler/passes.h"
#include "tessera/compiler/retarget.h"
#include "tessera/core/error.h"
#include "tessera/core/threads.h"

namespace tessera::compiler {

namespace {

bool same_shape(const kernels::OpShape& a, const kernels::OpShape& b) {
  return a.op == b.op && a.dims == b.dims && a.attrs == b.attrs;
}

// The graph at the new P must be the base graph with other dims: same nodes,
// same names, same inputs, in the same order.
void check_same_structure(const Graph& base, const Graph& next) {
  TESSERA_CHECK(base.nodes.size() == next.nodes.size(), "retarget {}: {} nodes at P={}, {} at P={}",
                base.model, base.nodes.size(), base.past, next.nodes.size(), next.past);
  for (size_t i = 0; i < base.nodes.size(); ++i) {
    const Node& a = base.nodes[i];
    const Node& b = next.nodes[i];
    TESSERA_CHECK(a.output == b.output && a.inputs == b.inputs && a.shape.op == b.shape.op,
                  "retarget {}: node {} is {} at P={} but {} at P={}", base.model, i,
                  a.output.str(), base.past, b.output.str(), next.past);
  }
}

// The designs a retarget needs (one per distinct shape and tiles: a decode
// position's attention and kv_append), built and probed side by side before
// the per-launch loop finds them in the cache. Each is one to two
// milliseconds of one thread's work (the builder; the layout probes over
// every row of the resident cache), independent of the other, while the
// pool's other thread would otherwise wait for the next dispatch.
void prebuild(const Plan& p, DesignCache& cache) {
  std::map<std::string, Launch> distinct;
  for (const Step& s : p.steps) {
    if (s.kind != StepKind::npu) continue;
    for (const Launch& l : s.launches) {
      const Node& n = p.graph.nodes.at(l.node);
      if (same_shape(l.shape, n.shape)) continue;
      const std::string key = detail::cache_key(n.shape, l.tiles);
      if (distinct.count(key)) continue;
      Launch& copy = distinct[key] = l;
      copy.shape = n.shape;
    }
  }
  if (distinct.size() < 2) return;  // one design: nothing to overlap
  std::vector<Launch*> todo;
  for (auto& [key, l] : distinct) todo.push_back(&l);
  parallel_for_each(todo.size(), [&](size_t i) { detail::build_launch(p, *todo[i], cache); });
}

}  // namespace

Plan retarget(const Plan& base, const model::ModelConfig& config, int64_t past, DesignCache& cache) {
  Plan p = base;
  retarget_in_place(p, config, past, cache);
  return p;
}

// In place, a launch is rebuilt when its shape differs from the one it has
// now; its tiles are never changed, so moving P0 -> P1 -> P2 gives the plan
// P0 -> P2 would.
void retarget_in_place(Plan& p, const model::ModelConfig& config, int64_t past, DesignCache& cache) {
  if (past < 0 || p.seq + past > p.context)
    throw_error<UsageError>("retarget {}: S={} + P={} positions exceed the plan context {}",
                            p.model, p.seq, past, p.context);
  TESSERA_CHECK(p.spec == cache.spec().name, "retarget {}: plan for spec {}, cache for {}",
                p.model, p.spec, cache.spec().name);
  const int64_t from = p.past;
  Graph next = build_graph(config, p.seq, past);
  check_same_structure(p.graph, next);
  p.past = past;
  p.graph = std::move(next);
  prebuild(p, cache);
  std::unordered_map<std::string_view, int64_t> rebuilt;  // name -> output bytes
  for (Step& s : p.steps)
    for (Launch& l : s.launches) {
      const Node& n = p.graph.nodes.at(l.node);
      if (same_shape(l.shape, n.shape)) continue;
      if (s.kind == StepKind::host) {
        l = detail::place_launch(p, l.node, true, cache.spec());
      } else {
        l.shape = n.shape;  // tiles (cache_rows included) stay the base plan's
        detail::build_launch(p, l, cache);
      }
      rebuilt[l.name] = l.out_bytes;
    }
  bool resized = false;
  for (const BufferDecl& b : p.buffers) {
    auto it = b.kind == BufferKind::activation ? rebuilt.find(b.name) : rebuilt.end();
    resized = resized || (it != rebuilt.end() && it->second != b.bytes);
  }
  // Arena offsets follow the activations' sizes: redo the buffer passes the
  // base ran when a rebuilt launch's output changed size.
  if (resized) {
    std::vector<std::string> tail;
    while (!p.passes.empty() && (p.passes.back() == "buffers" || p.passes.back() == "reuse-buffers")) {
      tail.insert(tail.begin(), p.passes.back());
      p.passes.pop_back();
    }
    p.buffers.clear();
    run_passes(p, tail, cache);
  }
  // Side by side: update_costs writes only the steps' figures (dispatch,
  // relayout and host seconds), which verify_plan does not read.
  std::string bad;
  parallel_for_each(2, [&](size_t i) {
    if (i == 0) update_costs(p, cache.spec());
    else bad = verify_plan(p);
  });
  if (!bad.empty())
    throw_error<InternalError>("retarget {} from P={} to P={}: {}", p.model, from, past, bad);
}

}  // namespace tessera::compiler
