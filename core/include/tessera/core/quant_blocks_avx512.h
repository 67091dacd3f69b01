#pragma once
// One block of a ggml block format (core/quant_blocks.h) decoded into two
// 16-float AVX-512 registers, columns 0-15 and 16-31: the values
// dequantize_blocks() and decode_block_avx2() give. Include only from code
// compiled for x86-64; call only from TESSERA_AVX512_TARGET functions on a CPU
// that has them (core/avx512.h).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tessera/core/avx512.h"
#include "tessera/core/tensor.h"

namespace tessera::quant {

using simd::f32x16;
using simd::i32x16;

// The scales with F16C (exact, as f16_to_f32): a scalar conversion per scale
// was a third of the decode's instructions. q4_1's value d * q + m is one
// fused multiply-add: d * q is exact (an f16 times at most 8 bits), so
// rounding once after the add is what mul-then-add gives.
template <DType D>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void decode_block_avx512(
    const std::byte* s, f32x16& lo, f32x16& hi) {
  static_assert(D == DType::q8_0 || D == DType::q4_0 || D == DType::q4_1, "a ggml block format");
  int32_t scales;
  std::memcpy(&scales, s, sizeof scales);
  const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(scales));
  const f32x16 dv = _mm512_set1_ps(_mm_cvtss_f32(dm));
  if constexpr (D == DType::q8_0) {
    // Signed bytes by intrinsic: GCC 12 widens an int8 vector element by
    // element.
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 18));
    lo = __builtin_convertvector(i32x16(_mm512_maskz_cvtepi8_epi32(0xFFFF, q0)), f32x16) * dv;
    hi = __builtin_convertvector(i32x16(_mm512_maskz_cvtepi8_epi32(0xFFFF, q1)), f32x16) * dv;
    return;
  }
  // A nibble block has 16 distinct values: decode them once (d * q + m, or
  // d * (q - 8)) and look each nibble up, instead of converting and scaling
  // every lane. The lookup reads an index's low four bits only, so the low
  // nibbles need no mask and the high ones a shift.
  const f32x16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  f32x16 table;
  if constexpr (D == DType::q4_1)
    table = _mm512_fmadd_ps(dv, iota, _mm512_set1_ps(_mm_cvtss_f32(_mm_movehdup_ps(dm))));
  else  // (q - 8) is exact in f32, as numpy's integer subtraction
    table = dv * (iota - 8.0f);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + (D == DType::q4_1 ? 4 : 2)));
  // One widening (a shuffle) for both nibbles, the high ones by a shift of
  // the widened lanes, off the shuffle pipes: 3 % less decode time on one
  // thread, six interleaved pairs.
  const __m512i idx = _mm512_maskz_cvtepu8_epi32(0xFFFF, bytes);
  lo = _mm512_maskz_permutexvar_ps(0xFFFF, idx, table);
  hi = _mm512_maskz_permutexvar_ps(0xFFFF, _mm512_maskz_srli_epi32(0xFFFF, idx, 4), table);
}

}  // namespace tessera::quant
