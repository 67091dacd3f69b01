// The statistical gate rules and the functions over the phase-1 threshold
// rows. The rows themselves, with their reasons, live in the table of
// operators (op_table.cpp): one definition per op.
#include "tessera/pipeline/thresholds.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/pipeline/op_table.h"

namespace tessera::pipeline {

const std::vector<Threshold>& kernel_thresholds() {
  static const std::vector<Threshold> table = [] {
    std::vector<Threshold> t;
    for (const OpDef& d : op_table()) t.push_back(d.threshold);
    return t;
  }();
  return table;
}

const std::vector<StatRule>& stat_rules() {
  static const std::vector<StatRule> t = {
      {"z_limit", 7.0,
       "|z| limit of bias_z, mag_bias_z, slope_z, intercept_z and row_slope_z, fixed before any "
       "run. Under the rounding model each z is ~N(0, 1) when the model's variance is right and "
       "smaller when it overestimates (the counts are upper bounds): P(|z| > 7) = 2.6e-12, so "
       "10^4 such tests per deployment (rows x taps) false-fail with p < 3e-8, and a model "
       "underestimating the noise sd by 1.5x still leaves z = 4.7 at p = 3e-6 per test. A "
       "half-ulp one-sided bias over n elements is ~1.7 sqrt(n) sigma (60 at n = 1000); a 1 % "
       "scale on a row of 64 is ~0.01 sqrt(64) / (sqrt(R) u_rms) ~ 50 sigma."},
      {"rounding_bias", std::ldexp(1.0, -14),
       "largest mean error of one rounding of the element, relative to the value, allowed to bias_z, mag_bias_z, slope and intercept before their z "
       "counts. RNE is unbiased only where the values' density is flat across one spacing: over "
       "x = a +- h with density f, the mean error is h^2 f'(a) / (3 f(a)), i.e. (h/a)^2 |a f'/f| / 3 "
       "relative, <= 2^-16/3 for log-uniform values (|a f'/f| = 1, h/a <= 2^-8) and 12x that for "
       "Gaussian values out to 3.5 sd: 2^-14. Honest silu_mul on 6.3M Gaussian elements (sd 0.5) "
       "has mag_bias_z -11.6 without it. A half-ulp truncation (2^-9 relative) is 32x this "
       "allowance and a 1 % scale 160x (per counted rounding), so both stay many sigma away at any size"},
      {"var_ratio_slack", 1.5,
       "the variance-ratio limit is 1.5 + z_limit sqrt(2 / n): the model counts every rounding at "
       "the rms of a log-uniform mantissa (u_rms); real mantissas are not exactly log-uniform "
       "(<= 1.5x in variance between the extremes of a binade), and the observed ratio of n "
       "independent errors scatters by sqrt(2 / n), n the effective count (sum var)^2 / sum var^2 "
       "(an outlier channel of the real SmolLM2 carries a residual add's ratio nearly alone)"},
      {"path_roundings", 1.0,
       "phases 2 / 3: the rounding errors of every op upstream of a tap reach it as errors of "
       "the row scale (a linear map, a norm or attention mixes a row), with gain <= 1 relative to "
       "the tap's row rms: row_roundings = sum of (elem + row) roundings along the worst path, "
       "elem_roundings = the last op's own"},
  };
  return t;
}

double stat_rule(const std::string& name) {
  for (const auto& r : stat_rules())
    if (r.name == name) return r.value;
  throw_error<InternalError>("no statistical gate rule '{}' (thresholds.cpp)", name);
}

double var_ratio_limit(double n) {
  return stat_rule("var_ratio_slack") + stat_rule("z_limit") * std::sqrt(2.0 / std::max(n, 1.0));
}

double var_ratio_limit(const Metrics& m) {
  return var_ratio_limit(m.var_ratio_n > 0 ? m.var_ratio_n : static_cast<double>(m.count));
}

int64_t stat_row_width(const std::string& op, int64_t head_dim, size_t numel, int64_t rows) {
  const auto n = static_cast<int64_t>(numel);
  if (op == "head_rmsnorm" && head_dim > 0 && n % head_dim == 0) return head_dim;
  return rows > 0 && n % rows == 0 ? n / rows : n;
}

Threshold kernel_threshold(const kernels::OpShape& shape) {
  const OpDef* d = find_op(shape.op);
  if (d == nullptr)
    throw_error<InternalError>("no phase-1 threshold for op '{}' (add a row to op_table.cpp)", shape.op);
  Threshold out = d->threshold;
  if (d->shape_terms) d->shape_terms(shape, out);
  return out;
}

std::string stat_failure(const Metrics& m, const std::string& name) {
  const std::pair<const char*, double> zs[] = {{"bias_z", m.bias_z},         {"mag_bias_z", m.mag_bias_z},
                                               {"slope_z", m.slope_z},       {"intercept_z", m.intercept_z},
                                               {"row_slope_z", m.row_slope_z}};
  for (const auto& [n, v] : zs)
    if (name == n) return fmt::format("|{}| {:.3g} > {:.3g}", n, v, stat_rule("z_limit"));
  if (name == "bf16_exact")
    return fmt::format("bf16_exact: {} of {} values differ from the RNE of the exact result", m.bf16_mismatches, m.count);
  if (name == "bf16_reference")
    return fmt::format("bf16_reference {} of {} values outside the BF16-exact reference (first at {})",
                       m.bf16_ref_outside, m.count, m.bf16_ref_first);
  if (name == "var_ratio")
    return fmt::format("var_ratio {:.3g} > {:.3g}", m.var_ratio, var_ratio_limit(m));
  return "";
}

std::vector<std::string> failed_metrics(const Metrics& m, const Threshold& t) {
  std::vector<std::string> out;
  if (m.non_finite > 0) out.push_back("non_finite");
  // Written as !(x <= limit) so a NaN figure fails too.
  if (!(m.max_rel <= t.max_rel)) out.push_back("max_rel");
  if (!(m.mean_rel <= t.mean_rel)) out.push_back("mean_rel");
  if (!(m.pearson >= t.min_pearson)) out.push_back("pearson");
  if (!(m.cosine >= t.min_cosine)) out.push_back("cosine");
  if (m.bf16_ref_outside > 0) out.push_back("bf16_reference");  // bf16_reference.h: no slack
  // Along a path the z-scores are reported, not gated (NoiseModel::path).
  if (!t.noise.enabled || !m.has_stats || t.noise.path) return out;
  // A bf16-exact op's output is a function of its inputs, checked bit for bit;
  // the statistics' uniform-rounding model does not even hold there (the bits
  // a + b discards come from the smaller operand's few bits: a tie errs by a
  // whole half ulp), so they are reported, and exactness is the gate.
  if (t.noise.exact_bf16) {
    if (m.bf16_mismatches > 0) out.push_back("bf16_exact");
    return out;
  }
  const double z = stat_rule("z_limit");
  const std::pair<const char*, double> zs[] = {{"bias_z", m.bias_z},         {"mag_bias_z", m.mag_bias_z},
                                               {"slope_z", m.slope_z},       {"intercept_z", m.intercept_z},
                                               {"row_slope_z", m.row_slope_z}};
  for (const auto& [name, v] : zs)
    if (!(std::fabs(v) <= z)) out.push_back(name);
  if (!(m.var_ratio <= var_ratio_limit(m))) out.push_back("var_ratio");
  if (m.bf16_mismatches > 0) out.push_back("bf16_exact");
  return out;
}

}  // namespace tessera::pipeline
