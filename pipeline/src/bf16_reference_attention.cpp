// BF16-exact reference of attention (bf16_reference.h): the online softmax of
// kernels/flash_attention.h replayed in the design's block order, every
// quantity an interval [lo, hi] of double values. What the rules fix:
//  - score s = fp32(q.k) * scale: exact bf16 products, an fp32 sum of D terms
//    in any order (reduction_delta), one fp32 product with the fp32 scale;
//  - per block, m_new = max(m, block max); weights p = exp_tile(s - m_new) and
//    the rescale alpha = exp_tile(m - m_new), bf16 operand and bf16 result;
//  - l = l * alpha + sum p and o = o * alpha + sum p v in fp32 (p v exact:
//    bf16 x bf16), the sums in any order;
//  - decode chains merged as attn_merge does (two exp_tile factors, fp32
//    products and add), finalize o * fp32(1 / l), one RNE.
// s - m is never positive (m is a maximum), and is exactly 0 for the key that
// is the maximum: both are used, so the key that sets the max keeps weight 1
// instead of inheriting the width of the max's interval.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "bf16_reference_internal.h"
#include "tessera/core/bf16.h"

namespace tessera::pipeline::bf16ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Interval widen(Interval a, double rel) {
  const double w = rel * std::max(std::fabs(a.lo), std::fabs(a.hi));
  return {a.lo - w, a.hi + w};
}

Interval mul(Interval a, Interval b) {
  const double p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
}

// The fp32 difference x - max, known to be <= 0, and exactly 0 when x is the
// maximum. -inf (an empty state's m) stays -inf: exp_tile gives 0.
Interval below_max(Interval x, Interval max, bool x_is_max) {
  if (x_is_max) return {0, 0};
  if (x.hi == -kInf) return {-kInf, -kInf};
  const Interval d = widen({x.lo - max.hi, x.hi - max.lo}, kU32);
  return {std::min(d.lo, 0.0), std::min(d.hi, 0.0)};
}

struct State {
  Interval m{-kInf, -kInf};
  Interval l{0, 0};
  std::vector<Interval> o;
};

// One query row of one head: its q, the kv head's rows of k and v.
struct Row {
  const float* q;
  const float* k;  // key t at k + t * stride
  const float* v;
  int64_t stride, D;
  double scale;  // the kernel's fp32 scale
};

Interval score(const Row& r, int64_t t) {
  double d = 0, a = 0;
  for (int64_t e = 0; e < r.D; ++e) {
    const double p = static_cast<double>(r.q[e]) * r.k[t * r.stride + e];
    d += p;
    a += std::fabs(p);
  }
  const double w = reduction_delta(r.D) * a;
  return widen({(d - w) * r.scale, (d + w) * r.scale}, kU32);
}

// flash_attn's update of `st` with keys [k0, k1).
void block_step(const Row& r, int64_t k0, int64_t k1, State& st) {
  const int64_t n = k1 - k0;
  std::vector<Interval> s(static_cast<size_t>(n));
  size_t top = 0;  // the key with the highest lower end
  for (int64_t j = 0; j < n; ++j) {
    s[static_cast<size_t>(j)] = score(r, k0 + j);
    if (s[static_cast<size_t>(j)].lo > s[top].lo) top = static_cast<size_t>(j);
  }
  Interval mx{-kInf, -kInf};  // the block's max
  double rival = st.m.hi;      // the highest upper end besides `top`
  for (size_t j = 0; j < s.size(); ++j) {
    mx = {std::max(mx.lo, s[j].lo), std::max(mx.hi, s[j].hi)};
    if (j != top) rival = std::max(rival, s[j].hi);
  }
  const Interval m{std::max(st.m.lo, mx.lo), std::max(st.m.hi, mx.hi)};
  const bool top_is_max = s[top].lo >= rival;
  const Interval alpha = exp_tile_bounds(below_max(st.m, m, st.m.lo >= mx.hi));
  std::vector<Interval> p(s.size());
  Interval psum{0, 0};
  for (size_t j = 0; j < s.size(); ++j) {
    p[j] = exp_tile_bounds(below_max(s[j], m, j == top && top_is_max));
    psum = {psum.lo + p[j].lo, psum.hi + p[j].hi};
  }
  const double rs = reduction_delta(n);
  psum = {psum.lo * (1 - rs), psum.hi * (1 + rs)};
  st.l = {(st.l.lo * alpha.lo * (1 - kU32) + psum.lo) * (1 - kU32),
          (st.l.hi * alpha.hi * (1 + kU32) + psum.hi) * (1 + kU32)};
  st.o.resize(static_cast<size_t>(r.D), Interval{0, 0});
  const double ro = reduction_delta(n + 1);
  for (int64_t e = 0; e < r.D; ++e) {
    Interval acc = widen(mul(st.o[static_cast<size_t>(e)], alpha), kU32);
    double mag = std::max(std::fabs(acc.lo), std::fabs(acc.hi));
    for (int64_t j = 0; j < n; ++j) {
      const double val = r.v[(k0 + j) * r.stride + e];
      const Interval pv = mul(p[static_cast<size_t>(j)], {val, val});
      acc = {acc.lo + pv.lo, acc.hi + pv.hi};
      mag += std::max(std::fabs(pv.lo), std::fabs(pv.hi));
    }
    st.o[static_cast<size_t>(e)] = {acc.lo - ro * mag, acc.hi + ro * mag};
  }
  st.m = m;
}

// attn_merge(a, b). Into an empty a it is an exact copy (exp_tile(-inf) = 0,
// exp_tile(0) = 1); an empty b leaves a as it is.
void merge(State& a, const State& b) {
  if (b.m.hi == -kInf) return;
  if (a.m.hi == -kInf) {
    a = b;
    return;
  }
  const Interval m{std::max(a.m.lo, b.m.lo), std::max(a.m.hi, b.m.hi)};
  const Interval fa = exp_tile_bounds(below_max(a.m, m, a.m.lo >= b.m.hi));
  const Interval fb = exp_tile_bounds(below_max(b.m, m, b.m.lo >= a.m.hi));
  auto fold = [&](Interval x, Interval y) {
    const Interval px = widen(mul(x, fa), kU32), py = widen(mul(y, fb), kU32);
    return widen({px.lo + py.lo, px.hi + py.hi}, kU32);
  };
  a.l = fold(a.l, b.l);
  for (size_t e = 0; e < a.o.size(); ++e) a.o[e] = fold(a.o[e], b.o[e]);
  a.m = m;
}

// Keys [0, visible) of one row in the schedule's order, then finalize into
// out[0, D).
void attend(const Row& r, int64_t visible, const AttnSchedule& sc, Bf16Bounds& b, size_t out) {
  const int64_t span = sc.chain > 0 ? sc.chain * sc.block : visible;
  std::vector<State> chains;
  for (int64_t c0 = 0; c0 < visible; c0 += span) {
    State& st = chains.emplace_back();
    for (int64_t k0 = c0; k0 < std::min(c0 + span, visible); k0 += sc.block)
      block_step(r, k0, std::min({k0 + sc.block, c0 + span, visible}), st);
  }
  State acc;
  if (sc.cascade) {  // s0 (+) (s1 (+) (...)): each stage folds in the one after it
    for (size_t i = chains.size(); i-- > 0;) {
      merge(chains[i], acc);
      acc = std::move(chains[i]);
    }
  } else {
    for (const State& st : chains) merge(acc, st);
  }
  for (int64_t e = 0; e < r.D; ++e) {
    const Interval o = acc.o[static_cast<size_t>(e)];
    const double lo = o.lo / (o.lo >= 0 ? acc.l.hi : acc.l.lo);
    const double hi = o.hi / (o.hi >= 0 ? acc.l.lo : acc.l.hi);
    const Interval y = widen({lo, hi}, 2.5 * kU32);  // fp32 1 / l and the product
    put(b, out + static_cast<size_t>(e), y.lo, y.hi);
  }
}

}  // namespace

Bf16Bounds attention(const kernels::OpShape& s, std::span<const float> q, std::span<const float> k,
                     std::span<const float> v, const AttnSchedule& sched) {
  const bool prefill = s.op == "attention_prefill";
  const int64_t rows = prefill ? s.dim("S") : 1, first = prefill ? s.dim("P") : s.dim("T") - 1;
  const int64_t H = s.dim("heads"), KV = s.dim("kv_heads"), D = s.dim("head_dim");
  const double scale =
      static_cast<float>(s.attr("scale", 1.0 / std::sqrt(static_cast<double>(D))));
  Bf16Bounds b = sized(q.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / (H / KV);
      const Row r{q.data() + (i * H + h) * D, k.data() + kvh * D, v.data() + kvh * D, KV * D, D, scale};
      attend(r, first + i + 1, sched, b, static_cast<size_t>((i * H + h) * D));
    }
  return b;
}

}  // namespace tessera::pipeline::bf16ref
