// gemv_block's rows on AVX2, widening bf16 weights and x in registers.
//
// A decode token makes millions of GEMV calls of a few short rows each (2 x
// 256 and 4 x 128 are what the tile search picks), so the generic path's
// conversion of x into an f32 scratch row per call cost about as much as the
// rows' products. Here x and w are both widened by the same AVX2 unpack, so a
// lane holds the same columns of each and their products line up; the lanes
// are permuted (a: lanes 0-3 and 8-11, b: 4-7 and 12-15), and the fold adds
// the same pairs as vec_ops.h's dot(). Built with -ffp-contract=off: every
// product is rounded to f32 before it is added, as in dot().
#include "tessera/kernels/gemv.h"

#include "tessera/core/bf16x16.h"

namespace tessera::kernels::detail {
namespace {

using simd::f32x8;

constexpr int kLanes = 16;  // vec_ops.h's kLanes: dot() keeps 16 partial sums

// R rows against x, sharing each widened group of x; a row's arithmetic does
// not depend on R. The ragged tail is its own running sum, added last, as in
// dot().
// `ahead` (KernelInvocation::ahead: bytes the next call reads; to L1) and
// `far` (a call further on; to L2) are prefetched a line per step per two
// rows, which keeps pace with the R * 32 bytes of w a step reads: a steady
// lead, where a burst of a whole call's lines before the call held the
// core's miss buffers while it computed nothing (a 30 KB LM-head call).
// Returns where the L1 prefetch stopped; `far` is advanced in place.
template <int R>
[[gnu::always_inline]] inline const char* rows(const bf16* w, const bf16* x, float* acc, int64_t k, bool accumulate,
                                               const char* ahead, const char* ahead_end, const char*& far,
                                               const char* far_end) {
  f32x8 pa[R], pb[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) pa[r] = pb[r] = f32x8{};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes) {
    f32x8 xa, xb;
    simd::widen16(x + i, xa, xb);
    if (ahead < ahead_end) {
      __builtin_prefetch(ahead, 0, 3);
      if constexpr (R > 2) __builtin_prefetch(ahead + 64, 0, 3);
      ahead += (R + 1) / 2 * 64;
    }
    if (far < far_end) {
      __builtin_prefetch(far, 0, 2);
      if constexpr (R > 2) __builtin_prefetch(far + 64, 0, 2);
      far += (R + 1) / 2 * 64;
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      f32x8 wa, wb;
      simd::widen16(w + r * k + i, wa, wb);
      pa[r] += wa * xa;
      pb[r] += wb * xb;
    }
  }
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;
    for (int64_t t = i; t < k; ++t) tail += bf16_to_f32(w[r * k + t]) * bf16_to_f32(x[t]);
    const float s = simd::fold_interleaved(pa[r], pb[r]) + tail;
    acc[r] = accumulate ? acc[r] + s : s;
  }
  return ahead;
}

}  // namespace

[[gnu::target("avx2")]] void gemv_block_avx2(const bf16* w, const bf16* x, float* acc, int64_t n, int64_t k,
                                             bool accumulate, std::span<const std::byte> ahead,
                                             std::span<const std::byte> ahead_far) {
  const char* pf = reinterpret_cast<const char*>(ahead.data());
  const char* pf_end = pf + ahead.size();
  const char* far = reinterpret_cast<const char*>(ahead_far.data());
  const char* far_end = far + ahead_far.size();
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) pf = rows<4>(w + j * k, x, acc + j, k, accumulate, pf, pf_end, far, far_end);
  if (j + 2 <= n) {
    pf = rows<2>(w + j * k, x, acc + j, k, accumulate, pf, pf_end, far, far_end);
    j += 2;
  }
  if (j < n) pf = rows<1>(w + j * k, x, acc + j, k, accumulate, pf, pf_end, far, far_end);
  // The rest, if the rows ended first (asm: GCC 12 at -O2 drops a loop of
  // nothing but __builtin_prefetch, -ffinite-loops).
  for (; pf < pf_end; pf += 64) asm volatile("prefetcht0 %0" : : "m"(*pf));
  for (; far < far_end; far += 64) asm volatile("prefetcht1 %0" : : "m"(*far));
}

}  // namespace tessera::kernels::detail
