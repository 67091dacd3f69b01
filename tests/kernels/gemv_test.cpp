#include "tessera/kernels/gemv.h"

#include <algorithm>
#include <bit>
#include <span>

#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace tessera::kernels::test {
namespace {

// y = W x with W [n, k]: reference sums in double. The kernel's 16 lane
// partial sums and their fold give an fp32 summation error below
// k u32 sum|w||x| (each product passes through at most k/16 + 5 additions),
// and the bf16 output adds u_bf16 |y|.
void check(int64_t n, int64_t k, uint32_t seed) {
  auto w = random_bf16(n * k, seed, -1, 1), x = random_bf16(k, seed + 1, -2, 2);
  std::vector<bf16> y(n);
  run_kernel("gemv", {{"n", n}, {"k", k}}, {bytes_of(w), bytes_of(x), bytes_of(y)});
  std::vector<double> ref(n), bound(n);
  for (int64_t j = 0; j < n; ++j) {
    double s = 0, sa = 0;
    for (int64_t i = 0; i < k; ++i) {
      double p = double(bf16_to_f32(w[j * k + i])) * bf16_to_f32(x[i]);
      s += p;
      sa += std::fabs(p);
    }
    ref[j] = s;
    bound[j] = k * kU32 * sa + kUBf16 * (std::fabs(s) + k * kU32 * sa);
  }
  EXPECT_TRUE(within(to_f64(y), ref, bound)) << "n " << n << " k " << k;
}

TEST(Gemv, MatchesScalarReferenceOnRaggedShapes) {
  uint32_t seed = 100;
  for (int64_t n : {1, 5, 32, 33})
    for (int64_t k : {1, 15, 16, 17, 64, 577}) check(n, k, seed += 2);
}

// The order every gemv_block() path sums a row in (vec_ops.h dot()): 16 lane
// partial sums over the whole groups of 16 columns, folded in halves (lane c
// += lane c + 8, + 4, + 2, + 1), then the ragged tail as its own running sum,
// added last. Each product is rounded to f32 before it is added.
float dot_in_lane_order(const bf16* w, const bf16* x, int64_t k) {
  float lane[16] = {};
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    for (int c = 0; c < 16; ++c) {
      const float p = bf16_to_f32(w[i + c]) * bf16_to_f32(x[i + c]);
      lane[c] += p;
    }
  for (int half = 8; half > 0; half /= 2)
    for (int c = 0; c < half; ++c) lane[c] += lane[c + half];
  float tail = 0.0f;
  for (; i < k; ++i) {
    const float p = bf16_to_f32(w[i]) * bf16_to_f32(x[i]);
    tail += p;
  }
  return lane[0] + tail;
}

// Bit for bit, so the AVX2 rows (x widened in registers, rows sharing its
// loads) and the generic path cannot drift apart: a decode token's every
// GEMV goes through here, and the bitexact goldens hold its bits. The bytes
// a replay hands it to prefetch (shorter than, as long as, and longer than
// the rows' own reads) change nothing.
TEST(Gemv, BlockSumsEachRowInTheLaneOrder) {
  uint32_t seed = 300;
  const std::vector<std::byte> later(8192, std::byte{0x5a});
  for (int64_t n : {1, 2, 3, 4, 5, 7, 9})
    for (int64_t k : {1, 15, 16, 17, 128, 255, 256, 577}) {
      auto w = random_bf16(n * k, seed += 2, -1, 1), x = random_bf16(k, seed + 1, -2, 2);
      auto init = random_bf16(n, seed + 3, -4, 4);
      for (size_t ahead : {size_t{0}, size_t{100}, static_cast<size_t>(2 * n * k), later.size()})
        for (bool accumulate : {false, true}) {
          std::vector<float> acc(n);
          for (int64_t j = 0; j < n; ++j) acc[j] = bf16_to_f32(init[j]);
          const auto bytes = std::span(later).first(std::min(ahead, later.size()));
          gemv_block(w.data(), x.data(), acc.data(), n, k, accumulate, bytes, bytes.last(bytes.size() / 2));
          for (int64_t j = 0; j < n; ++j) {
            const float s = dot_in_lane_order(w.data() + j * k, x.data(), k);
            const float want = accumulate ? bf16_to_f32(init[j]) + s : s;
            EXPECT_EQ(std::bit_cast<uint32_t>(acc[j]), std::bit_cast<uint32_t>(want))
                << "n " << n << " k " << k << " row " << j << " accumulate " << accumulate << " ahead " << ahead;
          }
        }
    }
}

TEST(Gemv, KSplitAccumulatesLikeOneCall) {
  const int64_t n = 7, kb = 40;
  auto w0 = random_bf16(n * kb, 1), w1 = random_bf16(n * kb, 2);
  auto x0 = random_bf16(kb, 3), x1 = random_bf16(kb, 4);
  std::vector<float> acc(n, 99.0f);
  npu::KernelParams p{{"n", n}, {"k", kb}};
  run_kernel("gemv_init", p, {bytes_of(w0), bytes_of(x0), bytes_of(acc)});
  run_kernel("gemv_acc", p, {bytes_of(w1), bytes_of(x1), bytes_of(acc)});
  std::vector<double> ref(n), bound(n);
  for (int64_t j = 0; j < n; ++j) {
    double s = 0, sa = 0;
    for (int64_t i = 0; i < kb; ++i) {
      double a = double(bf16_to_f32(w0[j * kb + i])) * bf16_to_f32(x0[i]);
      double b = double(bf16_to_f32(w1[j * kb + i])) * bf16_to_f32(x1[i]);
      s += a + b;
      sa += std::fabs(a) + std::fabs(b);
    }
    ref[j] = s;
    bound[j] = 2 * kb * kU32 * sa;
  }
  EXPECT_TRUE(within(to_f64(acc), ref, bound));
}

// The GEMV kernels read their params in one pass (gemv.cpp dims_of): a
// missing, mistyped or out-of-range one is still refused by name, and x_off
// still selects the k block of a resident x.
TEST(Gemv, ParamsRefusedByNameAndXOffsetHonoured) {
  const int64_t n = 3, k = 8;
  auto w = random_bf16(n * k, 7), x = random_bf16(2 * k, 8);
  std::vector<bf16> y(n), y_off(n);
  auto refused = [&](const npu::KernelParams& p, const std::string& key) {
    try {
      run_kernel("gemv", p, {bytes_of(w), bytes_of(x), bytes_of(y)});
    } catch (const KernelArgError& e) {
      return std::string(e.what()).find("'" + key + "'") != std::string::npos;
    }
    return false;
  };
  EXPECT_TRUE(refused({{"n", n}}, "k"));
  EXPECT_TRUE(refused({{"k", k}, {"n", 0}}, "n"));
  EXPECT_TRUE(refused({{"k", k}, {"n", 2.5}}, "n"));
  EXPECT_TRUE(refused({{"k", k}, {"n", n}, {"x_off", std::string("8")}}, "x_off"));
  // x_off = k reads the second half of x: the same as a call on that half.
  std::vector<bf16> x_hi(x.begin() + k, x.end());
  run_kernel("gemv", {{"n", n}, {"k", k}, {"x_off", k}}, {bytes_of(w), bytes_of(x), bytes_of(y_off)});
  run_kernel("gemv", {{"n", n}, {"k", k}}, {bytes_of(w), bytes_of(x_hi), bytes_of(y)});
  for (int64_t j = 0; j < n; ++j) EXPECT_EQ(y_off[j].bits, y[j].bits) << j;
  run_kernel("gemv", {{"n", n}, {"k", k}}, {bytes_of(w), bytes_of(x), bytes_of(y)});
  bool differs = false;
  for (int64_t j = 0; j < n; ++j) differs = differs || y_off[j].bits != y[j].bits;
  EXPECT_TRUE(differs) << "x_off ignored";
}

// A replay calls KernelDef::replay, which skips run()'s checks, on args a
// checked run() accepted: it must write what run() writes, bit for bit (the
// GEMV at an x_off, the K-split steps, and the finalize they end with).
TEST(Gemv, ReplayEntryWritesWhatRunWrites) {
  const int64_t n = 5, k = 37, x_off = 3;
  struct Case {
    std::string kernel;
    npu::KernelParams params;
  };
  const std::vector<Case> cases = {{"gemv", {{"n", n}, {"k", k}, {"x_off", x_off}}},
                                   {"gemv_init", {{"n", n}, {"k", k}}},
                                   {"gemv_acc", {{"n", n}, {"k", k}, {"x_off", x_off}}},
                                   {"gemm_finalize", {{"count", n}}}};
  uint32_t seed = 900;
  for (const Case& c : cases) {
    const npu::KernelDef& def = registry().get(c.kernel);
    ASSERT_NE(def.replay, nullptr) << c.kernel;
    ASSERT_TRUE(def.bind) << c.kernel;
    const std::shared_ptr<const void> bound = def.bind(c.params);
    // Each arg as random bytes (bf16 / f32 values in range either way).
    std::vector<std::vector<bf16>> ran, replayed;
    if (c.kernel == "gemm_finalize") ran = {random_bf16(2 * n, seed++, -4, 4), random_bf16(n, seed++)};
    else ran = {random_bf16(n * k, seed++), random_bf16(x_off + k, seed++, -2, 2), random_bf16(2 * n, seed++, -4, 4)};
    replayed = ran;
    auto call = [&](std::vector<std::vector<bf16>>& args, bool replay) {
      std::vector<std::span<std::byte>> spans;
      for (auto& a : args) spans.push_back(bytes_of(a));
      call_kernel(def, c.params, bound.get(), std::move(spans), replay);
    };
    call(ran, false);
    call(replayed, true);
    for (size_t a = 0; a < ran.size(); ++a)
      for (size_t e = 0; e < ran[a].size(); ++e)
        ASSERT_EQ(ran[a][e].bits, replayed[a][e].bits) << c.kernel << " arg " << a << " element " << e;
  }
}

}  // namespace
}  // namespace tessera::kernels::test
