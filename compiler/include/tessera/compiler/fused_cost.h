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
#include <cstddef>
#include <vector>

#include "tessera/compiler/plan.h"

namespace tessera::compiler {

// Predicted seconds of `plan` once fused (a trial on a copy; plan is left as
// it is).
double fused_seconds(const Plan& plan, DesignCache& cache);

class FusedCost {
 public:
  // Indexes `plan`, which must outlive this object and keep its steps and
  // launches where they are (a launch may be rebuilt in place; none added,
  // removed or moved) and its graph unchanged.
  explicit FusedCost(const Plan& plan);
  // == fused_seconds(plan, cache) for the plan as it is now.
  double seconds(const npu::DeviceSpec& spec) const;

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
  static constexpr size_t kNone = static_cast<size_t>(-1);

  double step_seconds(size_t first, size_t end, const npu::DeviceSpec& spec) const;
  int64_t relayout_bytes(size_t first, size_t end) const;

  const Plan& plan_;
  std::vector<const Launch*> launches_;      // plan order
  std::vector<size_t> step_of_;              // per launch: its step
  std::vector<bool> host_;                   // per launch: on a host step
  std::vector<int> layer_;                   // per launch: its node's layer
  std::vector<std::vector<Input>> inputs_;   // per launch, per node input
  std::vector<std::vector<Reader>> readers_; // per launch: who reads its value
};

}  // namespace tessera::compiler
