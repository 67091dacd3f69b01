#pragma once
// The predicted time of a plan as the fuse pass would leave it, for the
// passes that run before fuse and judge each trial rewrite by it (an aligned
// edge that lets two dispatches merge saves a dispatch overhead its own step
// times do not show).
//
// fused_seconds() states the figure: fuse a copy of the plan, recompute its
// costs (update_costs), sum its steps. It copies the whole plan and rebuilds
// its value maps, so a pass that calls it once per candidate edge pays the
// plan's size squared; that was most of a decode plan's lowering, which a
// session repeats at every bucket of cache lengths (issue 16).
//
// FusedCost gives the same figure, bit for bit: it indexes who produces and
// who reads each value once, then walks the launches as they are now (their
// tiles, designs, timings and layout keys may change between calls), forming
// the dispatches pass_fuse would form and charging each what update_costs
// would, in the same order of floating-point operations.
//
// Incrementally: a dispatch never spans two layers, so the launches fall into
// segments (runs of steps of one layer) whose dispatches and costs depend only
// on their own launches, the producers of what they read and the readers of
// what they write. seconds() keeps each segment's dispatch costs and redoes
// only the segments a changed launch touches, then adds every dispatch's cost
// in plan order as before. A launch counts as changed when its design (op),
// timing or host cost differs from the last call; a launch's layout keys are
// a function of its design (build_launch), so a rebuild or a restored copy is
// seen. A layout key edited by hand under the same design is not: announce it
// with touched().
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "tessera/compiler/plan.h"

namespace tessera::compiler {

// Predicted seconds of `plan` once fused (a trial on a copy; plan is left as
// it is).
double fused_seconds(const Plan& plan, DesignCache& cache);

// Not thread safe: seconds() updates the kept segment costs.
class FusedCost {
 public:
  // Indexes `plan`, which must outlive this object and keep its steps and
  // launches where they are (a launch may be rebuilt in place; none added,
  // removed or moved) and its graph unchanged.
  explicit FusedCost(const Plan& plan);
  // == fused_seconds(plan, cache) for the plan as it is now.
  double seconds(const npu::DeviceSpec& spec) const;
  // `l` (a launch of the plan) changed in a way its design, timing and host
  // cost do not show (a layout key set by hand): the next seconds() redoes
  // the segments it touches.
  void touched(const Launch& l) const;

 private:
  struct Input {
    size_t producer;  // launch index, or kNone (a host input, a weight)
    const ValueRef* ref;
    std::string ref_text;  // ref->str(): a dispatch packs each (ref, layout) once
  };
  struct Reader {
    size_t launch;
    size_t input;
    bool last_row;
  };
  // What seconds() last saw of a launch; the design is held so its address
  // cannot be reused by another design while it is compared.
  struct Seen {
    std::shared_ptr<const kernels::BuiltOp> op;
    double total = 0, overhead = 0, host = 0;
  };
  static constexpr size_t kNone = static_cast<size_t>(-1);

  double step_seconds(size_t first, size_t end, const npu::DeviceSpec& spec) const;
  int64_t relayout_bytes(size_t first, size_t end) const;
  bool fusable(size_t step) const;
  void cost_segment(size_t seg, const npu::DeviceSpec& spec) const;
  bool changed(size_t launch) const;

  const Plan& plan_;
  std::vector<const Launch*> launches_;      // plan order
  std::vector<size_t> step_of_;              // per launch: its step
  std::vector<bool> host_;                   // per launch: on a host step
  std::vector<int> layer_;                   // per launch: its node's layer
  std::vector<std::vector<Input>> inputs_;   // per launch, per node input
  std::vector<std::vector<Reader>> readers_; // per launch: who reads its value
  std::unordered_map<const Launch*, size_t> index_;  // launch -> index
  std::vector<size_t> seg_first_;            // per segment: its first launch (then launches_.size())
  std::vector<std::vector<size_t>> affects_; // per launch: the segments its change touches

  // Kept between calls (seconds() is const to its callers: the figure is a
  // function of the plan alone).
  mutable const npu::DeviceSpec* spec_ = nullptr;  // the spec the kept costs were made for
  mutable std::vector<Seen> seen_;                 // per launch
  mutable std::vector<char> dirty_;                // per segment
  mutable std::vector<std::vector<double>> costs_; // per segment: its dispatches' seconds, in order
};

}  // namespace tessera::compiler
