#include "tessera/pipeline/metrics.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"

namespace tessera::pipeline {

Metrics compare(std::span<const float> ref, std::span<const float> got) {
  TESSERA_CHECK(ref.size() == got.size(), "compare: {} reference values vs {} results",
                ref.size(), got.size());
  Metrics m;
  m.count = static_cast<int64_t>(ref.size());
  if (ref.empty()) return m;
  // Double accumulation: the metric must be far more precise than what it judges.
  double sum_abs = 0, sr = 0, sg = 0, srr = 0, sgg = 0, srg = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = ref[i], g = got[i];
    if (!std::isfinite(g)) {
      ++m.non_finite;
      continue;
    }
    m.scale = std::max(m.scale, std::fabs(r));
    const double d = std::fabs(g - r);
    if (d > m.max_abs || m.worst_index < 0) {
      if (d > m.max_abs) m.max_abs = d;
      m.worst_index = static_cast<int64_t>(i);
      m.worst_ref = r;
      m.worst_got = g;
    }
    sum_abs += d;
    sr += r;
    sg += g;
    srr += r * r;
    sgg += g * g;
    srg += r * g;
  }
  const double n = static_cast<double>(m.count - m.non_finite);
  if (n == 0) {
    m.pearson = m.cosine = 0;
    m.max_rel = m.mean_rel = INFINITY;
    return m;
  }
  // An all-zero reference: any difference is infinitely relative.
  const double denom = m.scale > 0 ? m.scale : (m.max_abs > 0 ? 0 : 1);
  m.max_rel = denom > 0 ? m.max_abs / denom : INFINITY;
  m.mean_rel = denom > 0 ? sum_abs / n / denom : INFINITY;
  const double vr = srr - sr * sr / n, vg = sgg - sg * sg / n, cov = srg - sr * sg / n;
  if (vr <= 0 && vg <= 0) {
    m.pearson = 1;
  } else if (vr <= 0 || vg <= 0) {
    m.pearson = 0;
  } else {
    m.pearson = cov / std::sqrt(vr * vg);
  }
  if (srr == 0 && sgg == 0) {
    m.cosine = 1;
  } else if (srr == 0 || sgg == 0) {
    m.cosine = 0;
  } else {
    m.cosine = srg / std::sqrt(srr * sgg);
  }
  return m;
}

nlohmann::json to_json(const Metrics& m) {
  // JSON has no NaN / inf: non-finite figures become null.
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json j = {{"count", m.count},       {"non_finite", m.non_finite}, {"scale", num(m.scale)},
          {"max_abs", num(m.max_abs)}, {"max_rel", num(m.max_rel)}, {"mean_rel", num(m.mean_rel)},
          {"pearson", num(m.pearson)}, {"cosine", num(m.cosine)}, {"worst_index", m.worst_index},
          {"worst_ref", num(m.worst_ref)}, {"worst_got", num(m.worst_got)}};
  if (m.has_stats) {
    j["bias_z"] = num(m.bias_z);
    j["mag_bias_z"] = num(m.mag_bias_z);
    j["slope"] = num(m.slope);
    j["slope_z"] = num(m.slope_z);
    j["intercept_z"] = num(m.intercept_z);
    j["row_slope_z"] = num(m.row_slope_z);
    j["worst_slope_row"] = m.worst_slope_row;
    j["var_ratio"] = num(m.var_ratio);
    j["var_ratio_n"] = num(m.var_ratio_n);
    j["bf16_mismatches"] = m.bf16_mismatches;
  }
  if (m.bf16_ref_outside >= 0) {
    j["bf16_ref_outside"] = m.bf16_ref_outside;
    j["bf16_ref_first"] = m.bf16_ref_first;
  }
  return j;
}

Metrics metrics_from_json(const nlohmann::json& m) {
  // Every field to_json(Metrics) writes, so that a resumed phase reports what
  // its file says (report.json is audited against the phase files, phase 7);
  // null is how JSON carries a non-finite figure.
  auto num = [&](const char* k, double fallback) {
    if (!m.contains(k)) return fallback;
    return m[k].is_null() ? std::nan("") : m[k].get<double>();
  };
  Metrics x;
  x.count = m.value("count", int64_t{0});
  x.non_finite = m.value("non_finite", int64_t{0});
  x.scale = num("scale", 0);
  x.max_abs = num("max_abs", 0);
  x.max_rel = num("max_rel", 0);
  x.mean_rel = num("mean_rel", 0);
  x.pearson = num("pearson", 1);
  x.cosine = num("cosine", 1);
  x.worst_index = m.value("worst_index", int64_t{-1});
  x.worst_ref = num("worst_ref", 0);
  x.worst_got = num("worst_got", 0);
  x.has_stats = m.contains("bias_z");
  if (x.has_stats) {
    x.bias_z = num("bias_z", 0);
    x.mag_bias_z = num("mag_bias_z", 0);
    x.slope = num("slope", 1);
    x.slope_z = num("slope_z", 0);
    x.intercept_z = num("intercept_z", 0);
    x.row_slope_z = num("row_slope_z", 0);
    x.worst_slope_row = m.value("worst_slope_row", int64_t{-1});
    x.var_ratio = num("var_ratio", 0);
    x.var_ratio_n = num("var_ratio_n", static_cast<double>(x.count));  // reports before it: the count
    x.bf16_mismatches = m.value("bf16_mismatches", int64_t{0});
  }
  x.bf16_ref_outside = m.value("bf16_ref_outside", int64_t{-1});
  x.bf16_ref_first = m.value("bf16_ref_first", int64_t{-1});
  return x;
}

}  // namespace tessera::pipeline
