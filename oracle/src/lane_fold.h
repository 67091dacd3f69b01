#pragma once
// dot_reference()'s fold of its 16 partial sums (ops.h), shared by the decode
// GEMVs on f32 / bf16 rows (linear16.cpp) and on block rows (gemv_blocks.cpp):
// lane c += lane c + 8, then + 4, + 2, + 1.
#include "tessera/core/bf16x16.h"

namespace tessera::oracle::detail {

inline float fold_lanes(float (&lane)[16]) {
  for (int half = 8; half > 0; half /= 2)
    for (int j = 0; j < half; ++j) lane[j] += lane[j + half];
  return lane[0];
}

// The same fold in registers, lanes 0-7 in a and 8-15 in b.
[[gnu::always_inline]] inline float fold_lanes(const simd::f32x8& a, const simd::f32x8& b) {
  const simd::f32x8 s8 = a + b;
  const simd::f32x4 s4 =
      __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
  const simd::f32x2 s2 = __builtin_shufflevector(s4, s4, 0, 1) + __builtin_shufflevector(s4, s4, 2, 3);
  return s2[0] + s2[1];
}

}  // namespace tessera::oracle::detail
