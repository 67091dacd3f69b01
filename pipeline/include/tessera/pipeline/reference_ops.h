#pragma once
// The FP32 oracle op of every operator in docs/ops.md, on logical row-major
// tensors: the value a kernel's NPU result is judged against. Each case is one
// call into oracle/ops.h or rope.h (or a copy / gather), never a second
// implementation of the math.
#include <span>
#include <vector>

#include "tessera/kernels/op_builder.h"

namespace tessera::pipeline {

// inputs in docs/ops.md order; returns the single output. Throws UsageError for
// an op without a reference or inputs of the wrong size.
std::vector<float> reference_op(const kernels::OpShape& shape,
                                const std::vector<std::span<const float>>& inputs);

// Logical element counts of the op's inputs and of its output (docs/ops.md).
std::vector<int64_t> reference_input_sizes(const kernels::OpShape& shape);
int64_t reference_output_size(const kernels::OpShape& shape);

}  // namespace tessera::pipeline
