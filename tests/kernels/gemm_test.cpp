#include "tessera/kernels/gemm.h"

#include <cstring>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace tessera::kernels::test {
namespace {

struct GemmRef {
  std::vector<double> value;  // exact sum of products (double is exact enough here)
  std::vector<double> abs;    // sum |a||b|, the scale of the fp32 summation error
};

// Scalar reference on B stored [k, n] or [n, k].
GemmRef reference(const std::vector<bf16>& a, const std::vector<bf16>& b, const GemmDims& d) {
  GemmRef r{std::vector<double>(d.m * d.n), std::vector<double>(d.m * d.n)};
  for (int64_t i = 0; i < d.m; ++i) {
    for (int64_t j = 0; j < d.n; ++j) {
      double s = 0, sa = 0;
      for (int64_t kk = 0; kk < d.k; ++kk) {
        double av = bf16_to_f32(a[i * d.k + kk]);
        double bv = bf16_to_f32(d.b_nk ? b[j * d.k + kk] : b[kk * d.n + j]);
        s += av * bv;
        sa += std::fabs(av * bv);
      }
      r.value[i * d.n + j] = s;
      r.abs[i * d.n + j] = sa;
    }
  }
  return r;
}

// Per element: bf16 products are exact in fp32, so the only accumulator error
// is the fp32 summation of K terms, |err| <= K * u32 * sum|a||b| (classic
// gamma_K bound, K = whole reduction length across k steps). Rounding the
// result to bf16 (RNE) adds at most u_bf16 * |value| (half an ulp), taken on
// the accumulated value, hence the second term also covers the first one.
std::vector<double> gemm_bound(const GemmRef& r, int64_t k_total, bool to_bf16) {
  std::vector<double> b(r.value.size());
  for (size_t i = 0; i < b.size(); ++i) {
    double acc_err = static_cast<double>(k_total) * kU32 * r.abs[i];
    b[i] = acc_err + (to_bf16 ? kUBf16 * (std::fabs(r.value[i]) + acc_err) : 0.0);
  }
  return b;
}

npu::KernelParams params(const GemmDims& d) {
  return {{"m", d.m}, {"k", d.k}, {"n", d.n}, {"b_layout", std::string(d.b_nk ? "nk" : "kn")}};
}

// Ragged sizes around the vector width and the mmul granule, both layouts.
TEST(Gemm, FusedMatchesScalarReferenceOnRaggedShapes) {
  uint32_t seed = 1;
  for (int64_t m : {1, 3, 4, 7, 32}) {
    for (int64_t k : {1, 5, 31, 64, 97}) {
      for (int64_t n : {1, 9, 32, 33}) {
        for (bool nk : {false, true}) {
          GemmDims d{m, k, n, nk};
          auto a = random_bf16(m * k, seed++, -2, 2);
          auto b = random_bf16(k * n, seed++, -2, 2);
          std::vector<bf16> c(m * n);
          run_kernel("gemm", params(d), {bytes_of(a), bytes_of(b), bytes_of(c)});
          GemmRef r = reference(a, b, d);
          EXPECT_TRUE(within(to_f64(c), r.value, gemm_bound(r, k, true)))
              << "m=" << m << " k=" << k << " n=" << n << " nk=" << nk;
        }
      }
    }
  }
}

// The simulator's results are part of every golden (tests/cli/bitexact_slow.sh):
// gemm_acc must give, bit for bit, what one fp32 accumulator per element gives
// when it adds the rounded products in K order, starting from acc, whatever
// register tiles the host body uses (rows around its 4-row blocks, columns
// around its 16 / 8 / 4-wide tiles). The error bound above cannot see an
// order change; this can (seen failing with a tile's K loop reversed).
TEST(Gemm, AccumulateIsTheOrderedFp32SumBitForBit) {
  uint32_t seed = 7;
  for (int64_t m : {1, 4, 6, 64}) {
    for (int64_t k : {1, 33, 64}) {
      for (int64_t n : {3, 4, 12, 16, 24, 36, 64}) {
        for (bool nk : {false, true}) {
          GemmDims d{m, k, n, nk};
          auto a = random_bf16(m * k, seed++, -2, 2);
          auto b = random_bf16(k * n, seed++, -2, 2);
          std::vector<float> acc(m * n);
          for (size_t i = 0; i < acc.size(); ++i) acc[i] = static_cast<float>(i % 7) * 0.375f - 1.0f;
          std::vector<float> want = acc;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              for (int64_t kk = 0; kk < k; ++kk) {
                const float prod = bf16_to_f32(a[i * k + kk]) * bf16_to_f32(nk ? b[j * k + kk] : b[kk * n + j]);
                want[i * n + j] += prod;
              }
          run_kernel("gemm_acc", params(d), {bytes_of(a), bytes_of(b), bytes_of(acc)});
          EXPECT_EQ(0, std::memcmp(acc.data(), want.data(), acc.size() * sizeof(float)))
              << "m=" << m << " k=" << k << " n=" << n << " nk=" << nk;
        }
      }
    }
  }
}

// The accumulator kept across k steps: init on the first block, acc on the
// rest, finalize once; equals one GEMM over the concatenated K.
TEST(Gemm, AccumulatesAcrossKSteps) {
  const int64_t m = 5, n = 19, kb = 24, steps = 3;
  GemmDims whole{m, kb * steps, n, true};
  auto a = random_bf16(m * whole.k, 11, -1, 1);
  auto b = random_bf16(whole.k * n, 12, -1, 1);  // [n, K]
  std::vector<float> acc(m * n, 123.0f);  // garbage: init must overwrite it
  for (int64_t s = 0; s < steps; ++s) {
    // Slice the k block out of A [m, K] and B [n, K] as a builder's DMA would.
    std::vector<bf16> as(m * kb), bs(n * kb);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t kk = 0; kk < kb; ++kk) as[i * kb + kk] = a[i * whole.k + s * kb + kk];
    for (int64_t j = 0; j < n; ++j)
      for (int64_t kk = 0; kk < kb; ++kk) bs[j * kb + kk] = b[j * whole.k + s * kb + kk];
    GemmDims step{m, kb, n, true};
    run_kernel(s == 0 ? "gemm_init" : "gemm_acc", params(step),
               {bytes_of(as), bytes_of(bs), bytes_of(acc)});
  }
  GemmRef r = reference(a, b, whole);
  EXPECT_TRUE(within(to_f64(acc), r.value, gemm_bound(r, whole.k, false)));
  std::vector<bf16> c(m * n);
  run_kernel("gemm_finalize", {{"count", m * n}}, {bytes_of(acc), bytes_of(c)});
  EXPECT_TRUE(within(to_f64(c), r.value, gemm_bound(r, whole.k, true)));
}

// The bound is tight enough to see a finalize that truncates instead of
// rounding to nearest even (error up to a full bf16 ulp instead of half).
TEST(Gemm, BoundRejectsTruncatingFinalize) {
  GemmDims d{16, 64, 16, false};
  auto a = random_bf16(d.m * d.k, 21, -1, 1);
  auto b = random_bf16(d.k * d.n, 22, -1, 1);
  std::vector<float> acc(d.m * d.n);
  gemm_block(a.data(), b.data(), acc.data(), d, false);
  std::vector<double> truncated(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    truncated[i] = bf16_to_f32(bf16{static_cast<uint16_t>(std::bit_cast<uint32_t>(acc[i]) >> 16)});
  }
  GemmRef r = reference(a, b, d);
  EXPECT_FALSE(within(truncated, r.value, gemm_bound(r, d.k, true)));
}

// The replay entries (params bound once) write every bit run() writes, for
// gemm_init, gemm_acc and the fused gemm, with operand offsets and both B
// layouts on a ragged shape; gemm_acc adds to what is in acc already.
TEST(Gemm, ReplayEntriesWriteWhatRunWrites) {
  for (const bool nk : {false, true})
    for (const char* kernel : {"gemm_init", "gemm_acc", "gemm"}) {
      SCOPED_TRACE(std::string(kernel) + (nk ? " nk" : " kn"));
      const GemmDims d{5, 24, 19, nk};
      npu::KernelParams p = params(d);
      p["a_off"] = int64_t{3};
      p["b_off"] = int64_t{7};
      const npu::KernelDef& def = registry().get(kernel);
      ASSERT_NE(def.replay, nullptr);
      ASSERT_TRUE(def.bind);
      const std::shared_ptr<const void> bound = def.bind(p);
      auto a = random_bf16(3 + d.m * d.k, 31, -1, 1), b = random_bf16(7 + d.k * d.n, 32, -1, 1);
      const bool fused = std::string(kernel) == "gemm";
      const std::vector<bf16> start = random_bf16(d.m * d.n, 33);  // what gemm_acc adds to
      std::vector<float> acc_ran(start.size());
      for (size_t i = 0; i < start.size(); ++i) acc_ran[i] = bf16_to_f32(start[i]);
      std::vector<float> acc_replayed = acc_ran;
      std::vector<bf16> c_ran(d.m * d.n), c_replayed(d.m * d.n);
      auto out = [&](bool replayed) {
        return replayed ? (fused ? bytes_of(c_replayed) : bytes_of(acc_replayed))
                        : (fused ? bytes_of(c_ran) : bytes_of(acc_ran));
      };
      call_kernel(def, p, bound.get(), {bytes_of(a), bytes_of(b), out(false)}, false);
      call_kernel(def, p, bound.get(), {bytes_of(a), bytes_of(b), out(true)}, true);
      EXPECT_EQ(0, std::memcmp(acc_ran.data(), acc_replayed.data(), acc_ran.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(c_ran.data(), c_replayed.data(), c_ran.size() * sizeof(bf16)));
    }
}

TEST(Gemm, RejectsShortArgsAndBadLayout) {
  GemmDims d{4, 8, 4, false};
  auto a = random_bf16(d.m * d.k, 1), b = random_bf16(d.k * d.n - 1, 2);
  std::vector<bf16> c(d.m * d.n);
  EXPECT_THROW(run_kernel("gemm", params(d), {bytes_of(a), bytes_of(b), bytes_of(c)}),
               KernelArgError);
  npu::KernelParams p = params(d);
  p["b_layout"] = std::string("mn");
  EXPECT_THROW(tile_kernel_l1_bytes("gemm", p), KernelArgError);
}

TEST(Gemm, CostAndFootprint) {
  npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2-sourced");
  spec.mmul_loop_overhead_cycles = 0;
  GemmDims d{64, 64, 64, false};
  // 64^3 MACs at 256 MAC/cycle plus the call overhead, with no loop overhead.
  EXPECT_EQ(gemm_cycles(d, spec).total(), spec.core_call_overhead_cycles + 64 * 64 * 64 / 256);
  // A ragged edge costs a whole granule: n = 61 pays as n = 64.
  EXPECT_EQ(gemm_cycles({64, 64, 61, false}, spec).total(), gemm_cycles(d, spec).total());
  EXPECT_EQ(gemm_l1_bytes(d, false), 2 * (64 * 64 * 2) + 4 * 64 * 64);
}

// MAC efficiency depends on the tile's shape: each inner K loop over a 2 x 2
// block of 4x8 outputs pays mmul_loop_overhead_cycles, so the same MACs in a
// short-K tile cost more than in a long-K one, by exactly the extra loops.
TEST(Gemm, ShortInnerLoopsAreLessEfficient) {
  npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2-sourced");
  spec.mmul_loop_overhead_cycles = 20;
  const double peak = 64.0 * 64 * 64 / 256;  // cycles of 64^3 MACs at peak
  // k = 64 in one call: (64/8) x (64/16) = 32 inner loops.
  const double long_k = gemm_cycles({64, 64, 64, false}, spec).mac;
  EXPECT_DOUBLE_EQ(long_k, peak + 32 * 20);
  // The same MACs as two k = 32 calls: twice the loops.
  const double short_k = 2 * gemm_cycles({64, 32, 64, false}, spec).mac;
  EXPECT_DOUBLE_EQ(short_k, peak + 64 * 20);
  EXPECT_GT(short_k, long_k);
}

}  // namespace
}  // namespace tessera::kernels::test
