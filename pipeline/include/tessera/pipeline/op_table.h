#pragma once
// One table of operators (pipeline side): each op the graph emits is defined
// once, in pipeline/src/op_table.cpp, with everything the gates need of it:
// its logical input and output sizes (docs/ops.md order), the FP32 oracle op
// its NPU result is judged against, and its phase-1 threshold row with the
// reason for each number. reference_ops.h and thresholds.h read this table;
// adding an op to the gates is adding one row here.
//
// Not here (other layers, which pipeline/ sits above): the design builder and
// its tunable tile keys and candidates (kernels/op_builder.h,
// OpBuilder::tile_candidates, which tune-tiles searches), the host
// implementation of the data-movement ops (runtime/executor.cpp) and their
// host cost (compiler/passes.cpp).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/kernels/op_builder.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline {

struct OpSizes {
  std::vector<int64_t> in;  // logical element counts, docs/ops.md order
  int64_t out = 0;
};
using OpInputs = std::vector<std::span<const float>>;

struct OpDef {
  Threshold threshold;  // the phase-1 row; threshold.op names the op
  OpSizes (*sizes)(const kernels::OpShape& s);
  // The oracle's value of the single output; inputs already size-checked.
  std::vector<float> (*reference)(const kernels::OpShape& s, const OpInputs& in);
  // Shape-dependent terms added to the row (null: none).
  void (*shape_terms)(const kernels::OpShape& s, Threshold& t) = nullptr;
  const std::string& op() const { return threshold.op; }
};

// Every op, in the order the threshold table is reported.
const std::vector<OpDef>& op_table();
// The row of `op`, nullptr when the table has none.
const OpDef* find_op(const std::string& op);

}  // namespace tessera::pipeline
