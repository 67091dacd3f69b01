#pragma once
// Shared ground of the BF16-exact reference (bf16_reference.cpp, the linear /
// norm / rope / silu ops; bf16_reference_attention.cpp): the freedoms the
// documented rules leave, as intervals in double precision.
#include <cstdint>

#include "tessera/pipeline/bf16_reference.h"

namespace tessera::pipeline::bf16ref {

inline constexpr double kU32 = 1.0 / 16777216.0;  // 2^-24, the fp32 unit roundoff

// delta / A of a reduction over k terms of one fp32 accumulator, any order.
double reduction_delta(int64_t k);

// An exact result known to lie in [lo, hi].
struct Interval {
  double lo = 0, hi = 0;
};

// Every bf16 value exp_tile (kernels/nonlinear.h) may return for an fp32
// operand in x: the operand rounded to bf16 (RNE, monotone, so the ends
// bound it), e^ of it from the fp32 polynomial to 1.4e-6 + 10 u32 + 3 |x| u32
// relative, flushed to 0 below 2^-126, rounded to bf16. -inf gives 0.
Interval exp_tile_bounds(Interval x);

// Accepted bf16 outputs for an exact result in [lo, hi] (one RNE).
void put(Bf16Bounds& b, size_t i, double lo, double hi);
Bf16Bounds sized(size_t n);

// Attention (bf16_reference_attention.cpp); in: q, k, v in docs/ops.md order.
Bf16Bounds attention(const kernels::OpShape& s, std::span<const float> q, std::span<const float> k,
                     std::span<const float> v, const AttnSchedule& sched);

}  // namespace tessera::pipeline::bf16ref
