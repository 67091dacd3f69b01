#pragma once
// 16 bf16 values widened to f32 in two 8-float vectors, and the fixed fold of
// 16 lane sums, for the hand-vectorized dot products of the oracle's decode
// GEMV (oracle/src/linear16.cpp) and the simulator's GEMV tile kernel
// (kernels/src/gemv_rows.cpp). Both sum 16 lanes and fold them in halves
// (lane c += lane c + 8, then + 4, + 2, + 1); these helpers keep that order.
//
// Widening puts each 16-bit value above 16 zero bits (exact), which an AVX2
// unpack does per 128-bit half: `a` gets lanes 0-3 and 8-11, `b` lanes 4-7
// and 12-15. fold_interleaved() adds the same pairs as the plain fold.
//
// Vectors cross these helpers by reference and the helpers are always
// inlined: a 256-bit vector passed by value between a default-target helper
// and its AVX2 caller is an ABI mismatch (it crashed the unoptimized
// sanitizer build). Call them from AVX2 code.
#include <cstdint>
#include <cstring>

#include "tessera/core/bf16.h"

namespace tessera::simd {

using f32x8 = float __attribute__((vector_size(32)));
using f32x4 = float __attribute__((vector_size(16)));
using f32x2 = float __attribute__((vector_size(8)));
using u16x16 = uint16_t __attribute__((vector_size(32)));

// Lane position of column c of a 16-column group after widen16().
constexpr int interleaved_position(int c) { return c < 4 ? c : c < 8 ? c + 4 : c < 12 ? c - 4 : c; }

[[gnu::always_inline]] inline void widen16(const bf16* p, f32x8& a, f32x8& b) {
  u16x16 v;
  std::memcpy(&v, p, sizeof v);
  const u16x16 z{};
  const u16x16 lo = __builtin_shufflevector(z, v, 0, 16, 0, 17, 0, 18, 0, 19, 0, 24, 0, 25, 0, 26, 0, 27);
  const u16x16 hi = __builtin_shufflevector(z, v, 0, 20, 0, 21, 0, 22, 0, 23, 0, 28, 0, 29, 0, 30, 0, 31);
  std::memcpy(&a, &lo, sizeof a);
  std::memcpy(&b, &hi, sizeof b);
}

// The fold in halves of lanes held as widen16() places them.
[[gnu::always_inline]] inline float fold_interleaved(const f32x8& a, const f32x8& b) {
  const f32x4 s03 = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  const f32x4 s47 = __builtin_shufflevector(b, b, 0, 1, 2, 3) + __builtin_shufflevector(b, b, 4, 5, 6, 7);
  const f32x4 s4 = s03 + s47;
  const f32x2 s2 = __builtin_shufflevector(s4, s4, 0, 1) + __builtin_shufflevector(s4, s4, 2, 3);
  return s2[0] + s2[1];
}

}  // namespace tessera::simd
