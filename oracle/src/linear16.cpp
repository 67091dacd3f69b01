// linear() on weights kept in their 16-bit source dtype (ops.h): the oracle's
// memory is the mapped checkpoint, not a 4-byte copy of every parameter.
//
// Decode (one row) is a matrix-vector product whose time is one read of the
// weights, so it reads them in place: a bf16 weight is widened in a register
// (its bits shifted into an f32's high half, exact), never through a buffer.
// This file is compiled with -ffp-contract=off (CMakeLists.txt): each product
// is rounded to f32 before it is added, on every ISA, so the AVX2 and SSE2
// clones below give the same bits.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "tessera/core/bf16.h"
#include "tessera/core/bf16x16.h"
#include "tessera/core/error.h"
#include "tessera/core/quant_blocks.h"
#include "tessera/core/threads.h"
#include "tessera/oracle/ops.h"
#include "lane_fold.h"

namespace tessera::oracle {

void rows_to_f32(const Tensor& t, int64_t row0, int64_t n, float* dst) {
  TESSERA_CHECK(t.rank() == 2 && row0 >= 0 && n >= 0 && row0 + n <= t.dim(0),
                "rows [{}, {}) of a tensor of shape rank {} with {} rows", row0, row0 + n, t.rank(),
                t.rank() > 0 ? t.dim(0) : 0);
  const int64_t width = t.dim(1);
  const auto first = static_cast<size_t>(row0 * width), count = static_cast<size_t>(n * width);
  const std::span<float> out(dst, count);
  switch (t.dtype()) {
    case DType::f32:
      std::memcpy(dst, t.as<float>().data() + first, count * sizeof(float));
      break;
    case DType::bf16:
      bf16_to_f32(t.as<bf16>().subspan(first, count), out);
      break;
    case DType::f16:
      f16_to_f32(t.as<uint16_t>().subspan(first, count), out);
      break;
    case DType::q4_0:
    case DType::q4_1:
    case DType::q8_0: {
      const int64_t per_row = width / kQuantBlock;
      dequantize_blocks(t.dtype(), t.bytes() + static_cast<size_t>(row0 * per_row) * dtype_block_bytes(t.dtype()),
                        n * per_row, dst);
      break;
    }
  }
}

float dot_reference(const float* x, const float* w, int64_t in) {
  float lane[kDotLanes] = {};
  for (int64_t k = 0; k < in; ++k) {
    const float product = w[k] * x[k];
    lane[k % kDotLanes] += product;
  }
  return detail::fold_lanes(lane);
}

namespace {

static_assert(kDotLanes == 16, "the kernel below holds the 16 lanes as two 8-float vectors");
using simd::f32x2;
using simd::f32x4;
using simd::f32x8;
using u16x8 = uint16_t __attribute__((vector_size(16)));

// The 16 lanes live in two vectors, a (positions 0-7) and b (8-15). f32 rows
// keep lane c at position c. bf16 rows are widened as simd::widen16() does
// (x is permuted to match). Either way a lane holds the same columns and the
// fold adds the same pairs.
enum class Lanes { natural, interleaved };
template <Lanes L>
constexpr int position(int lane) {
  if constexpr (L == Lanes::natural) return lane;
  return simd::interleaved_position(lane);
}

// Vectors cross these helpers by reference, and the helpers are always
// inlined: a 256-bit vector passed by value is an ABI boundary between a
// default-target helper and its AVX2 caller (it crashed the unoptimized
// sanitizer build, where nothing is inlined otherwise).
[[gnu::always_inline]] inline void load16(const float* p, f32x8& a, f32x8& b) {
  std::memcpy(&a, p, sizeof a);
  std::memcpy(&b, p + 8, sizeof b);
}
[[gnu::always_inline]] inline void load16(const bf16* p, f32x8& a, f32x8& b) { simd::widen16(p, a, b); }

// dot_reference()'s fold in halves, in registers: lane c + lane c + 8, then
// c + 4, c + 2, c + 1.
template <Lanes L>
[[gnu::always_inline]] inline float fold(const f32x8& a, const f32x8& b) {
  if constexpr (L == Lanes::interleaved) return simd::fold_interleaved(a, b);
  return detail::fold_lanes(a, b);
}
inline float widen(float v) { return v; }
inline float widen(bf16 v) { return bf16_to_f32(v); }

// A row with a ragged tail: columns k.. in go to lanes 0.. first, then the fold.
template <class W>
float finish_tail(float (&lane)[kDotLanes], const float* x, const W* row, int64_t k, int64_t in) {
  for (int64_t j = 0; k + j < in; ++j) {
    const float product = widen(row[k + j]) * x[k + j];
    lane[j] += product;
  }
  return detail::fold_lanes(lane);
}

// R rows of W against xp (x with each whole 16-column group in the lanes'
// positions), each row summed exactly as dot_reference() sums it: the rows
// share the loads of x, and a row's arithmetic does not depend on R.
template <int R, Lanes L, class W>
[[gnu::always_inline]] inline void dot_rows(const float* x, const float* xp, int64_t in, const W* w,
                                            float* y) {
  // Unrolled so the accumulators live in registers, not in the arrays.
  f32x8 acc_a[R], acc_b[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc_a[r] = acc_b[r] = f32x8{};
  int64_t k = 0;
  for (; k + kDotLanes <= in; k += kDotLanes) {
    f32x8 xa, xb;
    load16(xp + k, xa, xb);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // The next R rows' same columns: short rows (576 wide) end a stream
      // before the hardware prefetcher has ramped up on it.
      __builtin_prefetch(w + (R + r) * in + k);
      f32x8 wa, wb;
      load16(w + r * in + k, wa, wb);
      acc_a[r] += wa * xa;
      acc_b[r] += wb * xb;
    }
  }
  for (int r = 0; r < R; ++r) {
    if (k == in) {
      y[r] = fold<L>(acc_a[r], acc_b[r]);
      continue;
    }
    float at[kDotLanes], lane[kDotLanes];  // a ragged tail: its products go to lanes 0.. first
    std::memcpy(at, &acc_a[r], sizeof acc_a[r]);
    std::memcpy(at + 8, &acc_b[r], sizeof acc_b[r]);
    for (int c = 0; c < kDotLanes; ++c) lane[c] = at[position<L>(c)];
    y[r] = finish_tail(lane, x, w + r * in, k, in);
  }
}

template <Lanes L, class W>
[[gnu::always_inline]] inline void gemv_range(const float* x, const float* xp, int64_t in, const W* w,
                                              int64_t rows, float* y) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) dot_rows<4, L>(x, xp, in, w + r * in, y + r);
  for (; r < rows; ++r) dot_rows<1, L>(x, xp, in, w + r * in, y + r);
}

// Lanes 4q .. 4q + 3 of a 16-column group in v[q]. 128-bit vectors: the
// unpacks that widen bf16 stay inside one register on SSE2 and AVX2 alike
// (a 256-bit unpack works per half, and SSE2 has no 256-bit registers).
struct Lanes16 {
  f32x4 v[4];
};

[[gnu::always_inline]] inline void load16(const float* p, Lanes16& l) { std::memcpy(l.v, p, sizeof l.v); }
// bf16 widened by putting its 16 bits above 16 zero bits (exact).
[[gnu::always_inline]] inline void load16(const bf16* p, Lanes16& l) {
  u16x8 h[2];
  std::memcpy(h, p, sizeof h);
  const u16x8 z{};
  for (int q = 0; q < 2; ++q) {
    const u16x8 lo = __builtin_shufflevector(z, h[q], 0, 8, 0, 9, 0, 10, 0, 11);
    const u16x8 hi = __builtin_shufflevector(z, h[q], 0, 12, 0, 13, 0, 14, 0, 15);
    std::memcpy(&l.v[2 * q], &lo, sizeof lo);
    std::memcpy(&l.v[2 * q + 1], &hi, sizeof hi);
  }
}

// fold() of four 4-float vectors.
[[gnu::always_inline]] inline float fold16(const Lanes16& l) {
  const f32x4 s4 = (l.v[0] + l.v[2]) + (l.v[1] + l.v[3]);
  const f32x2 s2 = __builtin_shufflevector(s4, s4, 0, 1) + __builtin_shufflevector(s4, s4, 2, 3);
  return s2[0] + s2[1];
}

// dot_rows() on 128-bit vectors, for CPUs without AVX2.
template <int R, class W>
[[gnu::always_inline]] inline void dot_rows_narrow(const float* x, int64_t in, const W* w, float* y) {
  // Unrolled so the accumulators live in registers, not in the arrays.
  Lanes16 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    for (auto& v : acc[r].v) v = f32x4{};
  int64_t k = 0;
  for (; k + kDotLanes <= in; k += kDotLanes) {
    Lanes16 xs;
    load16(x + k, xs);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // The next R rows' same columns: short rows (576 wide) end a stream
      // before the hardware prefetcher has ramped up on it.
      __builtin_prefetch(w + (R + r) * in + k);
      Lanes16 ws;
      load16(w + r * in + k, ws);
      for (int q = 0; q < 4; ++q) acc[r].v[q] += ws.v[q] * xs.v[q];
    }
  }
  for (int r = 0; r < R; ++r) {
    if (k == in) {
      y[r] = fold16(acc[r]);
      continue;
    }
    float lane[kDotLanes];  // a ragged tail: its products go to lanes 0.. first
    std::memcpy(lane, acc[r].v, sizeof lane);
    y[r] = finish_tail(lane, x, w + r * in, k, in);
  }
}

// Not under ThreadSanitizer, whose runtime is not up when ifunc resolvers run.
#ifndef __SANITIZE_THREAD__
[[gnu::target_clones("avx2", "default")]]
#endif
void gemv_range_f32(const float* x, int64_t in,
                                                              const float* w, int64_t rows,
                                                              float* y) {
  gemv_range<Lanes::natural>(x, x, in, w, rows, y);
}
// bf16 rows: 256-bit vectors where the CPU has AVX2. Without it the same
// code split into 128-bit halves runs at a seventh of the speed (the 256-bit
// unpacks), so those CPUs get the 128-bit kernel above: the same lanes, the
// same fold, the same bits.
[[gnu::target("avx2")]] void gemv_range_bf16_avx2(const float* x, const float* xp, int64_t in,
                                                  const bf16* w, int64_t rows, float* y) {
  gemv_range<Lanes::interleaved>(x, xp, in, w, rows, y);
}

// x with each whole group of 16 columns in the interleaved lanes' positions.
std::vector<float> interleave_x(const float* x, int64_t in) {
  std::vector<float> xp(static_cast<size_t>(in));
  int64_t k = 0;
  for (; k + kDotLanes <= in; k += kDotLanes)
    for (int c = 0; c < kDotLanes; ++c) xp[static_cast<size_t>(k + position<Lanes::interleaved>(c))] = x[k + c];
  std::copy(x + k, x + in, xp.begin() + k);
  return xp;
}

// Rows per parallel chunk: about 64 KiB of weights, so a small matrix stays on
// one thread and a big one is dealt in pieces. Which thread sums a row never
// changes its bits.
size_t chunk_rows(int64_t in, size_t elem_bytes) {
  return std::max<size_t>(4, (64u << 10) / (static_cast<size_t>(std::max<int64_t>(in, 1)) * elem_bytes));
}

void gemv_any(const float* x, int64_t in, const Tensor* w, const float* wf, int64_t out, float* y) {
  TESSERA_CHECK(in >= 0 && out >= 0, "gemv {} x {}", out, in);
  if (wf != nullptr || w->dtype() == DType::f32) {
    const float* m = wf != nullptr ? wf : w->as<float>().data();
    parallel_for(static_cast<size_t>(out), [&](size_t r0, size_t r1) {
      gemv_range_f32(x, in, m + r0 * in, static_cast<int64_t>(r1 - r0), y + r0);
    }, chunk_rows(in, 4));
    return;
  }
  if (w->dtype() == DType::bf16) {
    const bf16* m = w->as<bf16>().data();
    static const bool avx2 = __builtin_cpu_supports("avx2");
    const std::vector<float> xp = avx2 ? interleave_x(x, in) : std::vector<float>();
    parallel_for(static_cast<size_t>(out), [&](size_t r0, size_t r1) {
      const auto rows = static_cast<int64_t>(r1 - r0);
      if (avx2) gemv_range_bf16_avx2(x, xp.data(), in, m + r0 * in, rows, y + r0);
      else detail::gemv_bf16_baseline(x, in, m + r0 * in, rows, y + r0);
    }, chunk_rows(in, 2));
    return;
  }
  // A block format is summed as it is stored (gemv_blocks.cpp): memory is
  // read once, in the stored format (for Q4_1 a sixth of f32).
  if (dtype_is_block(w->dtype())) {
    const size_t row_bytes = static_cast<size_t>(in / kQuantBlock) * dtype_block_bytes(w->dtype());
    const detail::BlockKernel kernel = detail::widest_block_kernel();
    const std::vector<float> sums = detail::block_x_sums(w->dtype(), x, in);
    parallel_for(static_cast<size_t>(out), [&](size_t r0, size_t r1) {
      detail::gemv_blocks(kernel, w->dtype(), x, in, w->bytes() + r0 * row_bytes, static_cast<int64_t>(r1 - r0),
                          y + r0, sums.empty() ? nullptr : sums.data());
    }, chunk_rows(in, 1));
    return;
  }
  // f16 has no shift-only widening: decoded a few rows at a time through a
  // buffer that stays in cache.
  parallel_for(static_cast<size_t>(out), [&](size_t r0, size_t r1) {
    const size_t step = chunk_rows(in, 4);
    std::vector<float> buf(std::min(step, r1 - r0) * static_cast<size_t>(in));
    for (size_t b = r0; b < r1; b += step) {
      const int64_t n = static_cast<int64_t>(std::min(step, r1 - b));
      rows_to_f32(*w, static_cast<int64_t>(b), n, buf.data());
      gemv_range_f32(x, in, buf.data(), n, y + b);
    }
  }, chunk_rows(in, 4));
}

}  // namespace

namespace detail {
void gemv_bf16_baseline(const float* x, int64_t in, const bf16* w, int64_t rows, float* y) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) dot_rows_narrow<4>(x, in, w + r * in, y + r);
  for (; r < rows; ++r) dot_rows_narrow<1>(x, in, w + r * in, y + r);
}
}  // namespace detail

void gemv(const float* x, int64_t in, const float* w, int64_t out, float* y) {
  gemv_any(x, in, nullptr, w, out, y);
}

void linear(const float* x, int64_t rows, int64_t in, const Tensor& w, int64_t out,
            const float* bias, float* y) {
  TESSERA_CHECK(w.rank() == 2 && w.dim(0) == out && w.dim(1) == in,
                "weight of shape ({}, {}) for a linear {} -> {}", w.rank() > 0 ? w.dim(0) : 0,
                w.rank() > 1 ? w.dim(1) : 0, in, out);
  if (w.dtype() == DType::f32) return linear(x, rows, in, w.as<float>().data(), out, bias, y);
  if (rows == 1) {
    gemv_any(x, in, &w, nullptr, out, y);
  } else {
    std::vector<float> wide(static_cast<size_t>(out * in));
    parallel_for(static_cast<size_t>(out), [&](size_t r0, size_t r1) {
      rows_to_f32(w, static_cast<int64_t>(r0), static_cast<int64_t>(r1 - r0),
                  wide.data() + r0 * static_cast<size_t>(in));
    });
    linear(x, rows, in, wide.data(), out, nullptr, y);
  }
  if (bias == nullptr) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) y[r * out + o] += bias[o];
}

}  // namespace tessera::oracle
