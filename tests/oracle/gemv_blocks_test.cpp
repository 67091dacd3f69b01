// The oracle's decode GEMV on block-format rows (a GGUF's Q4_0 / Q4_1 / Q8_0
// tensors as stored), against block_dot_reference() bit for bit on every
// kernel this CPU runs, and against a double-precision sum of the decoded
// weights within the rounding bound ops.h derives for that order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/bf16.h"
#include "tessera/core/quant_blocks.h"
#include "tessera/oracle/ops.h"

namespace tessera::oracle {
namespace {

// Random quants with finite scales (random bits may be NaN), d in
// [0.001, 0.1) and m in [-0.5, 0.5) as a GGUF's blocks have.
Tensor random_blocks(DType dtype, int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor w(dtype, {out, in});
  const size_t block = dtype_block_bytes(dtype);
  std::byte* p = w.mutable_bytes();
  for (size_t b = 0; b < w.nbytes() / block; ++b) {
    for (size_t i = 0; i < block; ++i) p[b * block + i] = static_cast<std::byte>(rng() & 0xFF);
    const uint16_t d = f32_to_f16(0.001f + static_cast<float>(rng() % 1000) * 1e-4f);
    std::memcpy(p + b * block, &d, 2);
    const uint16_t m = f32_to_f16(-0.5f + static_cast<float>(rng() % 1000) * 1e-3f);
    if (dtype == DType::q4_1) std::memcpy(p + b * block + 2, &m, 2);
  }
  return w;
}

// x of mixed magnitudes (2^-6 .. 2^6), so that the order of a sum shows in
// its bits.
std::vector<float> random_x(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x)
    v = std::ldexp(static_cast<float>(g()) / 4294967296.0f * 2.0f - 1.0f, static_cast<int>(g() % 13) - 6);
  return x;
}

struct Exact {
  double sum = 0.0;    // sum_j w_j x_j, w_j = d q_j + m exactly
  double scale = 0.0;  // sum_j |d q_j x_j| + sum_b |m_b| sum_j |x_j|: what the bound multiplies
};

// One row in double. At random_blocks()' scales d q + m spans 2^-1 to 2^-20
// (about 21 significant bits), so every product d q x and (d q + m) x is
// exact in double, and the sums' own rounding is 2^-29 of f32's.
Exact exact_row(DType dtype, const std::byte* row, const float* x, int64_t in) {
  const size_t block = dtype_block_bytes(dtype);
  Exact e;
  for (int64_t b = 0; b < in / kQuantBlock; ++b) {
    const std::byte* s = row + static_cast<size_t>(b) * block;
    uint16_t h[2] = {};
    std::memcpy(&h[0], s, 2);
    if (dtype == DType::q4_1) std::memcpy(&h[1], s + 2, 2);
    const double d = f16_to_f32(h[0]), m = dtype == DType::q4_1 ? f16_to_f32(h[1]) : 0.0;
    double abs_x = 0.0;
    for (int j = 0; j < kQuantBlock; ++j) {
      int q = 0;
      if (dtype == DType::q8_0) {
        q = static_cast<int8_t>(s[2 + j]);
      } else {
        const auto byte = static_cast<int>(s[(dtype == DType::q4_1 ? 4 : 2) + j % 16]);
        q = (j < 16 ? byte & 0xF : byte >> 4) - (dtype == DType::q4_0 ? 8 : 0);
      }
      const double xv = x[b * kQuantBlock + j];
      e.sum += (d * q + m) * xv;
      e.scale += std::abs(d * q * xv);
      abs_x += std::abs(xv);
    }
    e.scale += std::abs(m) * abs_x;
  }
  return e;
}

constexpr DType kFormats[] = {DType::q4_0, DType::q4_1, DType::q8_0};
constexpr int64_t kWidths[] = {32, 96, 160, 576, 1536};  // 1, 3, 5, 18, 48 blocks (odd counts end unpaired)
constexpr int64_t kOuts[] = {1, 3, 5, 37, 130};

// linear() of one row, and every block kernel this CPU runs, give
// block_dot_reference()'s bits on every row. The comparison can fail: the
// dot product of the decoded rows, the order these kernels used before, gives
// other bits on some rows (checked below).
TEST(BlockGemv, EveryKernelGivesTheReferenceBits) {
  bool decoded_differs = false;
  uint32_t seed = 1;
  for (const DType dtype : kFormats)
    for (const int64_t in : kWidths)
      for (const int64_t out : kOuts) {
        const Tensor w = random_blocks(dtype, out, in, ++seed);
        const std::vector<float> x = random_x(in, ++seed), wide = w.to_f32_vector();
        const size_t row_bytes = static_cast<size_t>(in / kQuantBlock) * dtype_block_bytes(dtype);
        std::vector<float> want(static_cast<size_t>(out)), got(want.size());
        for (int64_t o = 0; o < out; ++o) {
          want[static_cast<size_t>(o)] = block_dot_reference(dtype, x.data(), w.bytes() + o * row_bytes, in);
          decoded_differs = decoded_differs ||
                            dot_reference(x.data(), wide.data() + o * in, in) != want[static_cast<size_t>(o)];
        }
        linear(x.data(), 1, in, w, out, nullptr, got.data());
        EXPECT_EQ(got, want) << dtype_name(dtype) << " in " << in << " out " << out;
        for (const auto k : {detail::BlockKernel::scalar, detail::BlockKernel::avx2, detail::BlockKernel::avx512}) {
          if (!detail::block_kernel_runs(k)) continue;
          std::vector<float> direct(want.size());
          detail::gemv_blocks(k, dtype, x.data(), in, w.bytes(), out, direct.data());
          EXPECT_EQ(direct, want) << dtype_name(dtype) << " kernel " << static_cast<int>(k) << " in " << in
                                  << " out " << out;
        }
      }
  EXPECT_TRUE(decoded_differs) << "the decoded rows' dot product matched every row: the test cannot see the order";
}

// Every row within ops.h's bound of the exact sum, a bound fixed by the
// block count alone before the run. The bound is tight enough to matter: it
// is under 1e-5 of a row's scale (asserted), so a relative error of 1e-4 in
// the kernel fails it (seen), and a row that drops its blocks' m falls
// outside it (the next test).
TEST(BlockGemv, WithinTheRoundingBoundOfTheExactSum) {
  uint32_t seed = 100;
  for (const DType dtype : kFormats)
    for (const int64_t in : kWidths) {
      const int64_t out = 130;
      const Tensor w = random_blocks(dtype, out, in, ++seed);
      const std::vector<float> x = random_x(in, ++seed);
      std::vector<float> y(static_cast<size_t>(out));
      linear(x.data(), 1, in, w, out, nullptr, y.data());
      const double n = static_cast<double>((in / kQuantBlock + 1) / 2 + 8), u = std::ldexp(1.0, -24);
      const double gamma = n * u / (1.0 - n * u);
      ASSERT_LT(gamma, 1e-5);
      const size_t row_bytes = static_cast<size_t>(in / kQuantBlock) * dtype_block_bytes(dtype);
      for (int64_t o = 0; o < out; ++o) {
        const Exact e = exact_row(dtype, w.bytes() + o * row_bytes, x.data(), in);
        const double err = std::abs(static_cast<double>(y[static_cast<size_t>(o)]) - e.sum);
        EXPECT_LE(err, gamma * e.scale) << dtype_name(dtype) << " in " << in << " row " << o;
      }
    }
}

// A Q4_1 row whose m terms are dropped is far outside the bound: the bound's
// scale counts them, and a row's m * sum(x) is not small against it.
TEST(BlockGemv, TheBoundSeesADroppedMinimum) {
  const int64_t in = 576, out = 37;
  const Tensor w = random_blocks(DType::q4_1, out, in, 7);
  const std::vector<float> x = random_x(in, 8);
  const size_t row_bytes = static_cast<size_t>(in / kQuantBlock) * dtype_block_bytes(DType::q4_1);
  Tensor no_min(DType::q4_1, {out, in});
  std::byte* p = no_min.mutable_bytes();
  std::memcpy(p, w.bytes(), w.nbytes());
  for (size_t b = 0; b < no_min.nbytes() / 20; ++b) std::memset(p + b * 20 + 2, 0, 2);
  const double gamma = 17 * std::ldexp(1.0, -24) / (1 - 17 * std::ldexp(1.0, -24));
  int outside = 0;
  for (int64_t o = 0; o < out; ++o) {
    const float y = block_dot_reference(DType::q4_1, x.data(), no_min.bytes() + o * row_bytes, in);
    const Exact e = exact_row(DType::q4_1, w.bytes() + o * row_bytes, x.data(), in);
    outside += std::abs(static_cast<double>(y) - e.sum) > gamma * e.scale;
  }
  EXPECT_EQ(outside, out);
}

// Prefill (rows > 1) still widens the matrix for sgemm: every bit of linear()
// on the decoded matrix, and rows_to_f32() is that decoding.
TEST(BlockGemv, PrefillSumsTheDecodedMatrix) {
  uint32_t seed = 200;
  for (const DType dtype : kFormats)
    for (const int64_t in : {32, 576}) {
      const int64_t out = 37, rows = 3;
      const Tensor w = random_blocks(dtype, out, in, ++seed);
      const std::vector<float> wide = w.to_f32_vector(), x = random_x(rows * in, ++seed);
      std::vector<float> got(static_cast<size_t>(rows * out)), want(got.size());
      linear(x.data(), rows, in, w, out, nullptr, got.data());
      linear(x.data(), rows, in, wide.data(), out, nullptr, want.data());
      EXPECT_EQ(got, want) << dtype_name(dtype) << " in " << in;
      std::vector<float> row(static_cast<size_t>(in));
      rows_to_f32(w, out - 1, 1, row.data());
      EXPECT_TRUE(std::equal(row.begin(), row.end(), wide.end() - in)) << dtype_name(dtype);
    }
}

}  // namespace
}  // namespace tessera::oracle
