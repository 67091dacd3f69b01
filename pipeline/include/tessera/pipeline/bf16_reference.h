#pragma once
// BF16-exact reference per op (issue 12): an independent scalar statement of
// each op's documented BF16 semantics (docs/ops.md, kernels/nonlinear.h: bf16
// operands, exact bf16 x bf16 products, fp32 accumulation, the nonlinearity
// approximations, one RNE rounding of every output), computed here in double
// precision, never by calling the kernels' code. Where the semantics leave
// freedom - the fp32 accumulation order of a reduction, the last bits of an
// fp32 reciprocal or of the polynomial exp - the reference carries an
// interval: the exact result +- delta, delta derived from that freedom before
// the run. The NPU's bf16 output must lie in [RNE(lo), RNE(hi)], which is a
// single bf16 value for all but the elements whose exact result lies within
// delta of a rounding midpoint. Any other difference is a kernel bug, seen as
// a disagreement, not as noise: a truncating rounding, a 2 % slope or a wrong
// epsilon leaves hundreds of elements outside.
//
// Ops without a reference here (attention, whose blocked online softmax
// leaves more freedom; the adds, kv_append and embedding, which are
// bit-exact already: NoiseModel) return nullopt.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tessera/kernels/op_builder.h"

namespace tessera::pipeline {

struct Bf16Bounds {
  std::vector<float> lo, hi;  // accepted bf16 values: lo[i] <= got[i] <= hi[i]
};

// inputs in docs/ops.md order, bf16-exact activations and weights (as phase 1
// feeds the kernel); UsageError for inputs of the wrong size.
std::optional<Bf16Bounds> bf16_reference(const kernels::OpShape& shape,
                                         const std::vector<std::span<const float>>& inputs);

// Elements of `got` outside the bounds (NaN counts), and the first of them (-1: none).
struct Bf16Verdict {
  int64_t outside = 0;
  int64_t first = -1;
};
Bf16Verdict bf16_outside(const Bf16Bounds& b, std::span<const float> got);

}  // namespace tessera::pipeline
