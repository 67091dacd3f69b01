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
#include <cstdint>
#include <span>

#include <nlohmann/json_fwd.hpp>

namespace tessera::pipeline {

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
};

// Throws InternalError when the sizes differ (a harness bug, not a gate result).
Metrics compare(std::span<const float> ref, std::span<const float> got);

nlohmann::json to_json(const Metrics& m);
// The inverse of to_json (null, a non-finite figure, reads back as NaN).
Metrics metrics_from_json(const nlohmann::json& j);

}  // namespace tessera::pipeline
