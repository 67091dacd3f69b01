// Statistical gates (issue 12): honest bf16 rounding of Gaussian-like values
// passes every statistic, and each planted subtle bug - a truncating
// rounding, a 1 % scale of one row, a one-ulp error in an exact op, extra
// noise - fails the statistic meant to catch it. Plus the mutant registry.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline_test_util.h"
#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/core/mutants.h"
#include "tessera/kernels/silu_mul.h"
#include "tessera/pipeline/metrics.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline {
namespace {

// Deterministic roughly Gaussian values (sum of 4 uniforms), rows of `width`
// with per-row scales spread over two decades.
std::vector<float> row_values(size_t n, size_t width, uint64_t seed) {
  std::vector<float> v(n);
  test_util::Gauss4 gauss(seed);
  for (size_t i = 0; i < n; ++i) {
    const double row_scale = std::pow(10.0, static_cast<double>((i / width) % 7) / 3.0 - 1.0);
    v[i] = static_cast<float>(row_scale * gauss());
  }
  return v;
}

Threshold loose(NoiseModel nm) {
  Threshold t{"test", 1, 1, 0, 0, "only the statistics judge", nm};
  return t;
}

NoiseModel output_rounding(int64_t width, bool exact = false) {
  NoiseModel nm;
  nm.enabled = true;
  nm.elem_roundings = 1;
  nm.row_width = width;
  nm.exact_bf16 = exact;
  return nm;
}

TEST(StatMetrics, HonestRoundingPassesEveryStatistic) {
  const std::vector<float> ref = row_values(64 * 256, 256, 7);
  std::vector<float> got(ref);
  round_bf16_inplace(got);
  const Metrics m = compare(ref, got, output_rounding(256, true));
  ASSERT_TRUE(m.has_stats);
  EXPECT_TRUE(failed_metrics(m, loose(output_rounding(256, true))).empty())
      << m.bias_z << " " << m.mag_bias_z << " " << m.slope_z << " " << m.row_slope_z << " " << m.var_ratio;
  EXPECT_NEAR(m.var_ratio, 1.0, 0.1);  // RNE of continuous values: ulp^2 / 12 each
  EXPECT_EQ(m.bf16_mismatches, 0);
}

TEST(StatMetrics, TruncationIsAMagnitudeBias) {
  const std::vector<float> ref = row_values(64 * 256, 256, 8);
  std::vector<float> got(ref);
  for (float& x : got) x = truncate_bf16(x);
  const Metrics m = compare(ref, got, output_rounding(256));
  const auto failed = failed_metrics(m, loose(output_rounding(256)));
  EXPECT_LT(m.mag_bias_z, -7);
  EXPECT_NE(std::find(failed.begin(), failed.end(), "mag_bias_z"), failed.end());
  // Signed errors of both signs cancel: the plain bias does not see it.
  EXPECT_LT(std::fabs(m.bias_z), 7);
}

// RNE carries a second-order mean error where the values' density slopes
// across one spacing (thresholds.cpp rounding_bias). Over millions of elements
// that is many standard errors: the honest silu_mul kernel on 4M Gaussian
// gates (sd 0.5, the bf16 exp near 1) gave mag_bias_z -9 before the allowance.
// A truncated exp, a one-sided bias 30x smaller than half an ulp of the output,
// must still fail.
TEST(StatMetrics, SecondOrderRoundingBiasOfAnHonestKernelPassesAtMillionsOfElements) {
  const size_t n = size_t{1} << 22;
  std::vector<bf16> gate(n), up(n), out(n);
  std::vector<float> ref(n), got(n);
  test_util::Gauss4 g4(11);
  auto gauss = [&] { return static_cast<float>(0.5 * std::sqrt(3.0) * g4()); };
  for (size_t i = 0; i < n; ++i) {
    gate[i] = f32_to_bf16(gauss());
    up[i] = f32_to_bf16(gauss());
    const float g = bf16_to_f32(gate[i]);
    ref[i] = g / (1.0f + std::exp(-g)) * bf16_to_f32(up[i]);
  }
  kernels::silu_mul(gate.data(), up.data(), out.data(), static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) got[i] = bf16_to_f32(out[i]);
  NoiseModel nm = output_rounding(0);
  nm.elem_roundings = 2;  // thresholds.cpp silu_mul: the bf16 exp and the output
  const Metrics m = compare(ref, got, nm);
  EXPECT_TRUE(failed_metrics(m, loose(nm)).empty()) << m.bias_z << " " << m.mag_bias_z << " " << m.slope_z;
  for (size_t i = 0; i < n; ++i) {
    const float g = bf16_to_f32(gate[i]);
    const float e = truncate_bf16(std::exp(-g));
    got[i] = round_bf16(g / (1.0f + e) * bf16_to_f32(up[i]));
  }
  const Metrics bugged = compare(ref, got, nm);
  EXPECT_GT(bugged.mag_bias_z, 7);  // a truncated exp is smaller: every |silu| grows
}

TEST(StatMetrics, OneRowScaledByOnePercentFailsTheRowSlope) {
  const std::vector<float> ref = row_values(64 * 256, 256, 9);
  std::vector<float> got(ref);
  for (size_t i = 5 * 256; i < 6 * 256; ++i) got[i] *= 1.01f;
  round_bf16_inplace(got);
  const Metrics m = compare(ref, got, output_rounding(256));
  EXPECT_GT(m.row_slope_z, 7);
  EXPECT_EQ(m.worst_slope_row, 5);
  const auto failed = failed_metrics(m, loose(output_rounding(256)));
  EXPECT_NE(std::find(failed.begin(), failed.end(), "row_slope_z"), failed.end());
}

TEST(StatMetrics, ExtraNoiseFailsTheVarianceRatio) {
  const std::vector<float> ref = row_values(64 * 256, 256, 10);
  std::vector<float> got(ref);
  for (size_t i = 0; i < got.size(); ++i) got[i] *= 1.0f + ((i * 2654435761u) % 7 - 3.0f) * 4e-3f;
  round_bf16_inplace(got);
  const Metrics m = compare(ref, got, output_rounding(256));
  EXPECT_GT(m.var_ratio, var_ratio_limit(m));
  const auto failed = failed_metrics(m, loose(output_rounding(256)));
  EXPECT_NE(std::find(failed.begin(), failed.end(), "var_ratio"), failed.end());
}

// Four outliers (an outlier channel, as the real SmolLM2's residual stream
// has) carry the predicted variance nearly alone: the variance ratio then
// rests on ~4 errors, not 1028, and its limit follows the effective count.
// Each outlier sits just past a rounding midpoint (an error of almost half an
// ulp: 3x the average): honest, and 2.9x the variance, which would fail a
// limit for 1028 independent errors.
TEST(StatMetrics, AnOutlierChannelCarriesTheVarianceRatioAlone) {
  std::vector<float> ref = row_values(1024, 1024, 12);
  for (int i = 0; i < 4; ++i) ref.push_back(2048.0f + 8.001f + 64.0f * static_cast<float>(i));  // ulp 16
  std::vector<float> got(ref);
  round_bf16_inplace(got);
  const Metrics m = compare(ref, got, output_rounding(0));
  EXPECT_GT(m.var_ratio, 2.5);
  EXPECT_GT(m.var_ratio, var_ratio_limit(static_cast<double>(m.count)));
  EXPECT_LT(m.var_ratio_n, 5.0);
  EXPECT_TRUE(failed_metrics(m, loose(output_rounding(0))).empty()) << m.var_ratio << " " << m.var_ratio_n;
}

TEST(StatMetrics, OneUlpInAnExactOpFailsBf16Exact) {
  const std::vector<float> ref = row_values(16 * 128, 128, 11);
  std::vector<float> got(ref);
  round_bf16_inplace(got);
  ASSERT_TRUE(failed_metrics(compare(ref, got, output_rounding(128, true)), loose(output_rounding(128, true))).empty());
  got.back() = bf16_to_f32(bf16{static_cast<uint16_t>(f32_to_bf16(got.back()).bits ^ 1u)});
  const Metrics m = compare(ref, got, output_rounding(128, true));
  EXPECT_EQ(m.bf16_mismatches, 1);
  const auto failed = failed_metrics(m, loose(output_rounding(128, true)));
  EXPECT_NE(std::find(failed.begin(), failed.end(), "bf16_exact"), failed.end());
}

TEST(StatMetrics, AnExactOpMustBeExact) {
  const std::vector<float> ref = {1, 2, 3, 4};
  NoiseModel exact;
  exact.enabled = true;  // no roundings at all: a copy
  EXPECT_EQ(compare(ref, ref, exact).var_ratio, 0);
  std::vector<float> got(ref);
  got[2] = 3.0078125f;
  const Metrics m = compare(ref, got, exact);
  EXPECT_TRUE(std::isinf(m.var_ratio));
  EXPECT_FALSE(failed_metrics(m, loose(exact)).empty());
}

TEST(StatMetrics, EveryKernelRowHasANoiseModel) {
  for (const Threshold& t : kernel_thresholds()) {
    if (t.op != "argmax") {
      EXPECT_TRUE(t.noise.enabled) << t.op;
    }
  }
  for (const StatRule& r : stat_rules()) EXPECT_FALSE(r.reason.empty()) << r.name;
}

TEST(Mutants, RegistryNamesRoundTripAndUnknownNamesAreUsageErrors) {
  EXPECT_GE(mutants().size(), 20u);
  for (const MutantInfo& m : mutants()) EXPECT_EQ(mutant_by_name(m.name), m.id);
  EXPECT_THROW(mutant_by_name("no_such_mutant"), UsageError);
  EXPECT_EQ(active_mutant(), Mutant::none);
  set_active_mutant(Mutant::linear_truncate);
  EXPECT_TRUE(mutant_on(Mutant::linear_truncate));
  set_active_mutant(Mutant::none);
}

}  // namespace
}  // namespace tessera::pipeline
