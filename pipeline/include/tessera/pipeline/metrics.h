#pragma once
// Numerical comparison of an NPU result against the FP32 oracle (DESIGN.md
// "Gate metrics"). Definitions, with ref the oracle values and got the NPU's:
//   scale     = max_i |ref_i|                      (the tensor's magnitude)
//   max_abs   = max_i |got_i - ref_i|
//   max_rel   = max_abs / scale                    (relative to max |ref|, so
//               elements near zero do not blow the figure up)
//   mean_rel  = mean_i |got_i - ref_i| / scale
//   pearson   = correlation coefficient of (ref, got); 1 when both are constant
//   cosine    = <ref, got> / (|ref| |got|); 1 when both are all-zero
// Any non-finite value in got is counted and fails every gate.
//
// Statistical metrics (compare() with a NoiseModel; stat_metrics.cpp). The
// model predicts, before the run, the variance of each element's error from
// the BF16 roundings that reach it: var_i = elem_roundings * ulp(ref_i)^2/12
// (roundings of the element's own value: uniform on +-ulp/2) + row_roundings
// * (u_rms * rms of ref's row)^2 (roundings mixed in from the row's operands;
// u_rms = 0.2123 * 2^-7, the rms relative error of one RNE rounding).
// With e_i = got_i - ref_i, V = sum var_i:
//   bias_z     = sum e_i / sqrt(V)                  (signed mean error)
//   mag_bias_z = sum e_i sign(ref_i) / sqrt(V)      (bias toward / away from 0:
//                a truncating rounding, which a signed mean averages away)
//   slope, intercept of the least-squares fit got = a + b ref; slope_z =
//                (b - 1) / sd(b) with sd(b)^2 = sum (ref_i - mean)^2 var_i / Sxx^2
//                (exact for independent errors); intercept_z likewise
//   row_slope_z = the largest |slope_z| of a fit per row (rows that have their
//                own scale: a norm's row, a token's activations)
//   var_ratio  = sum (e_i - mean e)^2 / V           (1 for pure rounding noise),
//                its effective sample size var_ratio_n = V^2 / sum var_i^2
// slope_z, row_slope_z and mag_bias_z first subtract the second-order
// shrinkage that noise entering a norm causes (stat_metrics.cpp).
// A z of 0 with V = 0 means an exact op was exact; any error there is inf.
#include <cstdint>
#include <span>

#include <nlohmann/json_fwd.hpp>

namespace tessera::pipeline {

struct NoiseModel {
  bool enabled = false;
  double elem_roundings = 0;
  double row_roundings = 0;
  int64_t row_width = 0;  // elements per row; 0 = the whole tensor is one row
  // The op's bf16 result is determined exactly by its bf16 inputs (an add of
  // two bf16 values is exact in fp32, then one RNE): got must equal
  // round_bf16(ref) bit for bit. Counted in bf16_mismatches.
  bool exact_bf16 = false;
  // A threshold along an op path (phases 2, 3, 6: block_thresholds). The
  // z-scores assume independent per-element errors, which holds for one
  // kernel on bf16-exact inputs (phase 1) but not after a path: every output
  // of a linear shares its input's error (the logits of a 30-layer SmolLM2
  // share one hidden-state error, so their mean error is one number, not an
  // average of 49152 independent ones), and norms and softmax add
  // second-order shrinkage the count does not model. On honest deployments
  // (transformer fixtures, the real SmolLM2 with 32 of 32 tokens agreeing)
  // that gave |z| up to 126. So along a path the end-to-end statistics are
  // measured and reported but do not fail the gate; phase 1 gates them all,
  // and so do the local gates of phases 2 and 6 (local_gate.h), which compare
  // each op with the oracle op on the NPU's own inputs, where the shared
  // component is gone.
  bool path = false;
};

struct Metrics {
  int64_t count = 0;
  int64_t non_finite = 0;  // NaN / inf in got
  double scale = 0;
  double max_abs = 0;
  double max_rel = 0;
  double mean_rel = 0;
  double pearson = 1;
  double cosine = 1;
  int64_t worst_index = -1;  // element with the largest |got - ref|
  double worst_ref = 0, worst_got = 0;
  bool has_stats = false;
  double bias_z = 0, mag_bias_z = 0, slope = 1, slope_z = 0, intercept_z = 0;
  double row_slope_z = 0;  // signed, the row with the largest |z|
  int64_t worst_slope_row = -1;
  double var_ratio = 0;
  // The effective number of elements behind var_ratio, (sum var_i)^2 / sum
  // var_i^2: a few elements with a large predicted variance (an outlier
  // channel) carry the ratio alone, and its scatter is sqrt(2 / var_ratio_n),
  // not sqrt(2 / count). From the predicted variances only, never the errors.
  double var_ratio_n = 0;
  int64_t bf16_mismatches = 0;  // with NoiseModel::exact_bf16
  // Elements outside the BF16-exact reference's interval (bf16_reference.h);
  // -1 when the op has no such reference or it was not run (paths, phase 3).
  int64_t bf16_ref_outside = -1;
  int64_t bf16_ref_first = -1;  // the first such element
};

// Throws InternalError when the sizes differ (a harness bug, not a gate result).
Metrics compare(std::span<const float> ref, std::span<const float> got);
// compare() plus the statistical metrics under `noise` (when noise.enabled).
Metrics compare(std::span<const float> ref, std::span<const float> got, const NoiseModel& noise);

// Rms relative error of one bf16 RNE rounding, mantissas log-uniform:
// 2^-7 * sqrt(E[1/m^2] / 12) with E[1/m^2] = (1/2 - 1/8) / ln 2 over [1, 2).
double bf16_rms_rounding();

nlohmann::json to_json(const Metrics& m);
// The inverse of to_json (null, a non-finite figure, reads back as NaN).
Metrics metrics_from_json(const nlohmann::json& j);

}  // namespace tessera::pipeline
