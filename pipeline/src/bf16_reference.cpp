// BF16-exact reference per op (bf16_reference.h). Common ground for every
// delta below, u32 = 2^-24 the fp32 unit roundoff:
//  - a bf16 x bf16 product has 16 significant bits: exact in fp32, so a
//    reduction's only freedom is the order of its fp32 additions. Each of the
//    K - 1 additions rounds its partial sum s by at most u32 |s| <= u32 A, A =
//    sum of |terms|; modelled as independent uniform errors (as the
//    statistical gates model roundings), the total has sd <= sqrt((K - 1) / 3)
//    u32 A, and delta = z_limit (7, stat_rules()) of those: whatever order a
//    design splits K into (tiles, lanes, K blocks merged in fp32), an honest
//    element leaves the interval with p < 3e-12.
//  - every other fp32 operation (product with an fp32 operand, add, divide,
//    sqrt) rounds once: u32 relative each, counted one by one per op.
//  - the exact value is computed in double (53 bits): its own error is
//    2^-29 of u32, negligible.
#include "tessera/pipeline/bf16_reference.h"

#include "bf16_reference_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/pipeline/reference_ops.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline {

using kernels::OpShape;

namespace bf16ref {

double reduction_delta(int64_t k) {
  return stat_rule("z_limit") * std::sqrt(static_cast<double>(std::max<int64_t>(k - 1, 0)) / 3.0) * kU32;
}

void put(Bf16Bounds& b, size_t i, double y_lo, double y_hi) {
  b.lo[i] = round_bf16(static_cast<float>(y_lo));
  b.hi[i] = round_bf16(static_cast<float>(y_hi));
}

Bf16Bounds sized(size_t n) {
  Bf16Bounds b;
  b.lo.resize(n);
  b.hi.resize(n);
  return b;
}

// The polynomial's 1.4e-6 truncation plus ~10 fp32 roundings, and the fp32
// product x log2(e) that becomes its exponent (|x| u32 absolute there, |x|
// u32 relative after) with log2(e) itself in fp32 (as much again).
Interval exp_tile_bounds(Interval x) {
  const double inf = std::numeric_limits<double>::infinity();
  auto one = [&](double xe, double side) -> double {
    if (xe == -inf) return 0.0;
    const double b = round_bf16(static_cast<float>(xe));  // the bf16 operand
    const double e = std::exp(b) * (1 + side * (1.4e-6 + 10 * kU32 + 3 * std::fabs(b) * kU32));
    if (side < 0 && e < std::ldexp(1.0, -125)) return 0.0;  // may be flushed (2^y < 2^-126)
    return round_bf16(static_cast<float>(e));  // inf past fp32
  };
  return {one(x.lo, -1), one(x.hi, 1)};
}

}  // namespace bf16ref

namespace {

using namespace bf16ref;
const double u32 = kU32;

// y[m, n] = sum_k x[m, k] w[n, k]: exact products, one fp32 accumulator per
// output (however the design splits K), one RNE.
Bf16Bounds linear(const OpShape& s, std::span<const float> x, std::span<const float> w) {
  const int64_t M = s.dim("M"), K = s.dim("K"), N = s.dim("N");
  Bf16Bounds b = sized(static_cast<size_t>(M * N));
  const double r = reduction_delta(K);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double y = 0, a = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(x[static_cast<size_t>(m * K + k)]) * w[static_cast<size_t>(n * K + k)];
        y += p;
        a += std::fabs(p);
      }
      put(b, static_cast<size_t>(m * N + n), y - r * a, y + r * a);
    }
  return b;
}

// y = x * (1 / sqrt(sum x^2 / n + eps)) * w per row of n: the sum of squares
// is a reduction of n positive terms (A = the sum: relative r, halved by the
// square root); then / n, + eps, sqrt, 1 / (3.5 u32 on the scale) and two
// products (2 u32).
Bf16Bounds rmsnorm_rows(std::span<const float> x, std::span<const float> w, int64_t rows, int64_t n,
                        double eps) {
  Bf16Bounds b = sized(static_cast<size_t>(rows * n));
  const double rel = 0.5 * reduction_delta(n) + 5.5 * u32;
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(x[static_cast<size_t>(r * n + j)]) * x[static_cast<size_t>(r * n + j)];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (int64_t j = 0; j < n; ++j) {
      const size_t i = static_cast<size_t>(r * n + j);
      const double y = static_cast<double>(x[i]) * inv * w[static_cast<size_t>(j)];
      put(b, i, y - rel * std::fabs(y), y + rel * std::fabs(y));
    }
  }
  return b;
}

// HF rotate_half with the f32 table: a c - b s and b c + a s, two fp32
// products (the table is f32, so they round) and one add: 3 u32 of the terms.
Bf16Bounds rope(const OpShape& s, std::span<const float> x, std::span<const float> cos, std::span<const float> sin) {
  const int64_t M = s.dim("M"), heads = s.dim("heads"), D = s.dim("head_dim"), half = D / 2;
  Bf16Bounds b = sized(x.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const size_t ia = static_cast<size_t>((m * heads + h) * D + i), ib = ia + static_cast<size_t>(half);
        const double a = x[ia], bb = x[ib], c = cos[static_cast<size_t>(m * half + i)],
                     sn = sin[static_cast<size_t>(m * half + i)];
        const double ya = a * c - bb * sn, yb = bb * c + a * sn;
        const double d = 3 * u32 * (std::fabs(a * c) + std::fabs(bb * sn));
        put(b, ia, ya - d, ya + d);
        put(b, ib, yb - d, yb + d);
      }
  return b;
}

// silu(g) * up with sigmoid = 1 / (1 + E), E = exp_tile(-g) from a bf16
// operand (kernels/nonlinear.h): E may be either bf16 neighbour when e^-g
// lies within the polynomial's error of a midpoint, so every candidate of
// exp_tile_bounds is accepted. Then 1 + E, the reciprocal and two products:
// 4 u32 (5 with margin).
Bf16Bounds silu_mul(std::span<const float> gate, std::span<const float> up) {
  Bf16Bounds b = sized(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const Interval E = exp_tile_bounds({-g, -g});
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const double e : {E.lo, E.hi}) {
      const double y = std::isinf(e) ? 0.0 : g * up[i] / (1 + e);  // inf: sigmoid 0
      lo = std::min(lo, y);
      hi = std::max(hi, y);
    }
    const double d = 5 * u32 * std::max(std::fabs(lo), std::fabs(hi));
    put(b, i, lo - d, hi + d);
  }
  return b;
}

}  // namespace

std::optional<Bf16Bounds> bf16_reference(const OpShape& s, const std::vector<std::span<const float>>& in,
                                         const AttnSchedule& attn) {
  const std::vector<int64_t> want = reference_input_sizes(s);  // UsageError for an unknown op
  if (in.size() != want.size())
    throw_error<UsageError>("{}: {} inputs given, the op takes {}", s.key(), in.size(), want.size());
  for (size_t i = 0; i < in.size(); ++i)
    if (static_cast<int64_t>(in[i].size()) != want[i])
      throw_error<UsageError>("{}: input {} has {} values, the op needs {}", s.key(), i, in[i].size(), want[i]);
  if (s.op == "linear") return linear(s, in[0], in[1]);
  if (s.op == "rmsnorm") return rmsnorm_rows(in[0], in[1], s.dim("M"), s.dim("H"), s.attr("eps", 1e-6));
  if (s.op == "head_rmsnorm")
    return rmsnorm_rows(in[0], in[1], s.dim("M") * s.dim("heads"), s.dim("head_dim"), s.attr("eps", 1e-6));
  if (s.op == "rope") return rope(s, in[0], in[1], in[2]);
  if (s.op == "silu_mul") return silu_mul(in[0], in[1]);
  if (s.op == "attention_prefill" || s.op == "attention_decode") {
    if (attn.block < 1 || attn.chain < 0)
      throw_error<UsageError>("{}: the BF16-exact reference of attention needs the design's block "
                              "schedule (block {}, chain {})", s.key(), attn.block, attn.chain);
    return bf16ref::attention(s, in[0], in[1], in[2], attn);
  }
  return std::nullopt;
}

Bf16Verdict bf16_outside(const Bf16Bounds& b, std::span<const float> got) {
  TESSERA_CHECK(got.size() == b.lo.size(), "bf16 reference: {} bounds vs {} results", b.lo.size(), got.size());
  Bf16Verdict v;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] >= b.lo[i] && got[i] <= b.hi[i])) {  // NaN fails
      if (v.first < 0) v.first = static_cast<int64_t>(i);
      ++v.outside;
    }
  return v;
}

}  // namespace tessera::pipeline
