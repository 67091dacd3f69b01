#pragma once
// Phase-1 (per-kernel) gate thresholds: one table, one row per op, each with
// the reason for its numbers (pipeline/src/thresholds.cpp). Metrics are defined
// in metrics.h (relative figures are relative to max |ref|).
#include <string>
#include <vector>

#include "tessera/kernels/op_builder.h"
#include "tessera/pipeline/metrics.h"

namespace tessera::pipeline {

struct Threshold {
  std::string op;
  double max_rel = 0;      // max |got - ref| / max |ref| must be <= this
  double mean_rel = 0;     // mean |got - ref| / max |ref| must be <= this
  double min_pearson = 1;  // must be >= this
  double min_cosine = 1;   // must be >= this
  std::string reason;
  // Statistical gates (metrics.h): the rounding model of this output and the
  // limits on |z| and on the variance ratio (stat_rules()).
  NoiseModel noise;
};

// Rules of the statistical gates, each with its reason (thresholds.cpp).
struct StatRule {
  std::string name;
  double value = 0;
  std::string reason;
};
const std::vector<StatRule>& stat_rules();
double stat_rule(const std::string& name);
// The variance-ratio limit for n (effective) compared elements: the model's
// slack plus z_limit standard deviations of a chi-square ratio (sqrt(2 / n)).
double var_ratio_limit(double n);
// That limit for m (its var_ratio_n, or its count when it has none).
double var_ratio_limit(const Metrics& m);

// The whole table, for reports and docs.
const std::vector<Threshold>& kernel_thresholds();

// The row for `shape.op`, with the shape-dependent terms applied (the fp32
// accumulation term grows with the reduction length K of linear). Throws
// InternalError for an op with no row: every op the graph emits must have one.
Threshold kernel_threshold(const kernels::OpShape& shape);

// Elements per row for the per-row fit of an output of `op` with `numel`
// values over `rows` tokens: a head for head_rmsnorm (each head is normalized
// on its own), a token otherwise; the whole tensor when rows do not divide it.
int64_t stat_row_width(const std::string& op, int64_t head_dim, size_t numel, int64_t rows);

// "bias_z 12.3 > 7" for a failed statistical metric name, "" for any other.
std::string stat_failure(const Metrics& m, const std::string& name);

// Names of the metrics that break `t` ("non_finite", "max_rel", ...); empty = pass.
std::vector<std::string> failed_metrics(const Metrics& m, const Threshold& t);

}  // namespace tessera::pipeline
