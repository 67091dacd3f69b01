// residual_add, bias_add, silu_mul and the tile exp, against double math on
// the same bf16 inputs.
#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/nonlinear.h"

namespace tessera::kernels::test {
namespace {

// Ragged counts around the vector width.
const int64_t kCounts[] = {1, 15, 16, 17, 33, 1000};

// An fp32 add of two bf16 values, then RNE to bf16: the fp32 add rounds at
// most u32 |ref| and the bf16 rounding u_bf16 |ref| (double rounding can add
// up to the fp32 error once more).
std::vector<double> add_bound(const std::vector<double>& ref) {
  std::vector<double> b(ref.size());
  for (size_t i = 0; i < b.size(); ++i) b[i] = (kUBf16 + 2 * kU32) * std::fabs(ref[i]);
  return b;
}

TEST(ResidualAdd, MatchesScalarReference) {
  for (int64_t n : kCounts) {
    auto a = random_bf16(n, 1, -4, 4), b = random_bf16(n, 2, -4, 4);
    std::vector<bf16> out(n);
    run_kernel("residual_add", {{"count", n}}, {bytes_of(a), bytes_of(b), bytes_of(out)});
    std::vector<double> ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = double(bf16_to_f32(a[i])) + bf16_to_f32(b[i]);
    EXPECT_TRUE(within(to_f64(out), ref, add_bound(ref))) << "count " << n;
  }
}

TEST(BiasAdd, BroadcastsOverRowsInPlace) {
  for (int64_t rows : {1, 3}) {
    for (int64_t n : {1, 17, 130}) {
      auto x = random_bf16(rows * n, 3, -2, 2), bias = random_bf16(n, 4, -2, 2);
      std::vector<double> ref(rows * n);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j)
          ref[r * n + j] = double(bf16_to_f32(x[r * n + j])) + bf16_to_f32(bias[j]);
      run_kernel("bias_add", {{"rows", rows}, {"n", n}}, {bytes_of(x), bytes_of(bias), bytes_of(x)});
      EXPECT_TRUE(within(to_f64(x), ref, add_bound(ref))) << rows << "x" << n;
    }
  }
}

// silu(g) * u with s = sigmoid(g): the bf16 exp result perturbs sigmoid by at
// most u_bf16 (1 - s) relative, the exp2 polynomial by 2e-6, the fp32 ops by a
// few u32, and the final RNE by u_bf16.
TEST(SiluMul, MatchesScalarReferenceWithinTileExpPrecision) {
  for (int64_t n : kCounts) {
    auto g = random_bf16(n, 5, -12, 12), u = random_bf16(n, 6, -3, 3);
    std::vector<bf16> out(n);
    run_kernel("silu_mul", {{"count", n}}, {bytes_of(g), bytes_of(u), bytes_of(out)});
    std::vector<double> ref(n), bound(n);
    for (int64_t i = 0; i < n; ++i) {
      double x = bf16_to_f32(g[i]), s = 1.0 / (1.0 + std::exp(-x));
      ref[i] = x * s * bf16_to_f32(u[i]);
      bound[i] = std::fabs(ref[i]) * (kUBf16 * (1 - s) + 2e-6 + 8 * kU32 + kUBf16);
    }
    EXPECT_TRUE(within(to_f64(out), ref, bound)) << "count " << n;
  }
}

TEST(TileExp, IsExpOfTheBf16OperandRoundedToBf16) {
  std::vector<double> got, ref, bound;
  for (float x = -90.0f; x < 88.0f; x += 0.37f) {
    double e = std::exp(static_cast<double>(round_bf16(x)));
    got.push_back(exp_tile(x));
    ref.push_back(e);
    bound.push_back((kUBf16 + 2e-6) * e + 1e-38);  // flush-to-zero below 2^-126
  }
  EXPECT_TRUE(within(got, ref, bound));
  EXPECT_EQ(exp_tile(-INFINITY), 0.0f);
  EXPECT_EQ(exp_tile(0.0f), 1.0f);
  EXPECT_EQ(exp_tile(100.0f), INFINITY);
  EXPECT_TRUE(std::isnan(exp_tile(NAN)));
}

}  // namespace
}  // namespace tessera::kernels::test
