#pragma once
// The AVX-512 subset tessera's host kernels use (Skylake-X, Ice Lake, Zen 4
// and later all have it), for functions compiled with
// [[gnu::target(TESSERA_AVX512_TARGET)]] and called only where
// cpu_has_avx512() holds. Kernels keep an AVX2 path with the same bits.
//
// GCC's vector types where they compile well, and the masked ("maskz")
// intrinsics elsewhere: GCC 12's unmasked AVX-512 intrinsics start from an
// "undefined" register that -Wmaybe-uninitialized flags.
#include <cstdint>

#define TESSERA_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma,avx2"

namespace tessera::simd {

using f32x16 = float __attribute__((vector_size(64)));
using i32x16 = int32_t __attribute__((vector_size(64)));

inline bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace tessera::simd
