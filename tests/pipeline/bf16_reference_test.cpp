// BF16-exact reference (bf16_reference.h, issue 12): the tile kernels' bf16
// outputs lie inside the reference's interval on sweeps that stress the
// semantics (activations at 2^-40 and 2^40, a long K of 16384, rows with a
// mean square near epsilon, sigmoid saturation), and each planted rounding /
// slope / epsilon / accumulation bug (core/mutants.h) leaves elements outside.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/core/mutants.h"
#include "tessera/kernels/gemm.h"
#include "tessera/kernels/gemv.h"
#include "tessera/kernels/rmsnorm.h"
#include "tessera/kernels/rope.h"
#include "tessera/kernels/silu_mul.h"
#include "tessera/oracle/rope.h"
#include "tessera/pipeline/bf16_reference.h"

namespace tessera::pipeline {
namespace {

using kernels::OpShape;

// bf16-exact values ~N(0, scale^2) (sum of 4 uniforms), deterministic.
std::vector<float> values(size_t n, double scale, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t z = seed;
  auto uni = [&] {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(z >> 11) / 9007199254740992.0 - 0.5;
  };
  for (float& x : v) x = round_bf16(static_cast<float>(scale * (uni() + uni() + uni() + uni())));
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

int64_t outside(const OpShape& s, const std::vector<std::vector<float>>& in, const std::vector<float>& got) {
  const std::vector<std::span<const float>> spans(in.begin(), in.end());
  const auto b = bf16_reference(s, spans);
  EXPECT_TRUE(b.has_value()) << s.key();
  return b ? bf16_outside(*b, got).outside : -1;
}

// The GEMM tile (M > 1) or the GEMV tile (M = 1) over the whole K at once.
int64_t linear_outside(int64_t M, int64_t K, int64_t N, double scale) {
  const std::vector<float> x = values(static_cast<size_t>(M * K), scale, 11), w = values(static_cast<size_t>(N * K), 0.05, 12);
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
  const std::vector<float> x = values(static_cast<size_t>(rows * n), scale, 21), w = values(static_cast<size_t>(n), 1.0, 22);
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
  const std::vector<float> x = values(static_cast<size_t>(M * heads * D), scale, 31);
  std::vector<bf16> y(x.size());
  kernels::rope_rows(to_bf16(x).data(), t.cos.data(), t.sin.data(), y.data(), {M, heads, D});
  return outside({"rope", {{"M", M}, {"heads", heads}, {"head_dim", D}}, {}}, {x, t.cos, t.sin}, to_f32(y));
}

int64_t silu_outside(double gate_scale, double up_scale) {
  const size_t n = 8192;
  const std::vector<float> g = values(n, gate_scale, 41), u = values(n, up_scale, 42);
  std::vector<bf16> y(n);
  kernels::silu_mul(to_bf16(g).data(), to_bf16(u).data(), y.data(), static_cast<int64_t>(n));
  return outside({"silu_mul", {{"M", 1}, {"N", static_cast<int64_t>(n)}}, {}}, {g, u}, to_f32(y));
}

struct MutantScope {
  explicit MutantScope(Mutant m) { set_active_mutant(m); }
  ~MutantScope() { set_active_mutant(Mutant::none); }
};

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

TEST(Bf16Reference, OpsWithoutAReferenceAndWrongSizes) {
  const OpShape add{"residual_add", {{"M", 1}, {"N", 4}}, {}};
  const std::vector<float> a(4, 1.0f);
  EXPECT_FALSE(bf16_reference(add, {a, a}).has_value());  // bit-exact already (NoiseModel)
  const OpShape lin{"linear", {{"M", 1}, {"K", 4}, {"N", 2}}, {}};
  EXPECT_THROW(bf16_reference(lin, {a, a}), UsageError);
}

}  // namespace
}  // namespace tessera::pipeline
