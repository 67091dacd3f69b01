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
};

// The whole table, for reports and docs.
const std::vector<Threshold>& kernel_thresholds();

// The row for `shape.op`, with the shape-dependent terms applied (the fp32
// accumulation term grows with the reduction length K of linear). Throws
// InternalError for an op with no row: every op the graph emits must have one.
Threshold kernel_threshold(const kernels::OpShape& shape);

// Names of the metrics that break `t` ("non_finite", "max_rel", ...); empty = pass.
std::vector<std::string> failed_metrics(const Metrics& m, const Threshold& t);

}  // namespace tessera::pipeline
