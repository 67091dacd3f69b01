// BF16-exact reference (bf16_reference.h, issue 12): the tile kernels' bf16
// outputs lie inside the reference's interval on sweeps that stress the
// semantics (activations at 2^-40 and 2^40, a long K of 16384, rows with a
// mean square near epsilon, sigmoid saturation), and each planted rounding /
// slope / epsilon / accumulation bug (core/mutants.h) leaves elements outside.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline_test_util.h"
#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/core/mutants.h"
#include "tessera/kernels/builders/attention.h"
#include "tessera/kernels/flash_attention.h"
#include "tessera/kernels/gemm.h"
#include "tessera/kernels/gemv.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/kernels/rmsnorm.h"
#include "tessera/kernels/rope.h"
#include "tessera/kernels/silu_mul.h"
#include "tessera/npu/device_spec.h"
#include "tessera/oracle/rope.h"
#include "tessera/pipeline/bf16_reference.h"

namespace tessera::pipeline {
namespace {

using kernels::OpShape;

// bf16-exact values ~N(0, scale^2) (sum of 4 uniforms), deterministic.
std::vector<float> gauss_values(size_t n, double scale, uint64_t seed) {
  std::vector<float> v(n);
  test_util::Gauss4 gauss(seed);
  for (float& x : v) x = round_bf16(static_cast<float>(scale * (gauss())));
  return v;
}

std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> b(v.size());
  f32_to_bf16(v, b);
  return b;
}

std::vector<float> to_f32(const std::vector<bf16>& b) {
  std::vector<float> v(b.size());
  for (size_t i = 0; i < b.size(); ++i) v[i] = bf16_to_f32(b[i]);
  return v;
}

int64_t outside(const OpShape& s, const std::vector<std::vector<float>>& in, const std::vector<float>& got,
                const AttnSchedule& sched = {}) {
  const std::vector<std::span<const float>> spans(in.begin(), in.end());
  const auto b = bf16_reference(s, spans, sched);
  EXPECT_TRUE(b.has_value()) << s.key();
  return b ? bf16_outside(*b, got).outside : -1;
}

// The GEMM tile (M > 1) or the GEMV tile (M = 1) over the whole K at once.
int64_t linear_outside(int64_t M, int64_t K, int64_t N, double scale) {
  const std::vector<float> x = gauss_values(static_cast<size_t>(M * K), scale, 11), w = gauss_values(static_cast<size_t>(N * K), 0.05, 12);
  const auto xb = to_bf16(x), wb = to_bf16(w);
  std::vector<float> acc(static_cast<size_t>(M * N));
  if (M == 1) kernels::gemv_block(wb.data(), xb.data(), acc.data(), N, K, false);
  else kernels::gemm_block(xb.data(), wb.data(), acc.data(), {M, K, N, true, 0}, false);
  std::vector<bf16> y(acc.size());
  kernels::gemm_finalize(acc.data(), y.data(), static_cast<int64_t>(y.size()));
  return outside({"linear", {{"M", M}, {"K", K}, {"N", N}}, {}}, {x, w}, to_f32(y));
}

// kernel_eps: the epsilon the tile is given (the reference always uses eps).
int64_t rmsnorm_outside(int64_t rows, int64_t n, double scale, double eps, double kernel_eps = 0) {
  const std::vector<float> x = gauss_values(static_cast<size_t>(rows * n), scale, 21), w = gauss_values(static_cast<size_t>(n), 1.0, 22);
  std::vector<bf16> y(x.size());
  kernels::rmsnorm_rows(to_bf16(x).data(), to_bf16(w).data(), y.data(), rows, n,
                        static_cast<float>(kernel_eps > 0 ? kernel_eps : eps));
  return outside({"rmsnorm", {{"M", rows}, {"H", n}}, {{"eps", eps}}}, {x, w}, to_f32(y));
}

int64_t rope_outside(double scale) {
  const int64_t M = 40, heads = 4, D = 64;
  std::vector<float> inv(D / 2);
  for (int64_t i = 0; i < D / 2; ++i) inv[static_cast<size_t>(i)] = static_cast<float>(std::pow(1e4, -2.0 * i / D));
  const oracle::RopeTable t = oracle::rope_table(inv, 1000, M);  // far positions: every angle
  const std::vector<float> x = gauss_values(static_cast<size_t>(M * heads * D), scale, 31);
  std::vector<bf16> y(x.size());
  kernels::rope_rows(to_bf16(x).data(), t.cos.data(), t.sin.data(), y.data(), {M, heads, D});
  return outside({"rope", {{"M", M}, {"heads", heads}, {"head_dim", D}}, {}}, {x, t.cos, t.sin}, to_f32(y));
}

int64_t silu_outside(double gate_scale, double up_scale) {
  const size_t n = 8192;
  const std::vector<float> g = gauss_values(n, gate_scale, 41), u = gauss_values(n, up_scale, 42);
  std::vector<bf16> y(n);
  kernels::silu_mul(to_bf16(g).data(), to_bf16(u).data(), y.data(), static_cast<int64_t>(n));
  return outside({"silu_mul", {{"M", 1}, {"N", static_cast<int64_t>(n)}}, {}}, {g, u}, to_f32(y));
}

// Attention through the real tile kernels in a given block order, the way the
// builders call them (kernels/builders/attention.h): each row's visible keys
// in blocks of sched.block; sched.chain > 0 gives each run of chain blocks its
// own state, merged in key order (decode's tiles). kernel_scale: the scale the
// tile is given (0: the shape's).
struct AttnRun {
  OpShape shape;
  std::vector<std::vector<float>> in;  // q, k, v
  std::vector<float> out;
};

AttnRun run_attention(bool prefill, int64_t S, int64_t P, double q_scale, const AttnSchedule& sched,
                      double kernel_scale = 0) {
  const int64_t H = 4, KV = 2, D = 64, G = H / KV, T = P + S, rows = prefill ? S : 1;
  AttnRun r;
  r.shape = prefill ? OpShape{"attention_prefill", {{"S", S}, {"P", P}, {"heads", H}, {"kv_heads", KV}, {"head_dim", D}}, {}}
                    : OpShape{"attention_decode", {{"T", T}, {"heads", H}, {"kv_heads", KV}, {"head_dim", D}}, {}};
  r.in = {gauss_values(static_cast<size_t>(rows * H * D), q_scale, 51), gauss_values(static_cast<size_t>(T * KV * D), 1.0, 52),
          gauss_values(static_cast<size_t>(T * KV * D), 1.0, 53)};
  r.out.resize(r.in[0].size());
  const float scale = static_cast<float>(kernel_scale > 0 ? kernel_scale : 1.0 / std::sqrt(static_cast<double>(D)));
  std::vector<float> acc(static_cast<size_t>(kernels::attn_state_floats(1, D))), st(acc.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<bf16> k(static_cast<size_t>(T * D)), v(k.size());
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < D; ++e) {
          k[static_cast<size_t>(t * D + e)] = f32_to_bf16(r.in[1][static_cast<size_t>((t * KV + h / G) * D + e)]);
          v[static_cast<size_t>(t * D + e)] = f32_to_bf16(r.in[2][static_cast<size_t>((t * KV + h / G) * D + e)]);
        }
      const auto q = to_bf16(std::vector<float>(r.in[0].begin() + (i * H + h) * D, r.in[0].begin() + (i * H + h + 1) * D));
      const int64_t pos = prefill ? P + i : T - 1, span = sched.chain > 0 ? sched.chain * sched.block : T;
      kernels::attn_state_init(acc.data(), 1, D);
      for (int64_t c0 = 0; c0 <= pos; c0 += span) {
        kernels::attn_state_init(st.data(), 1, D);
        for (int64_t k0 = c0; k0 < std::min(c0 + span, pos + 1); k0 += sched.block) {
          const int64_t n = std::min({sched.block, c0 + span - k0, T - k0});
          kernels::attn_block(q.data(), k.data() + k0 * D, v.data() + k0 * D, st.data(), {1, 1, n, D, pos, k0, true, scale});
        }
        if (sched.chain > 0) kernels::attn_merge(acc.data(), st.data(), 1, D);
        else acc = st;
      }
      std::vector<bf16> y(static_cast<size_t>(D));
      kernels::attn_finalize(acc.data(), y.data(), 1, D);
      const auto yf = to_f32(y);
      std::copy(yf.begin(), yf.end(), r.out.begin() + (i * H + h) * D);
    }
  return r;
}

int64_t attention_outside(const AttnRun& r, const AttnSchedule& sched) { return outside(r.shape, r.in, r.out, sched); }

// Planted with the named mutants (core/mutants.h) through the real kernels.
using test_util::MutantScope;

TEST(Bf16Reference, HonestKernelsStayInsideOnTheSweeps) {
  for (const double s : {std::ldexp(1.0, -40), 1.0, std::ldexp(1.0, 40)}) {
    EXPECT_EQ(linear_outside(5, 96, 48, s), 0) << "gemm, scale " << s;
    EXPECT_EQ(linear_outside(1, 96, 48, s), 0) << "gemv, scale " << s;
    EXPECT_EQ(rmsnorm_outside(6, 256, s, 1e-6), 0) << "rmsnorm, scale " << s;
    EXPECT_EQ(rope_outside(s), 0) << "rope, scale " << s;
    EXPECT_EQ(silu_outside(4.0, s), 0) << "silu_mul, up scale " << s;
  }
  EXPECT_EQ(linear_outside(2, 16384, 64, 1.0), 0) << "long K, gemm";
  EXPECT_EQ(linear_outside(1, 16384, 64, 1.0), 0) << "long K, gemv";
  EXPECT_EQ(rmsnorm_outside(6, 2048, std::sqrt(1e-5), 1e-5), 0) << "mean square ~ eps";
  EXPECT_EQ(silu_outside(60.0, 1.0), 0) << "saturated sigmoid, e^-g past fp32";
}

TEST(Bf16Reference, PlantedKernelBugsLeaveElementsOutside) {
  {
    const MutantScope m(Mutant::linear_truncate);
    EXPECT_GT(linear_outside(5, 96, 48, 1.0), 100);
  }
  {
    const MutantScope m(Mutant::gemv_bf16_accum);
    EXPECT_GT(linear_outside(1, 16384, 64, 1.0), 10);
  }
  // rmsnorm_eps_x100 scales the epsilon where the tile kernel reads its
  // parameters, above rmsnorm_rows: planted here as the epsilon passed in.
  EXPECT_GT(rmsnorm_outside(6, 2048, std::sqrt(1e-5), 1e-5, 1e-3), 100);
  {
    const MutantScope m(Mutant::rmsnorm_mean_n_minus_1);
    EXPECT_GT(rmsnorm_outside(6, 256, 1.0, 1e-6), 100);
  }
  {
    const MutantScope m(Mutant::rope_truncate);
    EXPECT_GT(rope_outside(1.0), 1000);
  }
  {
    const MutantScope m(Mutant::silu_slope_2pct);
    EXPECT_GT(silu_outside(4.0, 1.0), 1000);
  }
}

// Scores of order 0.3 (q_scale 1), near ties (every |score| < 2^-4: q_scale
// 2^-6) and past the fp32 exp range (q_scale 128: scores of +-100, keys whose
// weight flushes to 0), ragged last blocks, a prefix P, decode chains merged.
TEST(Bf16Reference, HonestAttentionStaysInsideInItsBlockOrder) {
  for (const double qs : {1.0, std::ldexp(1.0, -6), 128.0}) {
    const AttnSchedule pre{16, 0}, dec{8, 2};
    EXPECT_EQ(attention_outside(run_attention(true, 40, 0, qs, pre), pre), 0) << "prefill, q scale " << qs;
    EXPECT_EQ(attention_outside(run_attention(true, 7, 5, qs, pre), pre), 0) << "prefill P=5, q scale " << qs;
    EXPECT_EQ(attention_outside(run_attention(false, 1, 39, qs, dec), dec), 0) << "decode, q scale " << qs;
    EXPECT_EQ(attention_outside(run_attention(false, 1, 39, qs, {8, 1}), {8, 1}), 0) << "decode chains of 1";
  }
  const OpShape att{"attention_decode", {{"T", 1}, {"heads", 1}, {"kv_heads", 1}, {"head_dim", 2}}, {}};
  const std::vector<float> two(2, 1.0f);
  EXPECT_THROW(bf16_reference(att, {two, two, two}), UsageError);  // no schedule
}

// The intervals are not vacuous: at every score range nearly every element
// has a single accepted bf16 value (lo == hi), so a kernel may differ from the
// reference only where the fp32 freedoms straddle a rounding midpoint.
TEST(Bf16Reference, AttentionIntervalsAreMostlyOneBf16Value) {
  for (const double qs : {1.0, std::ldexp(1.0, -6), 128.0})
    for (const bool prefill : {true, false}) {
      const AttnSchedule sc = prefill ? AttnSchedule{16, 0} : AttnSchedule{8, 2};
      const AttnRun r = run_attention(prefill, prefill ? 40 : 1, prefill ? 0 : 39, qs, sc);
      const std::vector<std::span<const float>> spans(r.in.begin(), r.in.end());
      const Bf16Bounds b = *bf16_reference(r.shape, spans, sc);
      size_t single = 0;
      for (size_t i = 0; i < b.lo.size(); ++i) single += b.lo[i] == b.hi[i] ? 1 : 0;
      const double frac = static_cast<double>(single) / static_cast<double>(b.lo.size());
      std::cout << (prefill ? "prefill" : "decode") << " q scale " << qs << ": " << frac
                << " of elements with one accepted value\n";
      EXPECT_GE(frac, 0.9) << (prefill ? "prefill" : "decode") << ", q scale " << qs;
    }
}

// The block order is part of the semantics: the weights of a block are
// rounded relative to that block's running max, so the same honest kernel
// judged in another order leaves elements outside at large scores.
TEST(Bf16Reference, AttentionJudgedInAnotherBlockOrderDisagrees) {
  const AttnRun r = run_attention(true, 40, 0, 128.0, {16, 0});
  EXPECT_GT(attention_outside(r, {8, 0}), 0);
}

// The cascade design (kernels/builders/attention.h, CascadePlan) run on the
// simulator lies inside the reference in its own order -- blocks of bk, one
// chain per stage, folded last stage first -- on ragged shapes with an empty
// stage and a prefix P; judged as a left fold (the order a reference that
// ignored the cascade would assume) it leaves elements outside at large
// scores, so the schedule, not luck, is what makes it exact.
TEST(Bf16Reference, CascadePrefillDesignIsExactInItsFoldOrder) {
  const auto spec = npu::DeviceSpec::preset("xdna2");
  struct Case {
    int64_t S, P;
    kernels::TileOptions tiles;
  };
  for (const Case& c : {Case{40, 0, {{"cascade", 4}, {"bq", 8}, {"bk", 8}}},
                        Case{13, 6, {{"cascade", 3}, {"qtiles", 3}, {"bq", 4}, {"bk", 4}}}}) {
    const OpShape s{"attention_prefill", {{"S", c.S}, {"P", c.P}, {"heads", 4}, {"kv_heads", 2}, {"head_dim", 64}}, {}};
    const kernels::BuiltOp built = kernels::op_builder(s.op).build(s, spec, c.tiles);
    const kernels::CascadePlan p = kernels::plan_attention_cascade(s, spec, built.tiles);
    const AttnSchedule own{p.bk, p.cps, true}, left{p.bk, p.cps, false};
    int64_t left_outside = 0;
    for (const double qs : {1.0, 128.0}) {
      const std::vector<std::vector<float>> in = {gauss_values(static_cast<size_t>(c.S * 4 * 64), qs, 61),
                                                  gauss_values(static_cast<size_t>((c.P + c.S) * 2 * 64), 1.0, 62),
                                                  gauss_values(static_cast<size_t>((c.P + c.S) * 2 * 64), 1.0, 63)};
      const auto got = kernels::run_op(built, in, spec).outputs.at(0);
      EXPECT_EQ(outside(s, in, got, own), 0) << s.key() << " q scale " << qs;
      left_outside += outside(s, in, got, left);
    }
    EXPECT_GT(left_outside, 0) << s.key();
  }
}

TEST(Bf16Reference, PlantedAttentionBugsLeaveElementsOutside) {
  const AttnSchedule pre{16, 0}, dec{8, 2};
  {
    const MutantScope m(Mutant::attn_sum_bf16);
    EXPECT_GT(attention_outside(run_attention(true, 40, 0, 1.0, pre), pre), 100) << "prefill";
    EXPECT_GT(attention_outside(run_attention(false, 1, 39, 1.0, dec), dec), 10) << "decode";
  }
  {
    const MutantScope m(Mutant::attn_sum_skip_last);
    EXPECT_GT(attention_outside(run_attention(true, 40, 0, 1.0, pre), pre), 100);
  }
  {
    const MutantScope m(Mutant::attn_mask_last_key);
    EXPECT_GT(attention_outside(run_attention(true, 40, 0, 1.0, pre), pre), 100);
  }
  {
    const MutantScope m(Mutant::attn_merge_weight);
    EXPECT_GT(attention_outside(run_attention(false, 1, 39, 1.0, dec), dec), 10);
  }
  const double scale = 1.01 / std::sqrt(64.0);  // the softmax scale 1 % off
  EXPECT_GT(attention_outside(run_attention(true, 40, 0, 4.0, pre, scale), pre), 100);
}

TEST(Bf16Reference, OpsWithoutAReferenceAndWrongSizes) {
  const OpShape add{"residual_add", {{"M", 1}, {"N", 4}}, {}};
  const std::vector<float> a(4, 1.0f);
  EXPECT_FALSE(bf16_reference(add, {a, a}).has_value());  // bit-exact already (NoiseModel)
  const OpShape lin{"linear", {{"M", 1}, {"K", 4}, {"N", 2}}, {}};
  EXPECT_THROW(bf16_reference(lin, {a, a}), UsageError);
}

}  // namespace
}  // namespace tessera::pipeline
