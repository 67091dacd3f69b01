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
// Attention's online softmax (kernels/flash_attention.h) rounds every block's
// weights and rescale factors to bf16, so its result depends on where the
// blocks begin: that order is part of its semantics (AttnSchedule, read from
// the design's plan, never from its output). Within it the reference follows
// every rounding the rules name; the freedoms left (the fp32 order of the
// score, weight and output sums, the exp polynomial, an fp32 rounding) are
// intervals, and a weight whose bf16 rounding they make ambiguous carries both
// candidates. A running sum kept in bf16, a scale off by 1 % or a key the
// mask or the sum drops then leaves elements outside.
//
// Ops without a reference here (the adds, kv_append and embedding, which are
// bit-exact already: NoiseModel) return nullopt.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tessera/kernels/op_builder.h"

namespace tessera::pipeline {

// The documented block order of an attention design (kernels/builders/
// attention.h): each query row's visible keys in blocks of `block` from key 0,
// folded by the online softmax into one running state; with `chain` > 0 every
// run of `chain` consecutive blocks has its own state (decode: one per tile),
// and the states are merged in key order into an empty one before finalize;
// with `cascade` the chains fold from the last to the first instead (prefill's
// cascade of cores: stage s merges stage s + 1's state into its own, so the
// result is s0 (+) (s1 (+) (s2 (+) s3))), which rounds differently.
struct AttnSchedule {
  int64_t block = 0;
  int64_t chain = 0;
  bool cascade = false;
};

struct Bf16Bounds {
  std::vector<float> lo, hi;  // accepted bf16 values: lo[i] <= got[i] <= hi[i]
};

// inputs in docs/ops.md order, bf16-exact activations and weights (as phase 1
// feeds the kernel); UsageError for inputs of the wrong size, or for an
// attention op without its schedule (block < 1).
std::optional<Bf16Bounds> bf16_reference(const kernels::OpShape& shape,
                                         const std::vector<std::span<const float>>& inputs,
                                         const AttnSchedule& attention = {});

// Elements of `got` outside the bounds (NaN counts), and the first of them (-1: none).
struct Bf16Verdict {
  int64_t outside = 0;
  int64_t first = -1;
};
Bf16Verdict bf16_outside(const Bf16Bounds& b, std::span<const float> got);

}  // namespace tessera::pipeline
