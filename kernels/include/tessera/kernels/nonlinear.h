#pragma once
// Nonlinearities with the precision a compute tile has (DESIGN.md: "nonlinear-
// ities with the precision a tile would have").
//
// What the AIE-ML / XDNA toolchain offers (mlir-aie aie_kernels and aie_api):
//  - exp: on AIE2 a lookup-table exp of a bf16 vector (lut_based_ops getExpBf16,
//    used by the softmax kernels), on AIE2P aie::exp2 of bf16; either way the
//    operand is a bf16 vector and the result is consumed as bf16.
//    Model: exp_tile(x) = bf16( e^(bf16(x)) ), the inner e^ accurate to ~1e-6
//    relative, i.e. far below the final bf16 rounding (2^-8 relative).
//  - rsqrt / reciprocal: aie::invsqrt and aie::inv work on fp32 vectors.
//    Model: plain fp32 1/sqrt(x) and 1/x (correctly rounded fp32, so within
//    one fp32 ulp of the hardware's fp32 result; far below bf16 outputs).
//  - silu: mlir-aie builds it from a bf16 tanh LUT; we build it as
//    x * 1/(1 + exp_tile(-x)), i.e. one bf16 exp and an fp32 reciprocal, which
//    has the same bf16-level error (documented bound: see silu_tile).
// Everything here is branch-free and inlined so the host loops vectorize.
#include <bit>
#include <cmath>
#include <cstdint>

#include "tessera/core/bf16.h"

namespace tessera::kernels {

// 2^y in fp32 without libm (so loops over it vectorize). y is clamped to
// [-127, 128]: below 2^-126 the tile flushes to zero (no bf16 denormals),
// above 2^127 the result is +inf. Degree-7 Taylor polynomial of 2^f on
// f in [0, 1): truncation error (ln 2)^8 / 8! < 1.4e-6 relative.
inline float exp2_f32(float y) {
  float c = y >= -127.0f ? y : -127.0f;  // NaN takes this branch too (see return)
  c = c > 128.0f ? 128.0f : c;
  int32_t i = static_cast<int32_t>(c);  // trunc toward zero
  i -= (static_cast<float>(i) > c) ? 1 : 0;  // floor
  float f = c - static_cast<float>(i);
  constexpr float l1 = 0.6931471805599453f, l2 = 0.2402265069591007f,
                  l3 = 0.05550410866482158f, l4 = 0.009618129107628477f,
                  l5 = 0.0013333558146428443f, l6 = 1.5403530393381606e-4f,
                  l7 = 1.525273380405984e-5f;
  float p = 1.0f + f * (l1 + f * (l2 + f * (l3 + f * (l4 + f * (l5 + f * (l6 + f * l7))))));
  // 2^i by building the exponent field; i = -127 gives +0 (flush), i = 128 inf.
  float scale = std::bit_cast<float>(static_cast<uint32_t>(i + 127) << 23);
  return y == y ? p * scale : y;  // NaN in, NaN out: never silently a number
}

// e^x as a tile computes it: bf16 operand, bf16 result. exp_tile(-inf) = 0.
inline float exp_tile(float x) {
  constexpr float kLog2e = 1.4426950408889634f;
  return round_bf16(exp2_f32(round_bf16(x) * kLog2e));
}

// fp32 reciprocal and inverse square root (aie::inv, aie::invsqrt).
inline float recip_tile(float x) { return 1.0f / x; }
inline float rsqrt_tile(float x) { return 1.0f / std::sqrt(x); }

// silu(x) = x * sigmoid(x), sigmoid from exp_tile and recip_tile, in fp32 (the
// caller rounds the final product to bf16). With s = sigmoid(x) and u = 2^-8
// the bf16 unit roundoff: the bf16 result of exp changes sigmoid by at most
// u (1 - s) relative; a non-bf16 x adds |x| u (1 - s) through the operand
// rounding (kernels pass bf16 activations, so that term is zero there).
inline float silu_tile(float x) { return x * recip_tile(1.0f + exp_tile(-x)); }

}  // namespace tessera::kernels
