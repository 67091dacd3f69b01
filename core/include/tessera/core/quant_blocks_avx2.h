#pragma once
// One block of a ggml block format (core/quant_blocks.h) decoded into four
// 8-float AVX2 registers, columns 0-7, 8-15, 16-23, 24-31: the values
// dequantize_blocks() writes, for kernels that use them in registers (the
// oracle's decode GEMV) instead of through memory. Include only from code
// compiled for x86-64; call only from [[gnu::target("avx2")]] functions on a
// CPU that has AVX2.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tessera/core/bf16.h"
#include "tessera/core/tensor.h"

namespace tessera::quant {

[[gnu::always_inline]] inline float half_at(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}

// q8_0 q * d; q4_0 d * (q - 8) (the subtraction in integers, as numpy's);
// q4_1 d * q + m. Nibbles: element i < 16 the low nibble of byte i, 16 + i
// its high nibble. d * q is exact (an f16 times at most 8 bits), so each
// value rounds once.
[[gnu::target("avx2"), gnu::always_inline]] inline void decode_block_avx2(DType d, const std::byte* s,
                                                                         __m256 (&out)[4]) {
  const __m256 dv = _mm256_set1_ps(half_at(s));
  if (d == DType::q8_0) {
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 2 + 8 * g));
      out[g] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), dv);
    }
    return;
  }
  const bool q41 = d == DType::q4_1;
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + (q41 ? 4 : 2)));
  const __m128i nib[2] = {_mm_and_si128(bytes, low4), _mm_and_si128(_mm_srli_epi16(bytes, 4), low4)};
  const __m256 mv = _mm256_set1_ps(q41 ? half_at(s + 2) : 0.0f);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      const __m256i q = _mm256_cvtepu8_epi32(g == 0 ? nib[h] : _mm_srli_si128(nib[h], 8));
      out[2 * h + g] = q41 ? _mm256_add_ps(_mm256_mul_ps(dv, _mm256_cvtepi32_ps(q)), mv)
                           : _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(8))));
    }
}

}  // namespace tessera::quant
