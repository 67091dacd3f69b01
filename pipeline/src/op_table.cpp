// The table of operators (op_table.h): per op, its sizes, its FP32 oracle op
// and its phase-1 threshold row. Each oracle op is one call into oracle/ops.h
// or rope.h (or a copy / gather), never a second implementation of the math.
//
// Common ground for every threshold reason below:
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
#include "tessera/pipeline/op_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tessera/core/error.h"
#include "tessera/oracle/ops.h"
#include "tessera/oracle/rope.h"

namespace tessera::pipeline {

using kernels::OpShape;

namespace {

constexpr double u = 1.0 / 256.0;  // bf16 unit roundoff 2^-8 (= kBf16Eps)

// An elementwise op over M x N values with `inputs` same-sized operands.
OpSizes rows_by_n(const OpShape& s, size_t inputs) {
  const int64_t n = s.dim("M") * s.dim("N");
  return {std::vector<int64_t>(inputs, n), n};
}

// The oracle's attention uses 1/sqrt(head_dim); another scale is folded into q.
std::vector<float> attention(const OpShape& s, bool prefill, const OpInputs& in) {
  const int64_t rows = prefill ? s.dim("S") : 1;
  const int64_t first = prefill ? s.dim("P") : s.dim("T") - 1;
  const oracle::AttentionShape a{rows, first, s.dim("heads"), s.dim("kv_heads"), s.dim("head_dim")};
  const double scale = s.attr("scale", 1.0 / std::sqrt(static_cast<double>(a.head_dim)));
  std::vector<float> out(in[0].size());
  const double fold = scale * std::sqrt(static_cast<double>(a.head_dim));
  if (std::fabs(fold - 1.0) < 1e-12) {
    oracle::causal_attention(a, in[0].data(), in[1].data(), in[2].data(), out.data());
  } else {
    std::vector<float> qs(in[0].begin(), in[0].end());
    for (float& x : qs) x = static_cast<float>(x * fold);
    oracle::causal_attention(a, qs.data(), in[1].data(), in[2].data(), out.data());
  }
  return out;
}

OpSizes attention_prefill_sizes(const OpShape& s) {
  const int64_t S = s.dim("S"), T = s.dim("P") + S, hd = s.dim("head_dim");
  const int64_t q = S * s.dim("heads") * hd, kv = T * s.dim("kv_heads") * hd;
  return {{q, kv, kv}, q};
}

OpSizes attention_decode_sizes(const OpShape& s) {
  const int64_t hd = s.dim("head_dim"), kv = s.dim("T") * s.dim("kv_heads") * hd;
  return {{s.dim("heads") * hd, kv, kv}, s.dim("heads") * hd};
}

std::vector<float> rope(const OpShape& s, const OpInputs& in) {
  const int64_t M = s.dim("M"), heads = s.dim("heads"), hd = s.dim("head_dim");
  std::vector<float> y(in[0].begin(), in[0].end());
  for (int64_t m = 0; m < M; ++m)
    oracle::apply_rope(y.data() + m * heads * hd, heads, hd, in[1].data() + m * hd / 2,
                       in[2].data() + m * hd / 2);
  return y;
}

std::vector<float> kv_append(const OpShape& s, const OpInputs& in) {
  const int64_t d = s.dim("kv_dim"), pos = s.dim("pos"), M = s.dim("M");
  if (pos < 0 || pos + M > s.dim("T"))
    throw_error<UsageError>("{}: rows {}..{} are outside the cache", s.key(), pos, pos + M - 1);
  std::vector<float> y(in[1].begin(), in[1].end());
  std::copy(in[0].begin(), in[0].end(), y.begin() + pos * d);
  return y;
}

std::vector<float> embedding(const OpShape& s, const OpInputs& in) {
  const int64_t H = s.dim("H"), V = s.dim("V");
  std::vector<float> y(static_cast<size_t>(s.dim("M") * H));
  for (int64_t m = 0; m < s.dim("M"); ++m) {
    const auto id = static_cast<int64_t>(in[0][static_cast<size_t>(m)]);
    if (id < 0 || id >= V) throw_error<UsageError>("{}: id {} outside [0, {})", s.key(), id, V);
    std::memcpy(y.data() + m * H, in[1].data() + id * H, static_cast<size_t>(H) * sizeof(float));
  }
  return y;
}

std::vector<float> argmax(const OpShape& s, const OpInputs& in) {
  const size_t V = static_cast<size_t>(s.dim("V"));
  std::vector<float> y(static_cast<size_t>(s.dim("M")));
  for (size_t m = 0; m < y.size(); ++m) {
    auto row = in[0].subspan(m * V, V);
    y[m] = static_cast<float>(std::max_element(row.begin(), row.end()) - row.begin());
  }
  return y;
}

std::vector<OpDef> make_table() {
  std::vector<OpDef> t;
  t.push_back({{"linear", 8 * u, 1.5 * u, 0.9995, 0.9995,
                "x and w rounded to bf16 (2u per product, random sign), fp32 accumulation, bf16 out: the "
                "error of an output is ~u*|x||w|/sqrt(1.5), i.e. ~1e-3 of a typical |y|; the max over up "
                "to 10^8 outputs is ~6 sigma, plus u for the output rounding: ~4u; 8u leaves 2x margin. "
                "Plus K*2^-24 for the accumulation (added per shape)."
                " Noise: one rounding of the output (inputs are bf16 already); fp32 accumulation adds K 2^-48/6 of rms^2 (per shape).", {true, 1, 0, 0}},
               [](const OpShape& s) -> OpSizes {
                 const int64_t M = s.dim("M"), K = s.dim("K"), N = s.dim("N");
                 return {{M * K, N * K}, M * N};
               },
               [](const OpShape& s, const OpInputs& in) {
                 std::vector<float> y(static_cast<size_t>(s.dim("M") * s.dim("N")));
                 oracle::linear(in[0].data(), s.dim("M"), s.dim("K"), in[1].data(), s.dim("N"),
                                nullptr, y.data());
                 return y;
               },
               // The fp32 accumulation over K terms (see the common ground).
               [](const OpShape& s, Threshold& th) {
                 const auto K = static_cast<double>(s.dim("K"));
                 th.max_rel += K * std::ldexp(1.0, -24);
                 const double ur = bf16_rms_rounding();
                 th.noise.row_roundings += K * std::ldexp(1.0, -48) / (6 * ur * ur);
               }});
  t.push_back({{"rmsnorm", 4 * u, u, 0.9999, 0.9999,
                "x and w rounded (2u), rsqrt in fp32 over a bf16 sum of squares (<u), bf16 out (u): <= 3u "
                "per element, relative to the element; 4u of max |ref| covers it."
                " Noise: the output rounding; the row scale (fp32 sum, fp32 rsqrt) is exact to ~1e-7.", {true, 1, 0, 0}},
               [](const OpShape& s) -> OpSizes {
                 return {{s.dim("M") * s.dim("H"), s.dim("H")}, s.dim("M") * s.dim("H")};
               },
               [](const OpShape& s, const OpInputs& in) {
                 std::vector<float> y(in[0].size());
                 oracle::rms_norm(in[0].data(), s.dim("M"), s.dim("H"), in[1].data(), s.attr("eps", 1e-6),
                                  y.data());
                 return y;
               }});
  t.push_back({{"head_rmsnorm", 4 * u, u, 0.9999, 0.9999,
                "same arithmetic as rmsnorm over head_dim-long rows."
                " Noise: the output rounding; rows are heads.", {true, 1, 0, 0}},
               [](const OpShape& s) -> OpSizes {
                 const int64_t n = s.dim("M") * s.dim("heads") * s.dim("head_dim");
                 return {{n, s.dim("head_dim")}, n};
               },
               [](const OpShape& s, const OpInputs& in) {
                 std::vector<float> y(in[0].size());
                 oracle::rms_norm(in[0].data(), s.dim("M") * s.dim("heads"), s.dim("head_dim"),
                                  in[1].data(), s.attr("eps", 1e-6), y.data());
                 return y;
               }});
  t.push_back({{"rope", 4 * u, u, 0.9999, 0.9999,
                "x rounded, cos and sin the deployed f32 tables (<= 3u for x*cos + rot(x)*sin with bf16 "
                "tables, relative to |x|: an upper bound), bf16 out (u); the "
                "rotation preserves the row norm, so max |ref| bounds |x|."
                " Noise: the output rounding of x*cos - rot(x)*sin computed in fp32 on bf16 operands.", {true, 1, 0, 0}},
               [](const OpShape& s) -> OpSizes {
                 const int64_t M = s.dim("M"), n = M * s.dim("heads") * s.dim("head_dim");
                 return {{n, M * s.dim("head_dim") / 2, M * s.dim("head_dim") / 2}, n};
               },
               rope});
  t.push_back({{"bias_add", 4 * u, u, 0.9999, 0.9999,
                "x, b and the sum each rounded once: <= u(|x| + |b| + |y|); with |x|, |b| of the order of "
                "max |y| that is ~3u. A missing bias (|b| ~ 0.3 |y|) is two orders above."
                " Noise: the output rounding of an exact fp32 sum of two bf16 values, so the result is "
                "bf16-exact: it must equal the RNE of the oracle's sum bit for bit.", {true, 1, 0, 0, true}},
               [](const OpShape& s) -> OpSizes {
                 return {{s.dim("M") * s.dim("N"), s.dim("N")}, s.dim("M") * s.dim("N")};
               },
               [](const OpShape& s, const OpInputs& in) {
                 std::vector<float> y(in[0].size());
                 const size_t N = static_cast<size_t>(s.dim("N"));
                 for (size_t i = 0; i < y.size(); ++i) y[i] = in[0][i] + in[1][i % N];
                 return y;
               }});
  t.push_back({{"residual_add", 4 * u, u, 0.9999, 0.9999, "as bias_add: three roundings of an add. Noise and "
                "exactness as bias_add.", {true, 1, 0, 0, true}}, [](const OpShape& s) { return rows_by_n(s, 2); },
               [](const OpShape&, const OpInputs& in) {
                 std::vector<float> y(in[0].size());
                 for (size_t i = 0; i < y.size(); ++i) y[i] = in[0][i] + in[1][i];
                 return y;
               }});
  t.push_back({{"silu_mul", 6 * u, 1.5 * u, 0.9999, 0.9999,
                "gate and up rounded (2u), exp through bf16 (silu_tile: <= u(1-s)), fp32 reciprocal, "
                "bf16 out (u): ~4u worst case per element."
                " Noise: the output rounding plus the bf16 exp result, which moves sigmoid by <= u(1-s) relative: two roundings of the element.", {true, 2, 0, 0}}, [](const OpShape& s) { return rows_by_n(s, 2); },
               [](const OpShape&, const OpInputs& in) {
                 std::vector<float> y(in[0].size());
                 oracle::swiglu(in[0].data(), in[1].data(), static_cast<int64_t>(y.size()), y.data());
                 return y;
               }});
  t.push_back({{"attention_prefill", 16 * u, 2 * u, 0.999, 0.999,
                "q, k rounded (2u on each score, i.e. 2u|s| absolute: a score of 4 moves by 1.6e-2, "
                "changing its softmax weight by that much), exp through bf16 (u), probabilities rounded "
                "to bf16 before P.V (u), v rounded (u), fp32 running sums, bf16 out (u): ~6u typical "
                "near the largest scores; 16u covers rows dominated by one key."
                " Noise: output rounding, plus per key the bf16 operand (s - max) of exp (absolute 2^-9 |s - max|), the bf16 exp and the bf16 probability: relative weight errors of rms u_rms sqrt(2 + (s - max)^2); keys that carry weight have |s - max| <~ 3.7 (e^-3.7 = 2.5 %), so <= 16 roundings of the row scale.", {true, 1, 16, 0}}, attention_prefill_sizes,
               [](const OpShape& s, const OpInputs& in) { return attention(s, true, in); }});
  t.push_back({{"attention_decode", 16 * u, 2 * u, 0.999, 0.999,
                "as attention_prefill, plus the merge of partial (max, sum, out) states in fp32.", {true, 1, 16, 0}}, attention_decode_sizes,
               [](const OpShape& s, const OpInputs& in) { return attention(s, false, in); }});
  t.push_back({{"kv_append", u, u / 2, 0.99999, 0.99999,
                "a copy: only the bf16 rounding of the new rows and of the cache (<= u)."
                " Noise: none: the kernel copies bf16 values, so it must be bit-exact.", {true, 0, 0, 0}},
               [](const OpShape& s) -> OpSizes {
                 const int64_t d = s.dim("kv_dim");
                 return {{s.dim("M") * d, s.dim("T") * d}, s.dim("T") * d};
               },
               kv_append});
  t.push_back({{"embedding", u, u / 2, 0.99999, 0.99999, "a row gather of a bf16 table: one rounding."
                " Noise: none: a gather of bf16 rows must be bit-exact.", {true, 0, 0, 0}},
               [](const OpShape& s) -> OpSizes {
                 return {{s.dim("M"), s.dim("V") * s.dim("H")}, s.dim("M") * s.dim("H")};
               },
               embedding});
  t.push_back({{"argmax", 0, 0, 1, 1,
                "ids must match exactly, except when the oracle's runner-up is within one bf16 spacing (2u) "
                "of the max (then either id is right; the gate checks that before comparing).", {}},
               [](const OpShape& s) -> OpSizes { return {{s.dim("M") * s.dim("V")}, s.dim("M")}; },
               argmax});
  return t;
}

}  // namespace

const std::vector<OpDef>& op_table() {
  static const std::vector<OpDef> t = make_table();
  return t;
}

const OpDef* find_op(const std::string& op) {
  for (const OpDef& d : op_table())
    if (d.op() == op) return &d;
  return nullptr;
}

}  // namespace tessera::pipeline
