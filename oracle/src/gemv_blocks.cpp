// The oracle's decode GEMV on block-format rows (Q4_0 / Q4_1 / Q8_0, a GGUF's
// tensors as the file holds them): block_dot_reference()'s order (ops.h) as a
// plain loop, and the AVX2 and AVX-512 kernels that give its bits.
//
// Why a block is summed factored, d * sum(q x) (+ m * sum(x) for Q4_1), and
// not as a dot product of the decoded row: decoding first costs a 16-value
// table (d * q + m) per block and a rounded product per weight, and that
// kernel was throughput-bound at about 8 GB/s of Q4_1 blocks on one Zen 4
// core (bench/oracle_bench.cpp, BM_OracleBlockGemv). Factored, the integers q
// are exact floats that need no table, and a block pays one multiply by d:
// 10-11 GB/s on the same benchmark. Both are FP32 evaluations of
// sum_j (d q_j + m) x_j; only where that sum is rounded changes (bounded in
// ops.h).
//
// This file is compiled with -ffp-contract=off (CMakeLists.txt): every fused
// multiply-add below is written out, so the loop and the kernels round at the
// same places on every compiler and ISA.
#include <cmath>
#include <cstring>
#include <vector>

#include "tessera/core/avx512.h"
#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/core/quant_blocks.h"
#include "tessera/oracle/ops.h"
#include "lane_fold.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera::oracle {

namespace {

float half_at(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}

// The 32 integers of a block as exact floats: q8_0 q, q4_0 q - 8, q4_1 q.
// Element i < 16 of a nibble block is the low nibble of byte i, 16 + i its
// high nibble.
void block_integers(DType d, const std::byte* s, float (&q)[kQuantBlock]) {
  if (d == DType::q8_0) {
    for (int i = 0; i < kQuantBlock; ++i) q[i] = static_cast<float>(static_cast<int8_t>(s[2 + i]));
    return;
  }
  const std::byte* bytes = s + (d == DType::q4_1 ? 4 : 2);
  const int bias = d == DType::q4_0 ? 8 : 0;
  for (int i = 0; i < 16; ++i) {
    const auto b = static_cast<int>(bytes[i]);
    q[i] = static_cast<float>((b & 0xF) - bias);
    q[16 + i] = static_cast<float>((b >> 4) - bias);
  }
}

// S_b = sum of x over block b, columns c and c + 16 added in lane c, folded.
std::vector<float> block_sums(const float* x, int64_t blocks) {
  std::vector<float> sums(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) {
    float lane[16];
    for (int c = 0; c < 16; ++c) lane[c] = x[b * kQuantBlock + c] + x[b * kQuantBlock + 16 + c];
    sums[static_cast<size_t>(b)] = detail::fold_lanes(lane);
  }
  return sums;
}

float sum_row(DType d, const float* x, const float* sums, const std::byte* row, int64_t blocks) {
  const size_t block_bytes = dtype_block_bytes(d);
  float acc[2][16] = {};
  float msum[2] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* s = row + static_cast<size_t>(b) * block_bytes;
    float q[kQuantBlock];
    block_integers(d, s, q);
    const float* xb = x + b * kQuantBlock;
    const float scale = half_at(s);
    for (int c = 0; c < 16; ++c) {
      const float low = q[c] * xb[c];
      const float t = std::fma(q[16 + c], xb[16 + c], low);
      acc[b % 2][c] = std::fma(scale, t, acc[b % 2][c]);
    }
    if (d == DType::q4_1) msum[b % 2] = std::fma(half_at(s + 2), sums[b], msum[b % 2]);
  }
  float lane[16];
  for (int c = 0; c < 16; ++c) lane[c] = acc[0][c] + acc[1][c];
  const float y = detail::fold_lanes(lane);
  return d == DType::q4_1 ? y + (msum[0] + msum[1]) : y;
}

#if defined(__x86_64__)
using simd::f32x16;
using simd::i32x16;
using simd::f32x8;

// The block's integers in four 8-float registers, columns 0-7 .. 24-31.
template <DType D>
[[gnu::target("avx2,fma"), gnu::always_inline]] inline void integers_avx2(const std::byte* s, __m256 (&q)[4]) {
  if constexpr (D == DType::q8_0) {
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g)
      q[g] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 2 + 8 * g))));
    return;
  }
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + (D == DType::q4_1 ? 4 : 2)));
  const __m128i nib[2] = {_mm_and_si128(bytes, low4), _mm_and_si128(_mm_srli_epi16(bytes, 4), low4)};
  const __m256i bias = _mm256_set1_epi32(D == DType::q4_0 ? 8 : 0);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    q[2 * h] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(nib[h]), bias));
    q[2 * h + 1] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(nib[h], 8)), bias));
  }
}

// One block of sum_row() onto the accumulator (lanes 0-7, 8-15) its parity
// picks.
template <DType D>
[[gnu::target("avx2,fma"), gnu::always_inline]] inline void block_avx2(const std::byte* s, const float* xb,
                                                                      __m256& acc_lo, __m256& acc_hi) {
  __m256 q[4];
  integers_avx2<D>(s, q);
  const __m256 scale = _mm256_set1_ps(half_at(s));
  const __m256 t0 = _mm256_fmadd_ps(q[2], _mm256_loadu_ps(xb + 16), _mm256_mul_ps(q[0], _mm256_loadu_ps(xb)));
  const __m256 t1 = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(xb + 24), _mm256_mul_ps(q[1], _mm256_loadu_ps(xb + 8)));
  acc_lo = _mm256_fmadd_ps(scale, t0, acc_lo);
  acc_hi = _mm256_fmadd_ps(scale, t1, acc_hi);
}

// sum_row() two blocks a step, so the accumulators stay in registers.
template <DType D>
[[gnu::target("avx2,fma")]] void gemv_range_avx2(const float* x, const float* sums, int64_t blocks,
                                                 const std::byte* w, int64_t rows, float* y) {
  const size_t block_bytes = dtype_block_bytes(D);
  for (int64_t r = 0; r < rows; ++r) {
    const std::byte* row = w + static_cast<size_t>(r) * static_cast<size_t>(blocks) * block_bytes;
    __m256 a_lo = _mm256_setzero_ps(), a_hi = a_lo, b_lo = a_lo, b_hi = a_lo;
    float msum[2] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      const std::byte* s = row + static_cast<size_t>(b) * block_bytes;
      __builtin_prefetch(s + 2048);
      if (b % 2 == 0) block_avx2<D>(s, x + b * kQuantBlock, a_lo, a_hi);
      else block_avx2<D>(s, x + b * kQuantBlock, b_lo, b_hi);
      if constexpr (D == DType::q4_1) msum[b % 2] = std::fma(half_at(s + 2), sums[b], msum[b % 2]);
    }
    f32x8 lanes[4];
    std::memcpy(&lanes[0], &a_lo, sizeof a_lo);
    std::memcpy(&lanes[1], &a_hi, sizeof a_hi);
    std::memcpy(&lanes[2], &b_lo, sizeof b_lo);
    std::memcpy(&lanes[3], &b_hi, sizeof b_hi);
    const float sum = detail::fold_lanes(lanes[0] + lanes[2], lanes[1] + lanes[3]);
    y[r] = D == DType::q4_1 ? sum + (msum[0] + msum[1]) : sum;
  }
}

// The block's integers in two 16-float registers, columns 0-15 and 16-31. A
// nibble's float is looked up in a 16-entry table (a shuffle) for the low
// nibbles and converted for the high ones, which keeps the shuffle and
// floating-point pipes about equally busy (the lookup reads the index's low
// four bits only, so the low nibbles need no mask).
template <DType D>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void integers_avx512(const std::byte* s,
                                                                                       f32x16& lo, f32x16& hi) {
  if constexpr (D == DType::q8_0) {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 18));
    lo = __builtin_convertvector(i32x16(_mm512_maskz_cvtepi8_epi32(0xFFFF, q0)), f32x16);
    hi = __builtin_convertvector(i32x16(_mm512_maskz_cvtepi8_epi32(0xFFFF, q1)), f32x16);
    return;
  }
  f32x16 table = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  if constexpr (D == DType::q4_0) table -= 8.0f;  // exact
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + (D == DType::q4_1 ? 4 : 2)));
  const __m512i idx = _mm512_maskz_cvtepu8_epi32(0xFFFF, bytes);
  lo = _mm512_maskz_permutexvar_ps(0xFFFF, idx, table);
  hi = __builtin_convertvector(i32x16(_mm512_maskz_srli_epi32(0xFFFF, idx, 4)), f32x16);
  if constexpr (D == DType::q4_0) hi -= 8.0f;
}

// One block of sum_row() onto acc, with its scale d broadcast.
template <DType D>
[[gnu::target(TESSERA_AVX512_TARGET), gnu::always_inline]] inline void block_avx512(const std::byte* s,
                                                                                    const float* xb,
                                                                                    const f32x16& d, f32x16& acc) {
  f32x16 lo, hi, x0, x1;
  integers_avx512<D>(s, lo, hi);
  std::memcpy(&x0, xb, sizeof x0);
  std::memcpy(&x1, xb + 16, sizeof x1);
  acc = _mm512_fmadd_ps(d, _mm512_fmadd_ps(hi, x1, lo * x0), acc);
}

// sum_row() two blocks a step, one per accumulator (two add chains: one was
// latency-bound), both blocks' scales from one F16C conversion.
template <DType D>
[[gnu::target(TESSERA_AVX512_TARGET)]] void gemv_range_avx512(const float* x, const float* sums, int64_t blocks,
                                                              const std::byte* w, int64_t rows, float* y) {
  constexpr size_t kBytes = D == DType::q8_0 ? 34 : D == DType::q4_1 ? 20 : 18;
  const __m512i first = _mm512_setzero_si512(), third = _mm512_set1_epi32(2);
  for (int64_t r = 0; r < rows; ++r) {
    const std::byte* row = w + static_cast<size_t>(r) * static_cast<size_t>(blocks) * kBytes;
    f32x16 acc[2] = {};
    __m128 msum = _mm_setzero_ps();  // lanes 1 and 3: msum[0] and msum[1]
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
      const std::byte* s = row + static_cast<size_t>(b) * kBytes;
      __builtin_prefetch(s + 2048);
      int32_t h0, h1;
      std::memcpy(&h0, s, 4);
      std::memcpy(&h1, s + kBytes, 4);
      // d0 m0 d1 m1 (a q4_0 / q8_0 block's second half is its first quants:
      // converted, never used)
      const __m128 dm = _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128(h0), h1, 1));
      if constexpr (D == DType::q4_1) msum = _mm_fmadd_ps(dm, _mm_set_ps(sums[b + 1], 0.0f, sums[b], 0.0f), msum);
      const __m512 dmz = _mm512_castsi512_ps(_mm512_zextsi128_si512(_mm_castps_si128(dm)));
      block_avx512<D>(s, x + b * kQuantBlock, _mm512_maskz_permutexvar_ps(0xFFFF, first, dmz), acc[0]);
      block_avx512<D>(s + kBytes, x + (b + 1) * kQuantBlock, _mm512_maskz_permutexvar_ps(0xFFFF, third, dmz),
                      acc[1]);
    }
    if (b < blocks) {  // an odd count's last block: even, so the first chain
      const std::byte* s = row + static_cast<size_t>(b) * kBytes;
      int32_t h0;
      std::memcpy(&h0, s, 4);
      const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(h0));
      if constexpr (D == DType::q4_1) msum = _mm_fmadd_ps(dm, _mm_set_ps(0.0f, 0.0f, sums[b], 0.0f), msum);
      block_avx512<D>(s, x + b * kQuantBlock, _mm512_maskz_broadcastss_ps(0xFFFF, dm), acc[0]);
    }
    const f32x16 both = acc[0] + acc[1];
    const float sum = detail::fold_lanes(__builtin_shufflevector(both, both, 0, 1, 2, 3, 4, 5, 6, 7),
                                         __builtin_shufflevector(both, both, 8, 9, 10, 11, 12, 13, 14, 15));
    if constexpr (D == DType::q4_1) {
      alignas(16) float m[4];
      _mm_store_ps(m, msum);
      y[r] = sum + (m[1] + m[3]);
    } else {
      y[r] = sum;
    }
  }
}
#endif

}  // namespace

float block_dot_reference(DType d, const float* x, const std::byte* row, int64_t in) {
  TESSERA_CHECK(dtype_is_block(d) && in % kQuantBlock == 0, "a {} row of {} columns (blocks of {})",
                dtype_name(d), in, kQuantBlock);
  const int64_t blocks = in / kQuantBlock;
  const std::vector<float> sums = block_sums(x, blocks);
  return sum_row(d, x, sums.data(), row, blocks);
}

namespace detail {

bool block_kernel_runs(BlockKernel k) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool avx512 = simd::cpu_has_avx512();
  switch (k) {
    case BlockKernel::scalar: return true;
    case BlockKernel::avx2: return avx2;
    case BlockKernel::avx512: return avx512;
  }
  return false;
#else
  return k == BlockKernel::scalar;
#endif
}

BlockKernel widest_block_kernel() {
  if (block_kernel_runs(BlockKernel::avx512)) return BlockKernel::avx512;
  return block_kernel_runs(BlockKernel::avx2) ? BlockKernel::avx2 : BlockKernel::scalar;
}

std::vector<float> block_x_sums(DType d, const float* x, int64_t in) {
  return d == DType::q4_1 ? block_sums(x, in / kQuantBlock) : std::vector<float>();
}

void gemv_blocks(BlockKernel k, DType d, const float* x, int64_t in, const std::byte* w, int64_t rows, float* y,
                 const float* x_sums) {
  TESSERA_CHECK(block_kernel_runs(k), "the {} block GEMV on a CPU without it",
                k == BlockKernel::avx512 ? "AVX-512" : "AVX2 and FMA");
  TESSERA_CHECK(dtype_is_block(d) && in % kQuantBlock == 0, "a block GEMV on {} rows of {} columns",
                dtype_name(d), in);
  const int64_t blocks = in / kQuantBlock;
  std::vector<float> own;
  if (x_sums == nullptr && d == DType::q4_1) {
    own = block_sums(x, blocks);
    x_sums = own.data();
  }
  const float* sums = x_sums;
  if (k == BlockKernel::scalar) {
    const size_t row_bytes = static_cast<size_t>(blocks) * dtype_block_bytes(d);
    for (int64_t r = 0; r < rows; ++r) y[r] = sum_row(d, x, sums, w + static_cast<size_t>(r) * row_bytes, blocks);
    return;
  }
#if defined(__x86_64__)
  auto run = [&]<DType D>() {
    if (k == BlockKernel::avx512) gemv_range_avx512<D>(x, sums, blocks, w, rows, y);
    else gemv_range_avx2<D>(x, sums, blocks, w, rows, y);
  };
  switch (d) {
    case DType::q8_0: return run.template operator()<DType::q8_0>();
    case DType::q4_0: return run.template operator()<DType::q4_0>();
    case DType::q4_1: return run.template operator()<DType::q4_1>();
    default: break;
  }
#endif
  throw_error<InternalError>("block GEMV on {}, not a block format", dtype_name(d));
}

}  // namespace detail

}  // namespace tessera::oracle
