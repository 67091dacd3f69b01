// rmsnorm and head_rmsnorm against double math on the same bf16 inputs.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace tessera::kernels::test {
namespace {

// Scalar reference, one row of n: x * rsqrt(mean(x^2) + eps) * w.
std::vector<double> rms_reference(const std::vector<bf16>& x, const std::vector<bf16>& w,
                                  int64_t rows, int64_t n, double eps) {
  std::vector<double> y(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += std::pow(double(bf16_to_f32(x[r * n + j])), 2);
    double inv = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < n; ++j)
      y[r * n + j] = bf16_to_f32(x[r * n + j]) * inv * bf16_to_f32(w[j]);
  }
  return y;
}

// The fp32 sum of n squares is off by at most n u32 relative (all terms are
// positive), which moves rsqrt by half that; mean, +eps, sqrt, divide and the
// two multiplies add a few u32; the final RNE adds u_bf16.
std::vector<double> rms_bound(const std::vector<double>& ref, int64_t n) {
  std::vector<double> b(ref.size());
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = std::fabs(ref[i]) * (kUBf16 + (0.5 * n + 8) * kU32);
  return b;
}

// Rows of ordinary magnitude plus one of ~1e-3 whose mean square (~3e-7) is
// below eps, so a kernel that dropped or misread eps fails.
std::vector<bf16> norm_input(int64_t rows, int64_t n, uint32_t seed) {
  auto x = random_bf16(rows * n, seed, -3, 3);
  auto tiny = random_bf16(n, seed + 1, -1e-3f, 1e-3f);
  std::copy(tiny.begin(), tiny.end(), x.begin());
  return x;
}

TEST(RmsNorm, MatchesScalarReferenceOnRaggedRows) {
  for (int64_t n : {1, 7, 64, 100, 576}) {
    const int64_t rows = 3;
    const double eps = 1e-5;
    auto x = norm_input(rows, n, 7);
    auto w = random_bf16(n, 9, 0.5f, 2.0f);
    std::vector<bf16> out(rows * n);
    run_kernel("rmsnorm", {{"rows", rows}, {"n", n}, {"eps", eps}},
               {bytes_of(x), bytes_of(w), bytes_of(out)});
    auto ref = rms_reference(x, w, rows, n, eps);
    EXPECT_TRUE(within(to_f64(out), ref, rms_bound(ref, n))) << "n " << n;
  }
}

TEST(RmsNorm, RequiresEps) {
  auto x = random_bf16(8, 1), w = random_bf16(8, 2);
  std::vector<bf16> out(8);
  EXPECT_THROW(run_kernel("rmsnorm", {{"rows", 1}, {"n", 8}}, {bytes_of(x), bytes_of(w), bytes_of(out)}),
               KernelArgError);
}

// Qwen3 QK-norm: every head_dim vector normalized with one shared weight; odd
// head counts.
TEST(HeadRmsNorm, NormalizesEveryHeadWithTheSharedWeight) {
  for (int64_t heads : {1, 9, 14}) {
    for (int64_t d : {64, 128}) {
      const int64_t tokens = 5;
      const double eps = 1e-6;
      auto x = norm_input(tokens * heads, d, 11);
      auto w = random_bf16(d, 13, 0.5f, 2.0f);
      run_kernel("head_rmsnorm",
                 {{"tokens", tokens}, {"heads", heads}, {"head_dim", d}, {"eps", eps}},
                 {bytes_of(x), bytes_of(w), bytes_of(x)});
      auto x0 = norm_input(tokens * heads, d, 11);
      auto ref = rms_reference(x0, w, tokens * heads, d, eps);
      EXPECT_TRUE(within(to_f64(x), ref, rms_bound(ref, d))) << heads << " heads, d " << d;
    }
  }
}

}  // namespace
}  // namespace tessera::kernels::test
