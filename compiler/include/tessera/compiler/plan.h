#pragma once
// Lowering a model op graph (graph.h) to a Plan, the plan IR: the ordered
// steps one forward call (S new tokens after P cached ones) runs. A step is
// either an NPU dispatch (one or more launches of validated designs built by
// the ops' builders, run back to back on the array: a fused dispatch) or a
// host step (the host does the op itself: cheap data movement where a 46 us
// dispatch would cost more than the work). The plan is made by named passes
// (passes.h) and reads back from its text (parse_plan).
//
// Styles (named, the same graph lowers to either; each is a pass pipeline):
//   per-op   every node is one NPU dispatch, embedding / kv_append / argmax
//            included: the hand-written baseline every other style is
//            measured against (place, build, buffers).
//   default  the pure data-movement nodes (embedding row gather, kv_append
//            copy, argmax over the logits the sampler needs on the host
//            anyway) are host steps, and the optimization passes run (fuse,
//            reuse-buffers).
//
// Activation layouts: each builder packs its inputs in its own blocked layout,
// keyed by a probe (Launch::in_layouts / out_layout). Where a producer's
// layout differs from its reader's the host unpacks and repacks the value;
// that re-layout is charged per step (relayout_seconds, HostModel) only on
// such edges, and a dispatch never holds one between its launches. Weights
// are never re-laid-out at run time: they are packed once at deploy time
// (packed_weights.h) in the layout of the design that reads them
// (Launch::weight_layouts).
//
// Weight layouts are fixed per (weight, phase) so that one packed copy serves
// every shape a session builds: decode linears (M = 1, and the LM head over
// the last position) use the builder's GEMV layout; prefill linears (M > 1)
// use the GEMM tiles the builder picks for the largest bucket, passed as
// TileOptions to every prefill M (the W layout does not depend on M; a test
// proves it). So a model stores at most two layouts per linear weight.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/compiler/graph.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/timing.h"

namespace tessera::compiler {

class TileChoices;  // tile_choices.h

enum class PlanStyle { per_op, standard };
// "per-op" | "default"; parse throws UsageError listing the styles.
PlanStyle parse_plan_style(std::string_view name);
const char* plan_style_name(PlanStyle s);

// What host-side work costs (the host is the CPU next to the NPU, not this
// build machine): re-layout of activations between dispatches and host steps
// both stream their bytes once at bytes_per_second, plus a fixed cost.
struct HostModel {
  double bytes_per_second = 10e9;      // one pass over bf16 data (pack/unpack/gather/copy)
  double step_overhead_seconds = 2e-6; // a host function call + cache misses
};

// A launch's predicted timing, shared with the design cache entry it came
// from and with every copy of the launch: the passes copy launches in their
// trials and a plan per bucket, and each copy of the per-launch breakdown
// (names, bounds) was a tenth of lowering a decode plan. Immutable: a new
// timing is a new object.
class SharedTiming {
 public:
  SharedTiming() : p_(none()) {}
  SharedTiming(npu::DispatchTiming t) : p_(std::make_shared<const npu::DispatchTiming>(std::move(t))) {}  // NOLINT
  const npu::DispatchTiming* operator->() const { return p_.get(); }
  const npu::DispatchTiming& operator*() const { return *p_; }

 private:
  static const std::shared_ptr<const npu::DispatchTiming>& none() {
    static const auto empty = std::make_shared<const npu::DispatchTiming>();
    return empty;
  }
  std::shared_ptr<const npu::DispatchTiming> p_;
};

// Memoized builds: one BuiltOp (and its timing) per (op shape, tile options),
// shared by every layer and every plan lowered through the same cache - a
// session lowers one plan per decode position, and only attention / kv_append
// change shape from one position to the next. Thread safe.
class DesignCache {
 public:
  explicit DesignCache(npu::DeviceSpec spec);
  struct Entry {
    std::shared_ptr<const kernels::BuiltOp> op;
    SharedTiming timing;
    std::string key;  // the cache's key: shape and tile options
    // Weight probes (weight_layout_key) by input index, filled on first use:
    // the embedding-table / LM-head probe packs hundreds of MB.
    struct Probe {
      uint32_t hash = 0;
      int64_t bytes = 0;  // packed bytes of the weight (every buffer pack() wrote)
    };
    mutable std::mutex probe_mu;
    mutable std::map<size_t, Probe> probes;
    // Activation layouts (plan.h kHostLayout) by input index, -1 = output 0.
    struct ActProbe {
      std::string key;                   // "a:1a2b3c4d"
      int64_t bytes = 0;                 // DDR bytes as laid out
      std::vector<std::string> buffers;  // the design's host buffers holding it
    };
    mutable std::map<int, ActProbe> act_probes;
  };
  const Entry& get(const kernels::OpShape& shape, const kernels::TileOptions& tiles);
  // weight_layout_key(weight, *entry.op, input) and the packed size, with the
  // probe memoized in the entry (entry must come from get()).
  struct Layout {
    std::string key;
    int64_t bytes = 0;
  };
  Layout layout(const ValueRef& weight, const Entry& entry, size_t input) const;
  // The activation layout of input `input` of a built op, or of its output
  // (input = -1), probed once per entry.
  const Entry::ActProbe& activation(const Entry& entry, int input) const;
  const npu::DeviceSpec& spec() const { return spec_; }
  size_t size() const;
  // The tune-tiles decisions (tile_choices.h) of every plan lowered through
  // this cache; `use_tile_choices` shares a store (a deployment's) instead.
  TileChoices& tile_choices() const { return *tile_choices_; }
  std::shared_ptr<TileChoices> shared_tile_choices() const { return tile_choices_; }
  void use_tile_choices(std::shared_ptr<TileChoices> store);

 private:
  npu::DeviceSpec spec_;
  std::string spec_hash_;  // tile_choices.h spec_hash(spec_): keys the process-wide probe memo
  std::shared_ptr<TileChoices> tile_choices_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;
};

// The tile options the layout policy fixes for a node (linear: see above;
// every other op: {} = the builder's default).
kernels::TileOptions layout_tiles(const kernels::OpShape& shape, const npu::DeviceSpec& spec);

enum class StepKind { npu, host };

// Activation layouts (how a design's pack() lays a logical activation out in
// DDR, or how its output lands there) are keyed like weight layouts, from a
// probe: "a:<8 hex digits>", an FNV-1a hash of the sizes and bytes of the host
// buffers (their names excluded: a buffer shared between two designs has two
// names) that hold a fixed probe tensor. For an output the bytes are found by
// inverting unpack() (digit probes locate every logical element). Two equal
// keys mean the consumer can read the producer's DDR buffer as it is. The
// host's own layout is plain row-major bf16: kHostLayout.
inline constexpr const char* kHostLayout = "rows";
// The in-layout of a host-supplied input that is already in DDR in the layout
// the launch reads it in, because an earlier call left it there: the KV cache
// a resident kv_append updates in place (passes.h kv-resident). Never packed,
// never charged a re-layout.
inline constexpr const char* kResidentLayout = "a:resident";

// One graph node executed inside a step: a launch of its built op (npu) or
// the host's implementation of the op (host).
struct Launch {
  size_t node = 0;                 // index into Plan::graph.nodes
  std::string name;                // the node's output, ValueRef::str(): "L0.q"
  kernels::OpShape shape;
  kernels::TileOptions tiles;      // npu: what the builder was given
  std::shared_ptr<const kernels::BuiltOp> op;  // npu: the validated design
  SharedTiming timing;             // npu: estimate_time of op->design, as its own dispatch
  double host_seconds = 0;         // host: predicted cost of the op on the host
  // Per input of the node (same order): the weight layout key the packed
  // weight is stored under (weight_layout_key), "" for non-weights; and the
  // activation layout key the op reads it in, "" for weights.
  std::vector<std::string> weight_layouts;
  std::vector<std::string> in_layouts;
  std::string out_layout;          // activation layout key of the output
  int64_t out_bytes = 0;           // DDR bytes of the output as laid out (padding included)
  // npu, derived by build: the design's host buffers holding each activation
  // input and the output (name order), so a reader whose layout matches can
  // take the producer's bytes as they are.
  std::vector<std::vector<std::string>> in_buffers;
  std::vector<std::string> out_buffers;
};

// One dispatch (npu: one or more launches in sequence on the array, sharing
// DDR buffers; several launches = a fused dispatch) or one host step.
struct Step {
  StepKind kind = StepKind::npu;
  std::vector<Launch> launches;    // >= 1; host steps have exactly one
  // npu: one dispatch overhead + the launches' own times + a reconfiguration
  // per extra launch (the sum estimate_time charges a merged multi-launch
  // design; computed from the launches' timings, plan_cost.cpp).
  double dispatch_seconds = 0;
  std::string dispatch_bound;      // the term that contributed most time
  // Host pack of inputs whose producer wrote another layout (or the host),
  // unpack of outputs some reader needs in another layout (or on the host).
  double relayout_seconds = 0;
  double host_seconds = 0;         // host: predicted cost of the op on the host

  const Launch& front() const { return launches.front(); }
  // "L0.q" for one launch, "L0.attn_norm..L0.v" for several.
  std::string name() const;
  double seconds() const;          // dispatch + relayout, or host_seconds
  std::string bound() const;       // dispatch_bound, or "host"
};

// A DDR buffer the plan reads or writes, named and sized, with its lifetime
// (steps first..last that touch it; weights, caches and io live for the whole
// plan: -1) and, for activations, its offset in the activation arena.
enum class BufferKind { weight, activation, kv_cache, io };
struct BufferDecl {
  std::string name;     // "w:L0.q_proj@1a2b3c4d", "L0.q", "L0.k_cache", "host:token_ids"
  BufferKind kind = BufferKind::activation;
  int64_t bytes = 0;
  int64_t first = -1, last = -1;  // step indices; -1: the whole plan
  int64_t offset = -1;            // activation arena offset; -1: not in the arena
};

struct Plan {
  std::string model;
  std::string spec;                        // DeviceSpec name the designs were built for
  PlanStyle style = PlanStyle::per_op;
  int64_t seq = 0, past = 0, context = 0;  // S, P, the KV cache capacity in positions
  HostModel host;
  std::vector<std::string> passes;         // the passes that produced it, in order
  Graph graph;
  std::vector<Step> steps;                 // in execution order; every node in exactly one
  std::vector<BufferDecl> buffers;

  double predicted_seconds() const;        // sum of step seconds
  int64_t dispatches() const;              // npu steps
  // NPU dispatches of layer 0 (every layer lowers the same way); a fused step
  // counts for the layer of its first launch.
  int64_t dispatches_per_layer() const;
  int layer_of(const Step& s) const { return graph.nodes.at(s.front().node).layer; }
  // Seconds by bounding term over all steps; host re-layout is its own term.
  std::map<std::string, double> bound_seconds() const;
  // The activation arena: max over activation buffers of offset + bytes.
  int64_t arena_bytes() const;
  // The plan IR as text: header, host model, passes, graph nodes, steps with
  // their launches (tiles and layout keys), buffers, then derived totals.
  // parse_plan() reads it back; dump(parse_plan(dump(p))) == dump(p).
  std::string dump() const;
  nlohmann::json to_json() const;
};

struct PlanOptions {
  PlanStyle style = PlanStyle::standard;
  int64_t context = 0;   // 0: config.max_position_embeddings capped at 4096
  HostModel host;
  // The pass pipeline (passes.h): empty = the style's; `disabled` passes are
  // skipped (required ones - place, build, buffers - cannot be).
  std::vector<std::string> passes;
  std::set<std::string> disabled;
  std::string plant_bug;  // a pass to run with its planted bug (passes.h), "" none
};

// Lowers build_graph(config, seq, past) through the style's pass pipeline
// (passes.h). Every NPU design is validated (by its builder); throws
// LimitError / UsageError from builders unchanged, UsageError when seq + past
// exceeds the context or a pass name is unknown.
Plan lower(const model::ModelConfig& config, int64_t seq, int64_t past, DesignCache& cache,
           const PlanOptions& opts = {});

// Reads Plan::dump() text back: the graph, steps, tiles and buffer decisions
// come from the text; designs are rebuilt through `cache` and every derived
// figure recomputed. Throws InputError naming the line for malformed text,
// and for a plan made for another spec or whose recorded layout keys differ
// from what the builders produce now (stale plan).
Plan parse_plan(const std::string& text, DesignCache& cache);

// The layout key under which weight input `input` of a built op is packed:
// "<weight ValueRef::str()>@<8 hex digits>", the digits an FNV-1a hash of the
// host buffer names, sizes and bytes that pack() writes for a fixed probe
// tensor (value i -> bf16-exact ramp of i). Two steps share a packed weight
// iff their packing is byte-identical, whatever the op shape; the DesignCache
// computes it once per (shape, tiles, input).
std::string weight_layout_key(const ValueRef& weight, const kernels::BuiltOp& op, size_t input);

}  // namespace tessera::compiler
