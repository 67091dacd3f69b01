// The pass manager (passes.h), lower(), and the passes that turn a graph into
// built steps: place and build.
#include "tessera/compiler/passes.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "passes_internal.h"
#include "plan_text.h"
#include "tessera/core/error.h"
#include "tessera/core/mutants.h"

namespace tessera::compiler {

std::string pass_fuse(Plan& plan, DesignCache& cache, bool bug);  // pass_fuse.cpp
std::string pass_buffers(Plan& plan, DesignCache& cache, bool bug);  // pass_buffers.cpp
std::string pass_reuse_buffers(Plan& plan, DesignCache& cache, bool bug);
std::string pass_align_layouts(Plan& plan, DesignCache& cache, bool bug);  // pass_align.cpp
std::string pass_kv_resident(Plan& plan, DesignCache& cache, bool bug);  // pass_kv_resident.cpp
std::string pass_tune_tiles(Plan& plan, DesignCache& cache, bool bug);  // pass_tune_tiles.cpp

namespace {

// Pure data movement: cheaper on the host than a dispatch (plan.h, "default").
bool host_op(const std::string& op) {
  return op == "embedding" || op == "kv_append" || op == "argmax";
}

// Bytes a host step reads and writes: embedding gathers M rows of the table
// (plus the ids), kv_append copies the M new rows into the cache in place,
// argmax reads the bf16 logits and writes an id.
int64_t host_step_bytes(const kernels::OpShape& s) {
  const int64_t M = s.dim("M");
  if (s.op == "embedding") return M * 4 + 2 * M * s.dim("H") * 2;
  if (s.op == "kv_append") return 2 * M * s.dim("kv_dim") * 2;
  if (s.op == "argmax") return M * s.dim("V") * 2 + M * 4;
  throw_error<InternalError>("plan: op '{}' has no host implementation", s.op);
}

// Logical bytes of a host step's output (bf16; the token id is an int32).
int64_t host_output_bytes(const Node& n) {
  const auto& s = n.shape;
  if (s.op == "argmax") return s.dim("M") * 4;
  if (s.op == "embedding") return s.dim("M") * s.dim("H") * 2;
  return s.dim("T") * s.dim("kv_dim") * 2;  // kv_append: the cache
}

std::string place(Plan& plan, DesignCache& cache, bool bug) {
  TESSERA_CHECK(plan.steps.empty(), "place: the plan already has {} steps", plan.steps.size());
  int64_t host = 0;
  for (size_t i = 0; i < plan.graph.nodes.size(); ++i) {
    const bool on_host = plan.style == PlanStyle::standard && host_op(plan.graph.nodes[i].shape.op);
    Step s;
    s.kind = on_host ? StepKind::host : StepKind::npu;
    s.launches.push_back(detail::place_launch(plan, i, on_host, cache.spec()));
    if (bug && plan.graph.nodes[i].name == "h_mid") continue;  // planted: a node is lost
    plan.steps.push_back(std::move(s));
    host += on_host;
  }
  return fmt::format("{} steps: {} NPU dispatches, {} host steps", plan.steps.size(),
                     plan.steps.size() - static_cast<size_t>(host), host);
}

std::string build(Plan& plan, DesignCache& cache, bool bug) {
  std::string out = detail::build_launches(plan, cache);
  // Planted: the attention reads its queries before the rope made them.
  for (size_t i = 0; bug && i + 1 < plan.steps.size(); ++i)
    if (plan.steps[i + 1].front().shape.op.starts_with("attention")) {
      std::swap(plan.steps[i], plan.steps[i + 1]);
      break;
    }
  return out;
}

}  // namespace

namespace detail {

Launch place_launch(const Plan& plan, size_t i, bool on_host, const npu::DeviceSpec& spec) {
  const Node& node = plan.graph.nodes.at(i);
  Launch l;
  l.node = i;
  l.name = node.output.str();
  l.shape = node.shape;
  if (!on_host) {
    l.tiles = layout_tiles(node.shape, spec);
    return l;
  }
  l.host_seconds = static_cast<double>(host_step_bytes(node.shape)) / plan.host.bytes_per_second +
                   plan.host.step_overhead_seconds;
  // The host reads a weight as the plain row-major bf16 table.
  for (const ValueRef& in : node.inputs) {
    const bool w = in.kind == ValueKind::weight;
    l.weight_layouts.push_back(w ? in.str() + "@table" : "");
    l.in_layouts.push_back(w ? "" : kHostLayout);
  }
  l.out_layout = kHostLayout;
  l.out_bytes = host_output_bytes(node);
  return l;
}

void build_launch(const Plan& plan, Launch& l, DesignCache& cache, bool weight_keys) {
  const Node& node = plan.graph.nodes.at(l.node);
  // Mutant exec_kv_write_prev (core/mutants.h): layer 1's kv_append writes its
  // rows one position early; on the NPU that is a design built for pos - 1
  // behind a launch that still names pos (the host step: runtime/executor.cpp).
  kernels::OpShape shape = l.shape;
  if (mutant_on(Mutant::exec_kv_write_prev) && shape.op == "kv_append" && node.layer == 1 &&
      shape.dim("pos") > 0)
    shape.dims["pos"] -= 1;
  const DesignCache::Entry& e = cache.get(shape, l.tiles);
  l.op = e.op;
  l.timing = e.timing;
  l.weight_layouts.clear();
  l.in_layouts.clear();
  l.in_buffers.assign(node.inputs.size(), {});
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const ValueRef& in = node.inputs[k];
    if (in.kind == ValueKind::weight) {
      l.weight_layouts.push_back(weight_keys ? cache.layout(in, e, k).key : std::string());
      l.in_layouts.emplace_back();
    } else {
      l.weight_layouts.emplace_back();
      // The host packs what it supplies; only NPU-made values are probed. The
      // cache a resident kv_append updates is already in DDR as it reads it
      // (input 1 of kv_append is the cache it writes in place).
      if (in.kind == ValueKind::host) {
        const bool resident = l.shape.op == "kv_append" && k == 1 && l.tiles.count("cache_rows");
        l.in_layouts.emplace_back(resident ? kResidentLayout : "a:host");
        continue;
      }
      const auto& a = cache.activation(e, static_cast<int>(k));
      l.in_layouts.push_back(a.key);
      l.in_buffers[k] = a.buffers;
    }
  }
  const auto& out = cache.activation(e, -1);
  l.out_layout = out.key;
  // An opaque output (ids, f32): its logical size.
  l.out_bytes = out.bytes > 0 ? out.bytes : shape_numel(e.op->outputs.at(0).shape) * 2;
  l.out_buffers = out.buffers;
}

std::string build_launches(Plan& plan, DesignCache& cache) {
  int64_t built = 0;
  for (Step& s : plan.steps) {
    if (s.kind != StepKind::npu) continue;
    for (Launch& l : s.launches) {
      build_launch(plan, l, cache);
      ++built;
    }
  }
  return fmt::format("{} launches built, {} designs in the cache", built, cache.size());
}

}  // namespace detail

namespace {

const std::vector<PassInfo> kPasses = {
    {"place", true, "one step per graph node, NPU or host by style", place},
    {"build", true, "designs, timings, weight and activation layout keys", build},
    {"tune-tiles", false, "each linear rebuilt with the tile option the timing model predicts "
                          "fastest among those keeping its layouts (searched once per shape)",
     pass_tune_tiles},
    {"kv-resident", false, "decode KV cache resident in DDR in the attention's layout, "
                           "kv_append on the NPU writing it in place (no per-step re-pack)",
     pass_kv_resident},
    {"align-layouts", false, "producer and readers of an activation rebuilt in the row-major "
                             "layout where that lowers the predicted time (no re-layout)",
     pass_align_layouts},
    {"fuse", false, "consecutive NPU steps of a layer whose inner values need no re-layout "
                    "become one multi-launch dispatch", pass_fuse},
    {"buffers", true, "DDR buffers with lifetimes, one arena slot each", pass_buffers},
    {"reuse-buffers", false, "liveness-based arena offsets", pass_reuse_buffers},
};

// The bounding term whose seconds changed most.
std::string moved_term(const Plan& before_plan, const std::map<std::string, double>& before,
                       const Plan& after_plan) {
  (void)before_plan;
  std::map<std::string, double> after = after_plan.bound_seconds();
  std::string best;
  double delta = 0;
  std::set<std::string> terms;
  for (const auto& [k, v] : before) terms.insert(k);
  for (const auto& [k, v] : after) terms.insert(k);
  for (const std::string& t : terms) {
    const double d = std::fabs((after.count(t) ? after[t] : 0) - (before.count(t) ? before.at(t) : 0));
    if (d > delta) {
      delta = d;
      best = t;
    }
  }
  if (best.empty()) return "none";
  return fmt::format("{} {} -> {}", best, detail::time_text(before.count(best) ? before.at(best) : 0),
                     detail::time_text(after.count(best) ? after[best] : 0));
}

}  // namespace

const std::vector<PassInfo>& pass_registry() { return kPasses; }

std::vector<std::string> style_passes(PlanStyle style) {
  if (style == PlanStyle::per_op) return {"place", "build", "buffers"};
  return {"place", "build", "tune-tiles", "kv-resident", "align-layouts", "fuse", "buffers", "reuse-buffers"};
}

std::vector<std::string> resolve_passes(PlanStyle style, const std::vector<std::string>& passes,
                                        const std::set<std::string>& disabled) {
  std::vector<std::string> names = passes.empty() ? style_passes(style) : passes;
  std::vector<std::string> known;
  for (const PassInfo& p : kPasses) known.push_back(p.name);
  for (const std::string& d : disabled) {
    auto it = std::find_if(kPasses.begin(), kPasses.end(), [&](const PassInfo& p) { return d == p.name; });
    if (it == kPasses.end())
      throw_error<UsageError>("unknown pass '{}' (passes: {})", d, fmt::join(known, ", "));
    if (it->required) throw_error<UsageError>("pass '{}' is required and cannot be disabled", d);
  }
  std::vector<std::string> out;
  size_t last = 0;
  for (const std::string& n : names) {
    auto it = std::find_if(kPasses.begin(), kPasses.end(), [&](const PassInfo& p) { return n == p.name; });
    if (it == kPasses.end())
      throw_error<UsageError>("unknown pass '{}' (passes: {})", n, fmt::join(known, ", "));
    const size_t idx = static_cast<size_t>(it - kPasses.begin());
    if (!out.empty() && idx <= last)
      throw_error<UsageError>("pass '{}' out of order (order: {})", n, fmt::join(known, ", "));
    last = idx;
    if (!disabled.count(n)) out.push_back(n);
  }
  for (const PassInfo& p : kPasses)
    if (p.required && std::find(out.begin(), out.end(), p.name) == out.end())
      throw_error<UsageError>("pass pipeline '{}' lacks the required pass '{}'", fmt::join(out, ","),
                              p.name);
  return out;
}

std::string PassRecord::line() const {
  return fmt::format("pass {:<14} {} -> {} | {} | moved: {}", pass, detail::time_text(before),
                     detail::time_text(after), changed, moved);
}

void run_passes(Plan& plan, const std::vector<std::string>& names, DesignCache& cache,
                const PassObserver& after, const std::string& plant_bug) {
  for (const std::string& n : names) {
    auto it = std::find_if(kPasses.begin(), kPasses.end(), [&](const PassInfo& p) { return n == p.name; });
    if (it == kPasses.end()) throw_error<UsageError>("unknown pass '{}'", n);
    PassRecord rec;
    rec.pass = n;
    rec.before = plan.predicted_seconds();
    const auto bounds = plan.bound_seconds();
    rec.changed = it->run(plan, cache, plant_bug == n);
    plan.passes.push_back(n);
    if (const std::string bad = verify_plan(plan); !bad.empty())
      throw_error<InternalError>("pass '{}' broke the plan of {} S={} P={}: {}", n, plan.model,
                                 plan.seq, plan.past, bad);
    update_costs(plan, cache.spec());
    rec.after = plan.predicted_seconds();
    rec.moved = moved_term(plan, bounds, plan);
    if (after) after(rec, plan);
  }
}

Plan plan_header(const model::ModelConfig& config, int64_t seq, int64_t past,
                 const DesignCache& cache, const PlanOptions& opts) {
  Plan p;
  p.model = config.name;
  p.spec = cache.spec().name;
  p.style = opts.style;
  p.seq = seq;
  p.past = past;
  p.host = opts.host;
  p.context = opts.context > 0 ? opts.context : config.default_context();
  config.check_context(p.context);
  if (seq + past > p.context)
    throw_error<UsageError>("{}: S={} + P={} positions exceed the plan context {} (the KV cache "
                            "capacity)", config.name, seq, past, p.context);
  p.graph = build_graph(config, seq, past);
  return p;
}

Plan lower(const model::ModelConfig& config, int64_t seq, int64_t past, DesignCache& cache,
           const PlanOptions& opts) {
  const auto names = resolve_passes(opts.style, opts.passes, opts.disabled);
  Plan p = plan_header(config, seq, past, cache, opts);
  run_passes(p, names, cache, {}, opts.plant_bug);
  return p;
}

}  // namespace tessera::compiler
