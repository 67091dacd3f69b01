#pragma once
// Lowering a model op graph (graph.h) to a Plan: the ordered steps one forward
// call (S new tokens after P cached ones) runs. A step is either an NPU
// dispatch (one validated Design built by the op's builder; in later issues a
// fused multi-launch design) or a host step (the host does the op itself:
// cheap data movement where a 46 us dispatch would cost more than the work).
//
// Styles (named, the same graph lowers to either):
//   per-op   every node is one NPU dispatch, embedding / kv_append / argmax
//            included: the hand-written baseline every other style is
//            measured against.
//   default  what this issue does well: per-op dispatches for the compute
//            ops, while the pure data-movement nodes (embedding row gather,
//            kv_append copy, argmax over the logits the sampler needs on the
//            host anyway) are host steps. Fusion arrives in a later issue.
//
// Activation layouts: each builder packs its inputs in its own blocked layout,
// so between two dispatches the host unpacks the producer's output and packs
// the consumer's input. That re-layout is charged per step (relayout_seconds,
// HostModel) and named in the dump, so the later align-layouts / elide-
// transfers passes have a measured target. Weights are never re-laid-out at
// run time: they are packed once at deploy time (packed_weights.h) in the
// layout of the design that reads them (Step::weight_layouts).
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

// Memoized builds: one BuiltOp (and its timing) per (op shape, tile options),
// shared by every layer and every plan lowered through the same cache - a
// session lowers one plan per decode position, and only attention / kv_append
// change shape from one position to the next. Thread safe.
class DesignCache {
 public:
  explicit DesignCache(npu::DeviceSpec spec);
  struct Entry {
    std::shared_ptr<const kernels::BuiltOp> op;
    npu::DispatchTiming timing;
    // Weight probes (weight_layout_key) by input index, filled on first use:
    // the embedding-table / LM-head probe packs hundreds of MB.
    struct Probe {
      uint32_t hash = 0;
      int64_t bytes = 0;  // packed bytes of the weight (every buffer pack() wrote)
    };
    mutable std::mutex probe_mu;
    mutable std::map<size_t, Probe> probes;
  };
  const Entry& get(const kernels::OpShape& shape, const kernels::TileOptions& tiles);
  // weight_layout_key(weight, *entry.op, input) and the packed size, with the
  // probe memoized in the entry (entry must come from get()).
  struct Layout {
    std::string key;
    int64_t bytes = 0;
  };
  Layout layout(const ValueRef& weight, const Entry& entry, size_t input) const;
  const npu::DeviceSpec& spec() const { return spec_; }
  size_t size() const;

 private:
  npu::DeviceSpec spec_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;
};

// The tile options the layout policy fixes for a node (linear: see above;
// every other op: {} = the builder's default).
kernels::TileOptions layout_tiles(const kernels::OpShape& shape, const npu::DeviceSpec& spec);

enum class StepKind { npu, host };

struct Step {
  StepKind kind = StepKind::npu;
  size_t node = 0;                 // index into Plan::graph.nodes
  std::string name;                // the node's output, ValueRef::str(): "L0.q"
  kernels::OpShape shape;
  kernels::TileOptions tiles;      // npu: what the builder was given (layout_tiles)
  std::shared_ptr<const kernels::BuiltOp> op;  // npu: the validated design
  npu::DispatchTiming timing;      // npu: estimate_time of op->design
  double relayout_seconds = 0;     // npu: host pack of activation inputs + unpack of outputs
  double host_seconds = 0;         // host: predicted cost of the op on the host
  // Per input of the node (same order): for weight inputs the layout key the
  // packed weight is stored under (weight_layout_key), "" otherwise.
  std::vector<std::string> weight_layouts;

  double seconds() const;          // timing.total_seconds + relayout, or host_seconds
  std::string bound() const;       // timing.bound, or "host"
};

// A DDR buffer the plan reads or writes, named and sized.
enum class BufferKind { weight, activation, kv_cache, io };
struct BufferDecl {
  std::string name;     // "w:L0.q_proj@1a2b3c4d", "L0.q", "L0.k_cache", "host:token_ids"
  BufferKind kind = BufferKind::activation;
  int64_t bytes = 0;
};

struct Plan {
  std::string model;
  std::string spec;                        // DeviceSpec name the designs were built for
  PlanStyle style = PlanStyle::per_op;
  int64_t seq = 0, past = 0, context = 0;  // S, P, the KV cache capacity in positions
  Graph graph;
  std::vector<Step> steps;                 // in execution order, one per graph node
  std::vector<BufferDecl> buffers;

  double predicted_seconds() const;        // sum of step seconds
  int64_t dispatches() const;              // npu steps
  // NPU dispatches of layer 0 (every layer lowers the same way).
  int64_t dispatches_per_layer() const;
  // Stable text (golden tests): header, one line per step with kind, name,
  // shape, tiles, predicted time and bound, then buffers and totals.
  std::string dump() const;
  nlohmann::json to_json() const;
};

struct PlanOptions {
  PlanStyle style = PlanStyle::standard;
  int64_t context = 0;   // 0: config.max_position_embeddings capped at 4096
  HostModel host;
};

// Lowers build_graph(config, seq, past). Every NPU step's design is validated
// (by its builder); throws LimitError / UsageError from builders unchanged,
// UsageError when seq + past exceeds the context.
Plan lower(const model::ModelConfig& config, int64_t seq, int64_t past, DesignCache& cache,
           const PlanOptions& opts = {});

// The layout key under which weight input `input` of a built op is packed:
// "<weight ValueRef::str()>@<8 hex digits>", the digits an FNV-1a hash of the
// host buffer names, sizes and bytes that pack() writes for a fixed probe
// tensor (value i -> bf16-exact ramp of i). Two steps share a packed weight
// iff their packing is byte-identical, whatever the op shape; the DesignCache
// computes it once per (shape, tiles, input).
std::string weight_layout_key(const ValueRef& weight, const kernels::BuiltOp& op, size_t input);

}  // namespace tessera::compiler
