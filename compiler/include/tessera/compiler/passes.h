#pragma once
// The pass manager: a plan is lowered by an ordered, named pipeline of passes
// over the plan IR (plan.h). Each pass rewrites the plan in place and says in
// one line what it changed; after every pass the derived figures (dispatch
// times, re-layout, bounds) are recomputed, so a pass's effect is measured by
// the same timing and host model as the plan itself.
//
// Passes (canonical order):
//   place          one step per graph node: NPU dispatch or host step (style)
//   build          every NPU launch's design built (DesignCache), its timing,
//                  weight and activation layout keys
//   tune-tiles     every linear launch rebuilt with the tile option the tile
//                  search (kernels/tile_search.h) predicts fastest among those
//                  that keep its activation layouts (and its weight layout
//                  where the layout policy fixed one); one search per distinct
//                  (shape, fixed options), remembered in the DesignCache's
//                  decision store (tile_choices.h), which deploy saves
//   kv-resident    decode: the KV cache lives in DDR between calls in one
//                  T-independent head-major layout the attention reads as it
//                  is; kv_append runs on the NPU and writes the new rows into
//                  it in place, so no step re-packs the cache (kept when the
//                  predicted time drops)
//   align-layouts  the producer writes the layout its readers read: for each
//                  activation whose producer and readers are all NPU launches,
//                  they are rebuilt in the row-major layout (kernels/
//                  activation_layout.h) when every one can be (or the
//                  producer's output alone, when its readers already read
//                  it plain) and the plan's predicted time once fused drops
//                  (greedy, in plan order), so the edge is charged no
//                  re-layout and fuse may merge across it
//   fuse           merges consecutive NPU steps of one layer into one multi-
//                  launch dispatch wherever every value passed inside it is
//                  already in the layout its reader wants (a dispatch cannot
//                  stop for a host re-layout between launches)
//   buffers        the DDR buffers with their lifetimes, each activation its
//                  own arena slot
//   reuse-buffers  liveness-based arena offsets (first fit): peak activation
//                  DDR bytes
// Required passes (place, build, buffers) cannot be disabled.
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tessera/compiler/plan.h"

namespace tessera::compiler {

struct PassInfo {
  const char* name;
  bool required;
  const char* what;
  // Rewrites the plan; returns what changed ("merged 24 launches into 8
  // dispatches"). `bug`: the pass's planted bug (tests, deploy --plant-bug):
  // fuse merges across layout mismatches, reuse-buffers ignores liveness,
  // align-layouts rebuilds a producer row-major without its readers,
  // kv-resident declares the cache resident without rebuilding the attention,
  // tune-tiles takes the slowest option the search timed.
  std::string (*run)(Plan& plan, DesignCache& cache, bool bug);
};
const std::vector<PassInfo>& pass_registry();  // canonical order

// The pipeline of a style.
std::vector<std::string> style_passes(PlanStyle style);
// `passes` (empty: the style's) minus `disabled`; UsageError for an unknown
// name, a required pass disabled or missing, or passes out of canonical order.
std::vector<std::string> resolve_passes(PlanStyle style, const std::vector<std::string>& passes,
                                        const std::set<std::string>& disabled);

// One pass's effect on one plan.
struct PassRecord {
  std::string pass;
  std::string changed;
  double before = 0, after = 0;    // predicted seconds of the plan
  std::string moved;               // the bounding term that moved most: "overhead 1.2ms -> 0.4ms"
  std::string line() const;        // one stats line
};
using PassObserver = std::function<void(const PassRecord&, const Plan&)>;

// Runs `names` over `plan` (header and graph set, no steps yet, or a plan
// some passes already ran on), recomputing derived figures after each.
// `plant_bug` names a pass to run with its planted bug; verify_plan then
// names that pass in the InternalError it throws.
void run_passes(Plan& plan, const std::vector<std::string>& names, DesignCache& cache,
                const PassObserver& after = {}, const std::string& plant_bug = "");

// The plan header and graph for lower() (no steps): UsageError when S + P
// exceeds the context.
Plan plan_header(const model::ModelConfig& config, int64_t seq, int64_t past,
                 const DesignCache& cache, const PlanOptions& opts);

// Recomputes every derived figure of a plan from its launches (plan_cost.cpp).
void update_costs(Plan& plan, const npu::DeviceSpec& spec);

// True when a consumer reading layout `in` can read a producer's `out` as it is.
bool layouts_match(const std::string& out, const std::string& in);

}  // namespace tessera::compiler

namespace tessera::compiler {

// The invariants every pass must keep (run_passes checks them after each
// pass and throws InternalError naming the pass): every graph node in exactly
// one launch, in an order where each value is made before it is read; a host
// step has one launch; inside an NPU step every value handed from one launch
// to a later one is in the reader's layout (no host re-layout mid-dispatch);
// activation buffers whose lifetimes overlap do not overlap in the arena;
// every reader of a value written over a resident input (kResidentLayout)
// reads it as it is, on the NPU.
// Returns the first violation, "" when there is none.
std::string verify_plan(const Plan& plan);

}  // namespace tessera::compiler

namespace tessera::compiler {

// The physical floors of a plan on a spec, next to its prediction: the
// logical MACs (linear M*K*N, attention QK^T + PV over the causal positions)
// at the array's peak bf16 MAC rate, and the bf16 bytes of every weight the
// NPU reads once per call at the NPU's DDR bandwidth. Prefill is bound by the
// first, decode by the second.
struct PlanBounds {
  int64_t macs = 0;
  int64_t weight_bytes = 0;
  double compute_seconds = 0;   // macs / (tiles * macs_per_cycle_bf16 * clock_hz)
  double weight_ddr_seconds = 0;  // weight_bytes / ddr_bytes_per_second
};
PlanBounds plan_bounds(const Plan& plan, const npu::DeviceSpec& spec);

}  // namespace tessera::compiler
