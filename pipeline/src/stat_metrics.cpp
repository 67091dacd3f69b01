// Statistical metrics of an NPU result against the FP32 oracle (metrics.h):
// bias, magnitude bias, least-squares slope / intercept (whole tensor and per
// row) and error-variance ratio, each against the variance that BF16 rounding
// predicts for these very reference values.
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/core/bf16.h"
#include "tessera/pipeline/metrics.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline {

namespace {

// Spacing of bf16 values at |r| (0 for r = 0): 2^(e - 8) with r = f * 2^e, f in [0.5, 1).
double bf16_ulp(double r) {
  if (r == 0) return 0;
  int e = 0;
  std::frexp(r, &e);
  return std::ldexp(1.0, e - 8);
}

// x / sqrt(v); an exact op (v = 0) is a pass only when it was exact (x = 0).
double z_of(double x, double v) {
  if (v > 0) return x / std::sqrt(v);
  if (x == 0) return 0;
  return x > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

// Predicted error variance of every element (metrics.h NoiseModel), and the
// largest mean error the element's own roundings may carry (thresholds.cpp
// rounding_bias; a row's mixed-in roundings mostly cancel in its mean: the
// same relative bias on every term of a softmax or a dot product scales
// numerator and denominator alike, and their second order is `shrink` below).
struct Predicted {
  std::vector<double> var;
  double bias_allow = 0;  // sum_i of the per-element bias bound
};

Predicted predicted(std::span<const float> ref, size_t width, const NoiseModel& nm) {
  const double ur = bf16_rms_rounding(), beta = stat_rule("rounding_bias");
  Predicted p;
  p.var.resize(ref.size());
  for (size_t r0 = 0; r0 < ref.size(); r0 += width) {
    double ss = 0, sa = 0;
    for (size_t i = r0; i < r0 + width; ++i) {
      ss += static_cast<double>(ref[i]) * ref[i];
      sa += std::fabs(static_cast<double>(ref[i]));
    }
    const double ms = ss / static_cast<double>(width), row = nm.row_roundings * ur * ur * ms;
    for (size_t i = r0; i < r0 + width; ++i) {
      const double ulp = bf16_ulp(ref[i]);
      p.var[i] = nm.elem_roundings * ulp * ulp / 12.0 + row;
    }
    p.bias_allow += beta * nm.elem_roundings * sa;
  }
  return p;
}

struct Fit {
  double slope = 1, intercept = 0, var_slope = 0, var_intercept = 0;
};

// Least squares got = a + b ref over [lo, hi) with the exact variance of the
// two estimators under independent errors of variance var_i.
Fit fit(std::span<const float> ref, std::span<const float> got, const std::vector<double>& var,
        size_t lo, size_t hi) {
  const double n = static_cast<double>(hi - lo);
  double mr = 0, mg = 0;
  for (size_t i = lo; i < hi; ++i) {
    mr += ref[i];
    mg += got[i];
  }
  mr /= n;
  mg /= n;
  double sxx = 0, sxy = 0;
  for (size_t i = lo; i < hi; ++i) {
    sxx += (ref[i] - mr) * (ref[i] - mr);
    sxy += (ref[i] - mr) * (got[i] - mg);
  }
  Fit f;
  if (!(sxx > 0)) return f;  // a constant row: no slope to judge
  f.slope = sxy / sxx;
  f.intercept = mg - f.slope * mr;
  for (size_t i = lo; i < hi; ++i) {
    const double d = ref[i] - mr, c = 1 / n - mr * d / sxx;
    f.var_slope += d * d * var[i] / (sxx * sxx);
    f.var_intercept += c * c * var[i];
  }
  return f;
}

void fill_stats(Metrics& m, std::span<const float> ref, std::span<const float> got, const NoiseModel& nm) {
  const size_t n = ref.size();
  const auto w = static_cast<size_t>(nm.row_width);
  const size_t width = w > 0 && n % w == 0 ? w : n;
  const Predicted pred = predicted(ref, width, nm);
  const std::vector<double>& var = pred.var;
  double v = 0, v2 = 0, e = 0, mag = 0, sum_abs = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    v += var[i];
    v2 += var[i] * var[i];
    e += d;
    mag += ref[i] > 0 ? d : (ref[i] < 0 ? -d : 0);
    sum_abs += std::fabs(ref[i]);
  }
  // Second order: noise of relative variance s entering a norm shrinks its
  // output by ~s/2 (|h + e| = |h| (1 + s/2)); the slope and the magnitude bias
  // may deviate by the whole predicted s (2x) before their z counts. Each
  // rounding may also carry a mean error of up to rounding_bias (relative),
  // which over millions of elements is many standard errors (thresholds.cpp).
  const double ur = bf16_rms_rounding(), shrink = nm.row_roundings * ur * ur;
  const double rel_bias = stat_rule("rounding_bias") * nm.elem_roundings;
  auto beyond = [](double x, double allow) { return x > allow ? x - allow : (x < -allow ? x + allow : 0.0); };
  mag = beyond(mag, shrink * sum_abs + pred.bias_allow);
  if (nm.exact_bf16)
    for (size_t i = 0; i < n; ++i) m.bf16_mismatches += got[i] == round_bf16(ref[i]) ? 0 : 1;
  double dev = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(got[i]) - ref[i] - e / static_cast<double>(n);
    dev += d * d;
  }
  m.has_stats = true;
  m.bias_z = z_of(beyond(e, pred.bias_allow), v);
  m.mag_bias_z = z_of(mag, v);
  m.var_ratio = v > 0 ? dev / v : (dev == 0 ? 0 : std::numeric_limits<double>::infinity());
  m.var_ratio_n = v2 > 0 ? v * v / v2 : static_cast<double>(n);
  const Fit all = fit(ref, got, var, 0, n);
  m.slope = all.slope;
  m.slope_z = z_of(beyond(all.slope - 1, shrink + rel_bias), all.var_slope);
  m.intercept_z = z_of(beyond(all.intercept, pred.bias_allow / static_cast<double>(n)), all.var_intercept);
  m.row_slope_z = 0;
  for (size_t r0 = 0; r0 < n; r0 += width) {
    const Fit f = fit(ref, got, var, r0, r0 + width);
    const double z = z_of(beyond(f.slope - 1, shrink + rel_bias), f.var_slope);
    if (std::fabs(z) > std::fabs(m.row_slope_z) || std::isnan(z)) {
      m.row_slope_z = z;
      m.worst_slope_row = static_cast<int64_t>(r0 / width);
    }
  }
}

}  // namespace

double bf16_rms_rounding() { return std::ldexp(1.0, -7) * std::sqrt((0.5 - 0.125) / std::log(2.0) / 12.0); }

Metrics compare(std::span<const float> ref, std::span<const float> got, const NoiseModel& noise) {
  Metrics m = compare(ref, got);
  // Non-finite values already fail every gate; the sums below would be NaN.
  if (!noise.enabled || m.count == 0 || m.non_finite > 0) return m;
  fill_stats(m, ref, got, noise);
  return m;
}

}  // namespace tessera::pipeline
