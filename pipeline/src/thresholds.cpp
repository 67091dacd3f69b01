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

#include <cmath>

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
       "Plus K*2^-24 for the accumulation (added per shape)."},
      {"rmsnorm", 4 * u, u, 0.9999, 0.9999,
       "x and w rounded (2u), rsqrt in fp32 over a bf16 sum of squares (<u), bf16 out (u): <= 3u "
       "per element, relative to the element; 4u of max |ref| covers it."},
      {"head_rmsnorm", 4 * u, u, 0.9999, 0.9999,
       "same arithmetic as rmsnorm over head_dim-long rows."},
      {"rope", 4 * u, u, 0.9999, 0.9999,
       "x, cos, sin rounded (3u for x*cos + rot(x)*sin, relative to |x|), bf16 out (u); the "
       "rotation preserves the row norm, so max |ref| bounds |x|."},
      {"bias_add", 4 * u, u, 0.9999, 0.9999,
       "x, b and the sum each rounded once: <= u(|x| + |b| + |y|); with |x|, |b| of the order of "
       "max |y| that is ~3u. A missing bias (|b| ~ 0.3 |y|) is two orders above."},
      {"residual_add", 4 * u, u, 0.9999, 0.9999, "as bias_add: three roundings of an add."},
      {"silu_mul", 6 * u, 1.5 * u, 0.9999, 0.9999,
       "gate and up rounded (2u), exp through bf16 (silu_tile: <= u(1-s)), fp32 reciprocal, "
       "bf16 out (u): ~4u worst case per element."},
      {"attention_prefill", 16 * u, 2 * u, 0.999, 0.999,
       "q, k rounded (2u on each score, i.e. 2u|s| absolute: a score of 4 moves by 1.6e-2, "
       "changing its softmax weight by that much), exp through bf16 (u), probabilities rounded "
       "to bf16 before P.V (u), v rounded (u), fp32 running sums, bf16 out (u): ~6u typical "
       "near the largest scores; 16u covers rows dominated by one key."},
      {"attention_decode", 16 * u, 2 * u, 0.999, 0.999,
       "as attention_prefill, plus the merge of partial (max, sum, out) states in fp32."},
      {"kv_append", u, u / 2, 0.99999, 0.99999,
       "a copy: only the bf16 rounding of the new rows and of the cache (<= u)."},
      {"embedding", u, u / 2, 0.99999, 0.99999, "a row gather of a bf16 table: one rounding."},
      {"argmax", 0, 0, 1, 1,
       "ids must match exactly, except when the oracle's runner-up is within one bf16 spacing (2u) "
       "of the max (then either id is right; the gate checks that before comparing)."},
  };
  return table;
}

Threshold kernel_threshold(const kernels::OpShape& shape) {
  for (const Threshold& t : kernel_thresholds()) {
    if (t.op != shape.op) continue;
    Threshold out = t;
    if (shape.op == "linear") out.max_rel += static_cast<double>(shape.dim("K")) * std::ldexp(1.0, -24);
    return out;
  }
  throw_error<InternalError>("no phase-1 threshold for op '{}' (add a row to thresholds.cpp)",
                             shape.op);
}

std::vector<std::string> failed_metrics(const Metrics& m, const Threshold& t) {
  std::vector<std::string> out;
  if (m.non_finite > 0) out.push_back("non_finite");
  // Written as !(x <= limit) so a NaN figure fails too.
  if (!(m.max_rel <= t.max_rel)) out.push_back("max_rel");
  if (!(m.mean_rel <= t.mean_rel)) out.push_back("mean_rel");
  if (!(m.pearson >= t.min_pearson)) out.push_back("pearson");
  if (!(m.cosine >= t.min_cosine)) out.push_back("cosine");
  return out;
}

}  // namespace tessera::pipeline
