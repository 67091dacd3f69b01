// The kv-resident pass (passes.h): zero-copy KV cache for decode. Without it
// kv_append is a host step that writes the new row into a row-major cache and
// attention_decode packs the whole cache into its own blocked stream order on
// every token (the relayout that dominates a decode attention step). With it
// the cache lives in DDR between calls in one T-independent layout, `R` rows
// of bf16, head-major ([kv_heads][R][head_dim]: each head's rows one
// contiguous run; kernels/builders/attention.h "cache_rows"):
// kv_append runs on the NPU and writes its M new rows into that buffer in
// place, and the attention's shim reads its blocks straight out of it. The
// cache before the call is then already where the design reads it
// (kResidentLayout: no host pack), and the cache after it is read by the
// attention as it is (same layout key: no unpack), so only the new rows move.
//
// R is fixed per plan from the context, not from T: the rows the attention's
// tiles span at the plan's T and at a full context, at least the context.
// Greedy like align-layouts: kept only when the plan's predicted time drops,
// judged after a trial fuse of both plans, since an NPU kv_append is meant to
// share the attention's dispatch (alone it would pay a dispatch overhead),
// and judged at the end of the context whatever the plan's own position
// (context_end_seconds), so every position of a session makes one choice.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "passes_internal.h"
#include "tessera/compiler/fused_cost.h"
#include "plan_text.h"
#include "tessera/compiler/passes.h"
#include "tessera/core/error.h"
#include "tessera/kernels/builders/attention.h"

namespace tessera::compiler {

namespace {

using detail::whole;

// Rows the attention's tiles stream at T (their blocks end past T when T does
// not divide evenly), under the tile options it is built with.
int64_t attention_span(const Launch& attn, int64_t T, const npu::DeviceSpec& spec) {
  kernels::OpShape s = attn.shape;
  s.dims["T"] = T;
  kernels::TileOptions tiles = attn.tiles;
  // Resident, with room for any span: the resident read may cut the context
  // into more chunks than the blocked one (attention.h).
  tiles["cache_rows"] = int64_t{1} << 40;
  const kernels::DecodePlan p = kernels::plan_attention_decode(s, spec, tiles);
  return p.NCH * p.R * p.nb * p.bk;
}

// Rows the kv_append's padded run reaches when it writes the context's last
// rows (its tiling pads M): the resident cache must hold them too, or the
// session's last positions could not keep it.
int64_t append_span(const kernels::OpShape& append, int64_t context, DesignCache& cache) {
  kernels::OpShape s = append;
  s.dims["T"] = context;
  s.dims["pos"] = context - s.dim("M");
  for (const npu::HostBuffer& h : cache.get(s, {}).op->design.host_buffers)
    if (h.name == "cache") return h.bytes / (s.dim("kv_dim") * 2);
  throw_error<InternalError>("{}: kv_append design without a cache buffer", s.key());
}

struct Candidate {
  Step* append = nullptr;          // the host kv_append step
  std::vector<Launch*> attention;  // its readers, every one an attention_decode launch
};

std::vector<Candidate> candidates(Plan& p, int64_t& prefill) {
  std::map<std::string, Candidate> by_value;
  std::vector<std::string> order;
  for (Step& s : p.steps)
    for (Launch& l : s.launches) {
      if (l.shape.op == "kv_append" && s.kind == StepKind::host) {
        by_value[l.name].append = &s;
        order.push_back(l.name);
      }
      for (const ValueRef& r : p.graph.nodes.at(l.node).inputs) {
        auto it = by_value.find(whole(r));
        if (r.kind != ValueKind::activation || it == by_value.end()) continue;
        if (s.kind == StepKind::npu && l.shape.op == "attention_decode")
          it->second.attention.push_back(&l);
        else
          it->second.append = nullptr;  // another reader needs the cache as it is
      }
    }
  std::vector<Candidate> out;
  for (const std::string& v : order) {
    Candidate& c = by_value[v];
    if (c.append && !c.attention.empty())
      out.push_back(c);
    else
      ++prefill;
  }
  return out;
}

// The launches a trial changes, as they were, put back by restore(): a copy
// of the whole plan per trial (every launch's timing, layouts and names) was
// a fifth of a decode plan's lowering, which a session repeats at every
// bucket of cache lengths.
class Undo {
 public:
  explicit Undo(Plan& p) : p_(p) {}
  void keep(Launch& l) {
    for (const auto& [at, copy] : launches_)
      if (at == &l) return;
    launches_.emplace_back(&l, l);
  }
  void keep(Step& s) { steps_.emplace_back(&s, s.kind); }
  void keep_shape(size_t node) { shapes_.emplace_back(node, p_.graph.nodes.at(node).shape); }
  // Everything kept, back as it was (steps' kinds before their launches).
  void restore() {
    for (auto& [s, kind] : steps_) s->kind = kind;
    for (auto& [l, copy] : launches_) *l = std::move(copy);
    for (auto& [node, shape] : shapes_) p_.graph.nodes.at(node).shape = std::move(shape);
    steps_.clear();
    launches_.clear();
    shapes_.clear();
  }

 private:
  Plan& p_;
  std::vector<std::pair<Step*, StepKind>> steps_;
  std::vector<std::pair<Launch*, Launch>> launches_;
  std::vector<std::pair<size_t, kernels::OpShape>> shapes_;
};

// The resident cache is a property of the session, not of one position: a
// session lowers a plan per decode position and the cache must keep one
// layout from the first step to the last (and phase 5's gate, which decodes
// a few steps after a short prompt, must run the same path a long session
// runs). So the choice is judged once, where the re-pack it saves is
// largest: at the end of the context, fused. That is the plan with the
// launches whose shape depends on T (kv_append, attention_decode) re-shaped
// to T = context and rebuilt, the rest as it is; `p` is put back as it was
// before this returns or throws (LimitError from a builder that cannot take
// the full context).
double context_end_seconds(Plan& p, DesignCache& cache) {
  Undo undo(p);
  try {
    for (Step& s : p.steps)
      for (Launch& l : s.launches) {
        const std::string op = l.shape.op;
        if (op != "kv_append" && op != "attention_decode") continue;
        undo.keep(l);
        undo.keep_shape(l.node);
        kernels::OpShape& shape = p.graph.nodes.at(l.node).shape;
        shape.dims["T"] = p.context;
        if (op == "kv_append") shape.dims["pos"] = p.context - shape.dim("M");
        if (s.kind == StepKind::host) {
          l = detail::place_launch(p, l.node, true, cache.spec());
          continue;
        }
        l.shape = shape;
        detail::build_launch(p, l, cache);
      }
    // FusedCost reads the launches only, never the steps' figures: no
    // update_costs needed for the trial.
    const double t = FusedCost(p).seconds(cache.spec());
    undo.restore();
    return t;
  } catch (...) {
    undo.restore();
    throw;
  }
}

}  // namespace

std::string pass_kv_resident(Plan& p, DesignCache& cache, bool bug) {
  const npu::DeviceSpec& spec = cache.spec();
  update_costs(p, spec);
  int64_t other = 0;
  std::vector<Candidate> cands = candidates(p, other);
  if (cands.empty()) return fmt::format("no decode KV cache ({} kv_append left as they are)", other);
  // What the trial changes, put back when the host cache is kept (the steps'
  // figures follow: run_passes re-costs the plan after every pass).
  Undo trial(p);
  int64_t rows = 0;
  try {
    const double t0 = context_end_seconds(p, cache);
    for (Candidate& c : cands) {
      Launch& a = c.append->launches.front();
      trial.keep(*c.append);
      trial.keep(a);
      for (Launch* at : c.attention) trial.keep(*at);
      const int64_t T = a.shape.dim("T");
      rows = std::max({p.context, T, append_span(a.shape, p.context, cache)});
      for (Launch* at : c.attention)
        rows = std::max({rows, attention_span(*at, T, spec), attention_span(*at, p.context, spec)});
      c.append->kind = StepKind::npu;
      a = detail::place_launch(p, a.node, false, spec);
      a.tiles["cache_rows"] = rows;
      // Head-major, as the attention reads it (kernels/builders/attention.h).
      a.tiles["cache_head_dim"] = c.attention.front()->shape.dim("head_dim");
      detail::build_launch(p, a, cache);
      // Planted: the cache is declared resident but the attention still reads
      // its own blocked copy, so the elided re-pack was needed.
      if (bug) continue;
      for (Launch* at : c.attention) {
        at->tiles["cache_rows"] = rows;
        detail::build_launch(p, *at, cache);
      }
    }
    update_costs(p, spec);
    if (const double t = bug ? 0 : context_end_seconds(p, cache); t >= t0) {
      trial.restore();
      return fmt::format("kept the host cache: resident predicts {} vs {} once fused at T={}",
                         detail::time_text(t), detail::time_text(t0), p.context);
    }
  } catch (const LimitError& e) {
    trial.restore();
    return fmt::format("kept the host cache: {}", e.what());
  }
  return fmt::format("{} kv_append on the NPU writing a resident cache of {} rows in place{}",
                     cands.size(), rows, bug ? " (planted: attention not rebuilt)" : "");
}

}  // namespace tessera::compiler
