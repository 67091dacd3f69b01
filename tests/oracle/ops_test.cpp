// Unit tests of the oracle's building blocks against hand-computed values and
// against deliberately naive scalar loops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <numbers>
#include <random>
#include <vector>

#include <cblas.h>
#include <gtest/gtest.h>

#include "tessera/core/quant_blocks.h"
#include "tessera/oracle/ops.h"
#include "tessera/oracle/rope.h"

namespace tessera::oracle {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<float> v(n);
  // Values from the raw generator, not a std distribution, so they are the
  // same on every standard library.
  for (float& x : v) x = static_cast<float>(g()) / 4294967296.0f * 2.0f - 1.0f;
  return v;
}

model::ModelConfig rope_config(bool llama3) {
  model::ModelConfig c;
  c.name = "rope-test";
  c.head_dim = 8;
  c.rope_theta = 10000.0;
  if (llama3) c.rope_scaling = {model::RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 64};
  return c;
}

TEST(Rope, InverseFrequenciesPlain) {
  // theta^(-2i/d) for d = 8: 1, 0.1, 0.01, 0.001.
  const auto inv = rope_inv_freq(rope_config(false));
  const std::vector<double> want = {1.0, 0.1, 0.01, 0.001};
  ASSERT_EQ(inv.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(inv[i], want[i], want[i] * 1e-6) << i;
}

TEST(Rope, InverseFrequenciesLlama3) {
  // factor 8, low 1, high 4, original 64: wavelengths 2pi*{1, 10, 100, 1000}.
  // 6.28 < 64/4 keeps 1; 628 and 6283 > 64/1 are divided by 8; 62.8 lies in the
  // band: smooth = (64/62.83 - 1)/(4 - 1) = 0.0061974, so
  // (1 - smooth) * 0.1/8 + smooth * 0.1 = 0.0130423.
  const auto inv = rope_inv_freq(rope_config(true));
  const std::vector<double> want = {1.0, 0.0130422560, 0.00125, 0.000125};
  ASSERT_EQ(inv.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(inv[i], want[i], want[i] * 1e-6) << i;
}

TEST(Rope, TableHoldsCosSinOfPositionTimesFrequency) {
  const auto t = rope_table(rope_config(true), 3, 4);  // positions 3..6
  const std::vector<double> inv = {1.0, 0.0130422560, 0.00125, 0.000125};
  for (size_t i = 0; i < inv.size(); ++i) {
    EXPECT_NEAR(t.cos_row(5)[i], std::cos(5 * inv[i]), 1e-6) << i;
    EXPECT_NEAR(t.sin_row(5)[i], std::sin(5 * inv[i]), 1e-6) << i;
  }
  EXPECT_NEAR(t.cos_row(5)[0], 0.2836622, 1e-6);  // cos(5)
  EXPECT_NEAR(t.sin_row(5)[0], -0.9589243, 1e-6);
  EXPECT_ANY_THROW(t.cos_row(7));
  EXPECT_ANY_THROW(t.sin_row(2));
}

TEST(Rope, RotateHalfPairsElementIWithIPlusHalf) {
  // HF rotate_half: x' = x*cos + cat(-x2, x1)*sin. An interleaved (GPT-J) pairing
  // of (0,1), (2,3) would give different numbers.
  std::vector<float> x = {1, 2, 3, 4};
  const float c[2] = {std::cos(0.5f), std::cos(0.25f)};
  const float s[2] = {std::sin(0.5f), std::sin(0.25f)};
  apply_rope(x.data(), 1, 4, c, s);
  EXPECT_FLOAT_EQ(x[0], 1 * c[0] - 3 * s[0]);
  EXPECT_FLOAT_EQ(x[1], 2 * c[1] - 4 * s[1]);
  EXPECT_FLOAT_EQ(x[2], 3 * c[0] + 1 * s[0]);
  EXPECT_FLOAT_EQ(x[3], 4 * c[1] + 2 * s[1]);
}

TEST(Rope, ScoresDependOnlyOnRelativePosition) {
  const auto cfg = rope_config(true);
  const auto t = rope_table(cfg, 0, 64);
  const auto q0 = random_vector(8, 1), k0 = random_vector(8, 2);
  auto score = [&](int64_t m, int64_t n) {
    auto q = q0, k = k0;
    apply_rope(q.data(), 1, 8, t.cos_row(m), t.sin_row(m));
    apply_rope(k.data(), 1, 8, t.cos_row(n), t.sin_row(n));
    double d = 0;
    for (int i = 0; i < 8; ++i) d += q[i] * k[i];
    return d;
  };
  EXPECT_NEAR(score(10, 3), score(40, 33), 1e-4);
  EXPECT_NEAR(score(7, 7), score(63, 63), 1e-4);
}

TEST(Ops, RmsNormHandValues) {
  // mean(x^2) = 30/4 = 7.5; y = w * x / sqrt(7.5 + eps).
  const std::vector<float> x = {1, 2, 3, 4, -2, 0, 0, 0};
  const std::vector<float> w = {1, 1, 2, 0.5};
  std::vector<float> y(8);
  rms_norm(x.data(), 2, 4, w.data(), 1e-6, y.data());
  const double inv = 1 / std::sqrt(7.5 + 1e-6);
  EXPECT_NEAR(y[0], 1 * inv, 1e-6);
  EXPECT_NEAR(y[2], 2 * 3 * inv, 1e-6);
  EXPECT_NEAR(y[3], 0.5 * 4 * inv, 1e-6);
  // Second row: mean(x^2) = 1, so y = w * x / sqrt(1 + eps).
  EXPECT_NEAR(y[4], -2 / std::sqrt(1 + 1e-6), 1e-6);
  EXPECT_EQ(y[5], 0.0f);
}

TEST(Ops, SoftmaxAndSwiglu) {
  std::vector<float> p = {0.0f, std::log(2.0f), std::log(5.0f), 1000.0f - 1000.0f};
  softmax(p);
  EXPECT_NEAR(p[0], 1 / 9.0, 1e-7);
  EXPECT_NEAR(p[1], 2 / 9.0, 1e-7);
  EXPECT_NEAR(p[2], 5 / 9.0, 1e-7);
  std::vector<float> big = {1000.0f, 1000.0f};  // no overflow
  softmax(big);
  EXPECT_FLOAT_EQ(big[0], 0.5f);
  const float gate[3] = {0.0f, 2.0f, -3.0f}, up[3] = {5.0f, 0.5f, 2.0f};
  float act[3];
  swiglu(gate, up, 3, act);
  EXPECT_FLOAT_EQ(act[0], 0.0f);
  EXPECT_NEAR(act[1], 2.0 / (1 + std::exp(-2.0)) * 0.5, 1e-6);
  EXPECT_NEAR(act[2], -3.0 / (1 + std::exp(3.0)) * 2.0, 1e-6);
}

TEST(Ops, LinearMatchesScalarLoopForMatrixAndVectorPaths) {
  const int64_t in = 13, out = 7;
  const auto w = random_vector(in * out, 3), b = random_vector(out, 4);
  for (int64_t rows : {1, 5}) {
    const auto x = random_vector(rows * in, 5);
    std::vector<float> y(rows * out);
    linear(x.data(), rows, in, w.data(), out, b.data(), y.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double want = b[o];
        for (int64_t i = 0; i < in; ++i) want += double(x[r * in + i]) * w[o * in + i];
        EXPECT_NEAR(y[r * out + o], want, 1e-5) << rows << " rows, " << r << "," << o;
      }
  }
}

TEST(Ops, GqaMapsContiguousGroupsOfQueryHeads) {
  // 8 query heads over 2 KV heads: heads 0-3 read KV 0, heads 4-7 read KV 1.
  const std::vector<int64_t> want = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int64_t h = 0; h < 8; ++h) EXPECT_EQ(kv_head_for(h, 8, 2), want[h]) << h;
  for (int64_t h = 0; h < 4; ++h) EXPECT_EQ(kv_head_for(h, 4, 4), h);  // MHA
}

// Plain attention: for each row and head, scores over visible keys, softmax,
// weighted sum of values; the KV head is q_head / group (HF repeat_kv).
std::vector<float> naive_attention(const AttentionShape& s, const std::vector<float>& q,
                                   const std::vector<float>& k, const std::vector<float>& v) {
  const int64_t D = s.head_dim, qs = s.num_heads * D, ks = s.num_kv_heads * D;
  const int64_t group = s.num_heads / s.num_kv_heads;
  std::vector<float> out(s.rows * qs);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t h = 0; h < s.num_heads; ++h) {
      const int64_t kvh = h / group, visible = s.first_pos + r + 1;
      std::vector<double> p(visible);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < visible; ++j) {
        double d = 0;
        for (int64_t i = 0; i < D; ++i) d += double(q[r * qs + h * D + i]) * k[j * ks + kvh * D + i];
        p[j] = d / std::sqrt(double(D));
        mx = std::max(mx, p[j]);
      }
      for (auto& x : p) sum += (x = std::exp(x - mx));
      for (int64_t i = 0; i < D; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < visible; ++j) acc += p[j] / sum * v[j * ks + kvh * D + i];
        out[r * qs + h * D + i] = static_cast<float>(acc);
      }
    }
  return out;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]));
  return m;
}

struct AttentionCase {
  AttentionShape s;
  std::vector<float> q, k, v;
};

AttentionCase make_case(int64_t rows, int64_t first_pos) {
  AttentionCase c{{rows, first_pos, 8, 2, 6}, {}, {}, {}};
  c.q = random_vector(rows * 8 * 6, 11);
  c.k = random_vector((first_pos + rows) * 2 * 6, 12);
  c.v = random_vector((first_pos + rows) * 2 * 6, 13);
  for (auto& x : c.q) x *= 3;  // peaked softmax so a wrong key set shows
  return c;
}

TEST(Ops, CausalAttentionMatchesNaiveForPrefillAndDecode) {
  for (auto [rows, first] : {std::pair<int64_t, int64_t>{5, 0}, {5, 3}, {1, 9}}) {
    auto c = make_case(rows, first);
    std::vector<float> out(rows * 8 * 6);
    causal_attention(c.s, c.q.data(), c.k.data(), c.v.data(), out.data());
    EXPECT_LT(max_diff(out, naive_attention(c.s, c.q, c.k, c.v)), 1e-5)
        << rows << " rows at " << first;
  }
}

TEST(Ops, PlantedGqaMappingBugIsCaught) {
  // h % num_kv_heads interleaves heads over KV heads instead of grouping them;
  // the comparison above must notice.
  auto c = make_case(4, 2);
  std::vector<float> out(4 * 8 * 6);
  auto wrong = [](int64_t h, int64_t, int64_t kv) { return h % kv; };
  causal_attention(c.s, c.q.data(), c.k.data(), c.v.data(), out.data(), wrong);
  EXPECT_GT(max_diff(out, naive_attention(c.s, c.q, c.k, c.v)), 1e-2);
}

TEST(Ops, CausalMaskHidesFutureKeys) {
  // Changing keys/values after the last visible position changes nothing.
  auto c = make_case(3, 0);
  std::vector<float> a(3 * 48), b(3 * 48);
  causal_attention(c.s, c.q.data(), c.k.data(), c.v.data(), a.data());
  for (size_t i = 2 * 12; i < c.v.size(); ++i) c.v[i] += 100.0f;  // position 2
  causal_attention(c.s, c.q.data(), c.k.data(), c.v.data(), b.data());
  for (size_t i = 0; i < 2 * 48; ++i) EXPECT_EQ(a[i], b[i]) << i;  // rows 0 and 1
  EXPECT_NE(a[2 * 48], b[2 * 48]);
}

}  // namespace
}  // namespace tessera::oracle

namespace tessera::oracle {
namespace {

// linear() on a bf16 / f16 matrix must give every bit of linear() on its f32
// widening, for ragged shapes: row counts off the 4-row sgemv body and off the
// block size, widths that make one block span 4 rows and many.
TEST(Linear, SixteenBitWeightsMatchTheirWideningBitForBit) {
  for (const DType dtype : {DType::bf16, DType::f16})
    for (const int64_t in : {7, 64, 577, 2304, 4100})
      for (const int64_t out : {1, 3, 5, 37, 130, 1001})
        for (const int64_t rows : {1, 3}) {
          const auto wv = random_vector(static_cast<size_t>(out * in), 11);
          const Tensor w = Tensor::from_f32({out, in}, wv).to(dtype);
          const std::vector<float> wide = w.to_f32_vector();
          const auto x = random_vector(static_cast<size_t>(rows * in), 12);
          const auto bias = random_vector(static_cast<size_t>(out), 13);
          std::vector<float> got(static_cast<size_t>(rows * out)), want(got.size());
          linear(x.data(), rows, in, w, out, bias.data(), got.data());
          linear(x.data(), rows, in, wide.data(), out, bias.data(), want.data());
          EXPECT_EQ(got, want) << dtype_name(dtype) << " in " << in << " out " << out << " rows " << rows;
        }
}

// Decode's gemv() sums every row in dot_reference()'s order, bit for bit, on
// f32 and bf16 weights (both bf16 kernels: AVX2 and baseline), for widths off the 16-lane body (tails of 1-15
// columns) and row counts off the 4-row groups: so no ISA, BLAS build or
// thread count moves a bit of the oracle's decode. The comparison can fail: a
// plain left-to-right sum gives other bits on these rows (checked below).
TEST(Linear, GemvSumsEachRowInTheReferenceOrder) {
  bool plain_differs = false;
  for (const int64_t in : {1, 7, 16, 17, 64, 577, 2304, 4100})
    for (const int64_t out : {1, 3, 5, 37, 130}) {
      const auto x = random_vector(static_cast<size_t>(in), 31);
      const auto wv = random_vector(static_cast<size_t>(out * in), 32);
      const Tensor w16 = Tensor::from_f32({out, in}, wv).to(DType::bf16);
      const std::vector<float> w16_wide = w16.to_f32_vector();
      std::vector<float> got(static_cast<size_t>(out)), got16(got.size()), baseline(got.size());
      gemv(x.data(), in, wv.data(), out, got.data());
      linear(x.data(), 1, in, w16, out, nullptr, got16.data());
      detail::gemv_bf16_baseline(x.data(), in, w16.as<bf16>().data(), out, baseline.data());
      EXPECT_EQ(baseline, got16) << "the kernel for CPUs without AVX2, " << in << " x " << out;
      for (int64_t o = 0; o < out; ++o) {
        const float* row = wv.data() + o * in;
        EXPECT_EQ(got[static_cast<size_t>(o)], dot_reference(x.data(), row, in)) << in << " x " << out << " row " << o;
        EXPECT_EQ(got16[static_cast<size_t>(o)], dot_reference(x.data(), w16_wide.data() + o * in, in))
            << "bf16 " << in << " x " << out << " row " << o;
        float plain = 0.0f;
        for (int64_t k = 0; k < in; ++k) plain += row[k] * x[static_cast<size_t>(k)];
        plain_differs = plain_differs || plain != got[static_cast<size_t>(o)];
      }
    }
  EXPECT_TRUE(plain_differs) << "a left-to-right sum matched every row: the test cannot see the order";
}

// The reference order's rounding error is within its bound: each lane adds
// ceil(in / 16) products, then 4 fold levels, so a row's error is at most
// (ceil(in / 16) + 5) u sum |w x| (u = 2^-24, first order; the product's own
// rounding is the + 1). A dropped column is far outside it.
TEST(Linear, ReferenceOrderErrorIsWithinItsBound) {
  for (const int64_t in : {15, 576, 2048, 8192}) {
    const auto x = random_vector(static_cast<size_t>(in), 41);
    const auto w = random_vector(static_cast<size_t>(in), 42);
    double exact = 0.0, magnitude = 0.0;
    for (int64_t k = 0; k < in; ++k) {
      exact += static_cast<double>(w[static_cast<size_t>(k)]) * x[static_cast<size_t>(k)];
      magnitude += std::abs(static_cast<double>(w[static_cast<size_t>(k)]) * x[static_cast<size_t>(k)]);
    }
    const double bound = static_cast<double>((in + 15) / 16 + 5) * std::ldexp(1.0, -24) * magnitude;
    EXPECT_LE(std::abs(dot_reference(x.data(), w.data(), in) - exact), bound) << in;
    // Planted: the column of the largest product dropped.
    auto missing = w;
    size_t largest = 0;
    for (size_t k = 0; k < w.size(); ++k)
      if (std::abs(w[k] * x[k]) > std::abs(w[largest] * x[largest])) largest = k;
    missing[largest] = 0.0f;
    EXPECT_GT(std::abs(dot_reference(x.data(), missing.data(), in) - exact), bound) << in;
  }
}

// A prefill (sgemm) must not depend on the BLAS thread count either, 2+ threads.
TEST(Linear, PrefillIsTheSameOnEveryBlasThreadCount) {
  const int saved = openblas_get_num_threads();
  const int64_t in = 96;
  for (const int64_t out : {150, 1001}) {
    const auto w = random_vector(static_cast<size_t>(out * in), 21);
    const Tensor w16 = Tensor::from_f32({out, in}, w).to(DType::bf16);
    const auto x = random_vector(static_cast<size_t>(7 * in), 22);
    auto run = [&](int threads) {
      openblas_set_num_threads(threads);
      std::vector<float> y(static_cast<size_t>(out) * 14);
      linear(x.data(), 7, in, w.data(), out, nullptr, y.data());
      linear(x.data(), 7, in, w16, out, nullptr, y.data() + 7 * out);
      return y;
    };
    const auto two = run(2);
    // Known gap: a 1-thread OpenBLAS sgemm (its small-matrix path) sums
    // otherwise than 2+ threads do, so a prefill still differs on one core.
    for (const int threads : {3, 4}) EXPECT_EQ(run(threads), two) << out << " on " << threads << " BLAS threads";
  }
  openblas_set_num_threads(saved);
}

TEST(Linear, RowsToF32WidensExactlyAndRefusesRowsOutOfRange) {
  const auto v = random_vector(6 * 5, 3);
  const Tensor w = Tensor::from_f32({6, 5}, v).to(DType::bf16);
  std::vector<float> got(10);
  rows_to_f32(w, 4, 2, got.data());
  const std::vector<float> all = w.to_f32_vector();
  EXPECT_EQ(got, std::vector<float>(all.begin() + 20, all.end()));
  EXPECT_ANY_THROW(rows_to_f32(w, 5, 2, got.data()));
}

}  // namespace
}  // namespace tessera::oracle
