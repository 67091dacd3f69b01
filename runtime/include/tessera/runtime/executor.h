#pragma once
// Runs one Plan (one forward call: S tokens after P cached positions) on the
// modelled NPU: every NPU step's design executes on the functional simulator
// with its weights read in place from PackedWeights (npu::HostViews of the
// mapped packed-weights file: no re-layout, no copy) and its
// activation inputs packed from the values earlier steps produced; host steps
// (plan.h default style) run here with the same bf16 rules a tile has (they
// only move bf16 values: gather, copy, argmax).
//
// Values are named by ValueRef::str() ("embed", "L0.q", "L0.k_cache",
// "logits", "host:token_ids", ...) and held as logical row-major FP32 whose
// every element is a bf16 value (unpack of a bf16 buffer), so phase gates can
// compare any of them with the oracle tap of the same name.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tessera/compiler/packed_weights.h"
#include "tessera/compiler/plan.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/simulator.h"

namespace tessera::runtime {

using Values = std::map<std::string, std::vector<float>>;

// One launch of a step: its own predicted time (npu: the design's, without
// the dispatch overhead its step pays once; host: the host model's) and this
// machine's wall time for it.
struct LaunchRecord {
  std::string name;  // Launch::name, "L0.q"
  double predicted_seconds = 0;
  double host_seconds = 0;
};

struct StepRecord {
  std::string name;          // Step::name
  std::string op;            // op name
  bool npu = true;
  double predicted_seconds = 0;  // Step::seconds()
  double host_seconds = 0;       // wall time of this step on this machine (simulation)
  std::vector<LaunchRecord> launches;
};

// Rows [first, first + count) of a value `width` wide. A decode session keeps
// only the new rows of each K/V cache: the whole cache (T rows) unpacked per
// token was host work growing with the context.
struct KeepRows {
  int64_t first = 0;
  int64_t count = 0;
  int64_t width = 0;
};

struct ExecResult {
  Values values;                  // every value produced (or only `keep`, see run)
  double predicted_seconds = 0;   // sum over steps: what the NPU + host would take
  double host_seconds = 0;        // wall time here (simulation included)
  std::vector<StepRecord> steps;
};

class Executor {
 public:
  Executor(const npu::DeviceSpec& spec, const compiler::PackedWeights& weights);

  // `inputs` holds the host values the graph reads: "host:token_ids" (ids as
  // floats), "host:rope_cos", "host:rope_sin" ([S, head_dim/2], oracle::
  // rope_table for positions P..P+S-1), "host:L<i>.k_cache_in" /
  // "host:L<i>.v_cache_in" ([P+S, kv_dim], rows >= P ignored). Values not in
  // `keep` are dropped once their last reader ran (keep = nullptr keeps all).
  // Throws InputError when a needed input is missing, InternalError when a
  // step's weight layout is absent from the packed weights.
  //
  // `last_row` is the row a `last_row` ref (ValueRef::last_row: the LM head's
  // input "final_norm[-1]") takes from its [S, width] value: -1 = row S-1.
  // A session that pads a prompt to a bucket passes the last REAL row, so the
  // logits are those of the last real token, not of a pad. progress(done,
  // total) is called after every step.
  //
  // The packed weights are only read (views, never swapped or written), so
  // several Executors may share one PackedWeights.
  //
  // A value named in `keep_rows` is in the result as those rows only
  // (unpacked alone where its producer can: BuiltOp::unpack_rows).
  ExecResult run(const compiler::Plan& plan, const Values& inputs,
                 const std::set<std::string>* keep = nullptr,
                 const std::function<void(size_t, size_t)>& progress = {},
                 int64_t last_row = -1, const std::map<std::string, KeepRows>* keep_rows = nullptr);

  // The simulator-ready form of a built op's design: validated and laid out
  // on the first run of the op, reused by every later run (the plan of each
  // decode token names the same cached ops). Holds the op alive so its
  // address keys nothing else.
  const npu::PreparedDesign& prepared(const std::shared_ptr<const kernels::BuiltOp>& op);

  // The bytes of a resident KV cache (a kv_append built with "cache_rows":
  // R rows whatever T is) kept from one run to the next, so a decode step
  // packs the T cached rows into a buffer whose rows >= `rows` are still
  // zero instead of zero-filling all R rows, and hands it to the attention as
  // a view. Keyed by the kv_append's value name ("L0.k_cache").
  struct ResidentImage {
    std::string layout;            // kv_dim and the tiles that fix the layout
    std::vector<std::byte> bytes;  // empty while lent to a run
    int64_t rows = 0;              // rows >= this are zero
    int64_t appended_first = 0;    // the rows the kv_append of the run that left it wrote
    int64_t appended_rows = 0;
  };
  std::map<std::string, ResidentImage>& resident_images() { return resident_; }

  // Launches (by step name) where another input's pack() wrote into a
  // buffer handed over as a view (kv_append's cache fills the padded rows of
  // its new rows' stream): their inputs are packed in order from the start,
  // instead of viewed, packed, found to collide and packed again. Only
  // spares work: packing in order is what a view stands in for.
  std::set<std::string>& packs_in_order() { return packs_in_order_; }

  // A caller that only appends to the K/V caches it passes from one run to
  // the next (a Session: its reset() calls forget_resident()) lets a resident
  // cache keep the rows its image already holds instead of packing all T
  // rows per token: only the rows past them are packed, after the rows the
  // last run appended are found equal to the caller's (else all are packed).
  void set_append_only(bool on) { append_only_ = on; }
  bool append_only() const { return append_only_; }
  void forget_resident() { resident_.clear(); }

 private:
  npu::DeviceSpec spec_;
  const compiler::PackedWeights* weights_;
  npu::Simulator sim_;
  std::map<const kernels::BuiltOp*,
           std::pair<std::shared_ptr<const kernels::BuiltOp>, std::shared_ptr<const npu::PreparedDesign>>>
      prepared_;
  std::map<std::string, ResidentImage> resident_;
  std::set<std::string> packs_in_order_;
  bool append_only_ = false;
};

}  // namespace tessera::runtime
