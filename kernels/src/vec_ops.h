#pragma once
// Inner loops shared by the kernel bodies, written so GCC vectorizes them
// without -ffast-math: a dot product keeps kLanes independent partial sums (the
// way a vector unit accumulates lane-wise) and folds them in a fixed tree, so
// the summation order, hence the result, is deterministic.
#include <cstdint>

#include "tessera/core/bf16.h"

namespace tessera::kernels {

inline constexpr int kLanes = 16;

// Hot kernel loops compiled twice, for the baseline x86-64 (SSE2) and for
// AVX2, picked at load time. AVX2 without FMA: the same lane-wise multiplies
// and adds in the same order, only 8 lanes per instruction instead of 4, so
// results are bit-identical to the baseline build.
// Not under ThreadSanitizer: the clones' ifunc resolvers run before its
// runtime is up, and the program dies before main.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TESSERA_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TESSERA_VECTOR_CLONES
#endif

// Sum of a[i] * b[i]; A is float or bf16 (converted on load).
template <class A>
inline float dot(const A* __restrict a, const float* __restrict b, int64_t n) {
  float part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      float av;
      if constexpr (sizeof(A) == 2) {
        av = bf16_to_f32(a[i + l]);
      } else {
        av = a[i + l];
      }
      part[l] += av * b[i + l];
    }
  }
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int l = 0; l < w; ++l) part[l] += part[l + w];
  }
  float tail = 0.0f;
  for (; i < n; ++i) {
    if constexpr (sizeof(A) == 2) {
      tail += bf16_to_f32(a[i]) * b[i];
    } else {
      tail += a[i] * b[i];
    }
  }
  return part[0] + tail;
}

// A dot product whose running sum is a bf16 register (the gemv_bf16_accum
// mutant, core/mutants.h): each partial sum rounded to bf16.
inline float dot_bf16_accum(const bf16* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s = round_bf16(s + bf16_to_f32(a[i]) * b[i]);
  return s;
}

// y[i] += s * x[i]
inline void axpy(float s, const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += s * x[i];
}

}  // namespace tessera::kernels
