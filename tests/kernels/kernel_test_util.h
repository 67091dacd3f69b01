#pragma once
// Shared by the kernel tests: deterministic bf16 data, running a kernel through
// the registry on byte spans (as the simulator does), and an elementwise check
// against a scalar reference with a per-element bound that reports the worst
// element (gemma.cpp ops/matmul_test.cc style).
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/core/bf16.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/kernels/tile_kernels.h"
#include "tessera/npu/kernel_registry.h"

namespace tessera::kernels::test {

// Unit roundoffs: fp32 has 24 significant bits, bf16 8 (core/bf16.h kBf16Eps).
inline constexpr double kU32 = 0x1p-24;
inline constexpr double kUBf16 = kBf16Eps;

inline std::vector<bf16> random_bf16(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<bf16> v(n);
  for (auto& x : v) x = f32_to_bf16(dist(rng));
  return v;
}

// bf16-representable values as floats, so that the only differences from the
// fp32 oracle are fp32 accumulation order and the final bf16 rounding.
inline std::vector<float> bf16_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  auto v = random_bf16(n, seed, lo, hi);
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = bf16_to_f32(v[i]);
  return f;
}

inline OpShape linear_shape(int64_t M, int64_t K, int64_t N) {
  return OpShape{"linear", {{"M", M}, {"K", K}, {"N", N}}, {}};
}

inline std::vector<double> to_f64(std::span<const bf16> v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(v[i]);
  return out;
}
inline std::vector<double> to_f64(std::span<const float> v) {
  return std::vector<double>(v.begin(), v.end());
}

template <class T>
std::span<std::byte> bytes_of(std::vector<T>& v) {
  return std::as_writable_bytes(std::span<T>(v));
}

inline npu::KernelRegistry& registry() {
  static npu::KernelRegistry* r = [] {
    auto* reg = new npu::KernelRegistry;
    register_tile_kernels(*reg);
    return reg;
  }();
  return *r;
}

// One call as a replay makes it (KernelDef::replay on params bound once) or
// as a checked run() does, on the same bound params: the replay tests
// compare the two.
inline void call_kernel(const npu::KernelDef& def, const npu::KernelParams& params, const void* bound,
                        std::vector<std::span<std::byte>> args, bool replay) {
  npu::KernelInvocation inv;
  inv.args = std::move(args);
  inv.params = &params;
  inv.bound = bound;
  if (replay) def.replay(inv);
  else def.run(inv);
}

inline void run_kernel(const std::string& name, const npu::KernelParams& params,
                       std::vector<std::span<std::byte>> args) {
  const npu::KernelDef& def = registry().get(name);
  npu::KernelInvocation inv;
  inv.args = std::move(args);
  inv.params = &params;
  // As the simulator calls it: params bound once where the kernel binds them.
  const std::shared_ptr<const void> bound = def.bind ? def.bind(params) : nullptr;
  inv.bound = bound.get();
  def.run(inv);
}

// The linear's per-element bound against the FP32 oracle `ref` (M x N, x M x K,
// w N x K): u_bf16 |ref| (output rounding) + 2 K u_32 sum_k |x w| (fp32 sums).
inline std::vector<double> linear_bound(std::span<const float> x, std::span<const float> w,
                                        std::span<const float> ref, int64_t M, int64_t K, int64_t N) {
  std::vector<double> bound(ref.size());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double norm = 0;
      for (int64_t k = 0; k < K; ++k) norm += std::fabs(double{x[i * K + k]} * w[j * K + k]);
      bound[i * N + j] = kUBf16 * std::fabs(ref[i * N + j]) + 2.0 * K * kU32 * norm;
    }
  return bound;
}

// Checks |got[i] - ref[i]| <= bound[i] for every i (NaN never passes) and, on
// failure, names the worst element: index, values, error, bound and ratio.
inline ::testing::AssertionResult within(std::span<const double> got,
                                         std::span<const double> ref,
                                         std::span<const double> bound) {
  if (got.size() != ref.size() || ref.size() != bound.size()) {
    return ::testing::AssertionFailure()
           << "size mismatch " << got.size() << " " << ref.size() << " " << bound.size();
  }
  size_t worst = 0, bad = 0;
  double worst_ratio = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(got[i] - ref[i]);
    double ratio = std::isnan(err) ? INFINITY : (err == 0 ? 0.0 : err / bound[i]);
    if (!(err <= bound[i])) ++bad;
    if (ratio > worst_ratio || std::isnan(ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  std::string msg = fmt::format(
      "{} of {} elements out of bound; worst [{}]: got {:.9g} ref {:.9g} err {:.3g} bound "
      "{:.3g} (err/bound {:.3g})",
      bad, got.size(), worst, got[worst], ref[worst], std::fabs(got[worst] - ref[worst]),
      bound[worst], worst_ratio);
  if (bad) return ::testing::AssertionFailure() << msg;
  return ::testing::AssertionSuccess() << msg;
}

}  // namespace tessera::kernels::test
