// softmax against double math on the same bf16 inputs; the planted variant
// without max subtraction must fail on large logits.
#include <iostream>

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/nonlinear.h"

namespace tessera::kernels::test {
namespace {

enum class SoftmaxBody { kernel, planted_no_max_subtraction };

// The planted bug: exp(x) / sum exp(x) straight away, same tile exp and
// rounding. Test-only; the product has no such variant.
void softmax_without_max(const std::vector<bf16>& x, std::vector<bf16>& out, int64_t rows,
                         int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> p(n);
    float sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += p[j] = exp_tile(bf16_to_f32(x[r * n + j]));
    for (int64_t j = 0; j < n; ++j) out[r * n + j] = f32_to_bf16(p[j] / sum);
  }
}

// Per element, with d_j = x_j - max: rounding d_j to bf16 (the exp operand)
// moves p_j by u_bf16 |d_j| relative, the bf16 exp result by u_bf16, the exp2
// polynomial by 2e-6: E_j = u_bf16 (|d_j| + 1) + 2e-6. The sum carries the
// p-weighted mean of E_j plus n u32 of fp32 summation; the reciprocal and
// multiply 2 u32; the output RNE u_bf16.
::testing::AssertionResult check(int64_t rows, int64_t n, float lo, float hi, SoftmaxBody body) {
  auto x = random_bf16(rows * n, 41 + n, lo, hi);
  std::vector<bf16> out(rows * n);
  if (body == SoftmaxBody::kernel) {
    run_kernel("softmax", {{"rows", rows}, {"n", n}}, {bytes_of(x), bytes_of(out)});
  } else {
    softmax_without_max(x, out, rows, n);
  }
  std::vector<double> ref(rows * n), bound(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0, ebar = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max<double>(mx, bf16_to_f32(x[r * n + j]));
    std::vector<double> e(n);
    for (int64_t j = 0; j < n; ++j) {
      double d = bf16_to_f32(x[r * n + j]) - mx;
      ref[r * n + j] = std::exp(d);
      sum += ref[r * n + j];
      e[j] = kUBf16 * (std::fabs(d) + 1) + 2e-6;
    }
    for (int64_t j = 0; j < n; ++j) {
      ref[r * n + j] /= sum;
      ebar += ref[r * n + j] * e[j];
    }
    for (int64_t j = 0; j < n; ++j) {
      double rel = e[j] + ebar + (n + 4) * kU32;
      bound[r * n + j] = ref[r * n + j] * (rel + kUBf16 * (1 + rel)) + 1e-38;
    }
  }
  return within(to_f64(out), ref, bound);
}

TEST(Softmax, MatchesScalarReferenceOnRaggedRows) {
  for (int64_t n : {1, 2, 17, 64, 151, 1000}) {
    EXPECT_TRUE(check(3, n, -8, 8, SoftmaxBody::kernel)) << "n " << n;
  }
}

// Logits around 100 (well inside bf16 range, exp overflows beyond ~88.7).
TEST(Softmax, LargeLogitsNeedMaxSubtraction) {
  EXPECT_TRUE(check(2, 50, 90, 120, SoftmaxBody::kernel));
  ::testing::AssertionResult r = check(2, 50, 90, 120, SoftmaxBody::planted_no_max_subtraction);
  EXPECT_FALSE(r);
  std::cout << "planted softmax without max subtraction caught: " << r.message() << "\n";
}

}  // namespace
}  // namespace tessera::kernels::test
