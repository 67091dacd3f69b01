// The phase-1 threshold table. Common ground for every reason below:
//  - bf16 has 8 significant bits (7 stored): the spacing in [1, 2) is 2^-7, so
//    round-to-nearest-even gives a relative error of at most u = 2^-8 ~ 3.9e-3
//    per rounding (reached just above a power of two), about u / sqrt(3) rms.
//    Every NPU input and output is rounded once.
//  - fp32 accumulation adds at most K * 2^-24 relative over a reduction of K
//    terms (worst case, recursive summation); below 1e-3 for K <= 11008.
//  - relative figures are relative to max |ref| (metrics.h), so one rounding
//    of the output costs at most u in max_rel and ~u/4 on average in mean_rel
//    (|ref| averages well below its max for these tensors).
//  - correlation: a relative rms error e costs about e^2 / 2 of cosine, so
//    1e-2 rms noise (ten times the bf16 level) still gives 0.99995: the
//    cosine/pearson floors only catch structural bugs (permutations, wrong
//    rows), the max/mean bounds catch the small ones.
#include "tessera/pipeline/thresholds.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera::pipeline {

namespace {
constexpr double u = 1.0 / 256.0;  // bf16 unit roundoff 2^-8 (= kBf16Eps)
}

const std::vector<Threshold>& kernel_thresholds() {
  static const std::vector<Threshold> table = {
      {"linear", 8 * u, 1.5 * u, 0.9995, 0.9995,
       "x and w rounded to bf16 (2u per product, random sign), fp32 accumulation, bf16 out: the "
       "error of an output is ~u*|x||w|/sqrt(1.5), i.e. ~1e-3 of a typical |y|; the max over up "
       "to 10^8 outputs is ~6 sigma, plus u for the output rounding: ~4u; 8u leaves 2x margin. "
       "Plus K*2^-24 for the accumulation (added per shape)."
       " Noise: one rounding of the output (inputs are bf16 already); fp32 accumulation adds K 2^-48/6 of rms^2 (per shape).", {true, 1, 0, 0}},
      {"rmsnorm", 4 * u, u, 0.9999, 0.9999,
       "x and w rounded (2u), rsqrt in fp32 over a bf16 sum of squares (<u), bf16 out (u): <= 3u "
       "per element, relative to the element; 4u of max |ref| covers it."
       " Noise: the output rounding; the row scale (fp32 sum, fp32 rsqrt) is exact to ~1e-7.", {true, 1, 0, 0}},
      {"head_rmsnorm", 4 * u, u, 0.9999, 0.9999,
       "same arithmetic as rmsnorm over head_dim-long rows."
       " Noise: the output rounding; rows are heads.", {true, 1, 0, 0}},
      {"rope", 4 * u, u, 0.9999, 0.9999,
       "x rounded, cos and sin the deployed f32 tables (<= 3u for x*cos + rot(x)*sin with bf16 "
       "tables, relative to |x|: an upper bound), bf16 out (u); the "
       "rotation preserves the row norm, so max |ref| bounds |x|."
       " Noise: the output rounding of x*cos - rot(x)*sin computed in fp32 on bf16 operands.", {true, 1, 0, 0}},
      {"bias_add", 4 * u, u, 0.9999, 0.9999,
       "x, b and the sum each rounded once: <= u(|x| + |b| + |y|); with |x|, |b| of the order of "
       "max |y| that is ~3u. A missing bias (|b| ~ 0.3 |y|) is two orders above."
       " Noise: the output rounding of an exact fp32 sum of two bf16 values, so the result is "
       "bf16-exact: it must equal the RNE of the oracle's sum bit for bit.", {true, 1, 0, 0, true}},
      {"residual_add", 4 * u, u, 0.9999, 0.9999, "as bias_add: three roundings of an add. Noise and "
       "exactness as bias_add.", {true, 1, 0, 0, true}},
      {"silu_mul", 6 * u, 1.5 * u, 0.9999, 0.9999,
       "gate and up rounded (2u), exp through bf16 (silu_tile: <= u(1-s)), fp32 reciprocal, "
       "bf16 out (u): ~4u worst case per element."
       " Noise: the output rounding plus the bf16 exp result, which moves sigmoid by <= u(1-s) relative: two roundings of the element.", {true, 2, 0, 0}},
      {"attention_prefill", 16 * u, 2 * u, 0.999, 0.999,
       "q, k rounded (2u on each score, i.e. 2u|s| absolute: a score of 4 moves by 1.6e-2, "
       "changing its softmax weight by that much), exp through bf16 (u), probabilities rounded "
       "to bf16 before P.V (u), v rounded (u), fp32 running sums, bf16 out (u): ~6u typical "
       "near the largest scores; 16u covers rows dominated by one key."
       " Noise: output rounding, plus per key the bf16 operand (s - max) of exp (absolute 2^-9 |s - max|), the bf16 exp and the bf16 probability: relative weight errors of rms u_rms sqrt(2 + (s - max)^2); keys that carry weight have |s - max| <~ 3.7 (e^-3.7 = 2.5 %), so <= 16 roundings of the row scale.", {true, 1, 16, 0}},
      {"attention_decode", 16 * u, 2 * u, 0.999, 0.999,
       "as attention_prefill, plus the merge of partial (max, sum, out) states in fp32.", {true, 1, 16, 0}},
      {"kv_append", u, u / 2, 0.99999, 0.99999,
       "a copy: only the bf16 rounding of the new rows and of the cache (<= u)."
       " Noise: none: the kernel copies bf16 values, so it must be bit-exact.", {true, 0, 0, 0}},
      {"embedding", u, u / 2, 0.99999, 0.99999, "a row gather of a bf16 table: one rounding."
       " Noise: none: a gather of bf16 rows must be bit-exact.", {true, 0, 0, 0}},
      {"argmax", 0, 0, 1, 1,
       "ids must match exactly, except when the oracle's runner-up is within one bf16 spacing (2u) "
       "of the max (then either id is right; the gate checks that before comparing).", {}},
  };
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
  for (const Threshold& t : kernel_thresholds()) {
    if (t.op != shape.op) continue;
    Threshold out = t;
    if (shape.op == "linear") {
      const auto K = static_cast<double>(shape.dim("K"));
      out.max_rel += K * std::ldexp(1.0, -24);
      const double ur = bf16_rms_rounding();
      out.noise.row_roundings += K * std::ldexp(1.0, -48) / (6 * ur * ur);
    }
    return out;
  }
  throw_error<InternalError>("no phase-1 threshold for op '{}' (add a row to thresholds.cpp)",
                             shape.op);
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
