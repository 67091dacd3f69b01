// Plain C++ bodies of the microbenchmark kernels. Cycle costs follow the work on
// an AIE-ML tile as the DeviceSpec states it: the matrix unit with its
// per-inner-loop overhead, GEMV on the vector unit at gemv_macs_per_cycle,
// copies at one vector store per cycle.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tessera/core/bf16.h"
#include "tessera/npu/designs.h"
#include "tessera/npu/errors.h"

namespace tessera::npu {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t param(const KernelParams& p, const char* key) {
  auto it = p.find(key);
  if (it == p.end() || !std::holds_alternative<int64_t>(it->second))
    throw_error<DesignError>("kernel parameter '{}' missing or not an integer", key);
  return std::get<int64_t>(it->second);
}

void need(const KernelInvocation& inv, size_t arg, int64_t bytes, const char* kernel) {
  if (inv.args.size() <= arg)
    throw_error<DesignError>("kernel {}: argument {} missing ({} given)", kernel, arg,
                             inv.args.size());
  if (static_cast<int64_t>(inv.args[arg].size()) < bytes)
    throw_error<DesignError>("kernel {}: argument {} has {} bytes, needs {}", kernel, arg,
                             inv.args[arg].size(), bytes);
}

int64_t vector_bytes(const DeviceSpec& s) { return 2 * int64_t{s.vector_lanes_bf16}; }

// Element conversions through memcpy: L1 objects carry no alignment guarantee
// for typed access.
void load_bf16(std::span<const std::byte> src, std::vector<float>& dst, int64_t n) {
  std::vector<bf16> tmp(static_cast<size_t>(n));
  std::memcpy(tmp.data(), src.data(), static_cast<size_t>(n) * 2);
  dst.resize(static_cast<size_t>(n));
  bf16_to_f32(tmp, dst);
}

void store_bf16(const std::vector<float>& src, std::span<std::byte> dst, int64_t offset) {
  std::vector<bf16> tmp(src.size());
  f32_to_bf16(src, tmp);
  std::memcpy(dst.data() + offset * 2, tmp.data(), tmp.size() * 2);
}

void run_passthrough(const KernelInvocation& inv) {
  int64_t bytes = param(*inv.params, "bytes");
  need(inv, 0, bytes, "passthrough");
  need(inv, 1, bytes, "passthrough");
  std::memcpy(inv.args[1].data(), inv.args[0].data(), static_cast<size_t>(bytes));
}

void run_zero_f32(const KernelInvocation& inv) {
  int64_t elems = param(*inv.params, "elems");
  need(inv, 0, elems * 4, "zero_f32");
  std::memset(inv.args[0].data(), 0, static_cast<size_t>(elems) * 4);
}

void run_matmul(const KernelInvocation& inv) {
  int64_t m = param(*inv.params, "m"), k = param(*inv.params, "k"), n = param(*inv.params, "n");
  need(inv, 0, m * k * 2, "matmul_bf16_f32");
  need(inv, 1, k * n * 2, "matmul_bf16_f32");
  need(inv, 2, m * n * 4, "matmul_bf16_f32");
  thread_local std::vector<float> a, b, acc;
  load_bf16(inv.args[0], a, m * k);
  load_bf16(inv.args[1], b, k * n);
  acc.resize(static_cast<size_t>(m * n));
  std::memcpy(acc.data(), inv.args[2].data(), acc.size() * 4);
  for (int64_t i = 0; i < m; ++i) {
    float* crow = acc.data() + i * n;
    for (int64_t p = 0; p < k; ++p) {
      float av = a[static_cast<size_t>(i * k + p)];
      const float* brow = b.data() + p * n;
      for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
  }
  std::memcpy(inv.args[2].data(), acc.data(), acc.size() * 4);
}

void run_store_bf16(const KernelInvocation& inv) {
  int64_t elems = param(*inv.params, "elems");
  need(inv, 0, elems * 4, "store_bf16");
  need(inv, 1, elems * 2, "store_bf16");
  thread_local std::vector<float> acc;
  acc.resize(static_cast<size_t>(elems));
  std::memcpy(acc.data(), inv.args[0].data(), acc.size() * 4);
  store_bf16(acc, inv.args[1], 0);
  std::memset(inv.args[0].data(), 0, acc.size() * 4);
}

// Lane-wise partial sums, then a fixed pairwise reduction: the order a 32-lane
// vector MAC loop produces, and vectorizable on the host.
void run_gemv(const KernelInvocation& inv) {
  int64_t rows = param(*inv.params, "rows"), k = param(*inv.params, "k");
  int64_t offset = param(*inv.params, "offset");
  need(inv, 0, rows * k * 2, "gemv_bf16");
  need(inv, 1, k * 2, "gemv_bf16");
  need(inv, 2, (offset + rows) * 2, "gemv_bf16");
  thread_local std::vector<float> a, x, y;
  load_bf16(inv.args[0], a, rows * k);
  load_bf16(inv.args[1], x, k);
  y.assign(static_cast<size_t>(rows), 0.0f);
  constexpr int64_t kLanes = 32;
  for (int64_t i = 0; i < rows; ++i) {
    float part[kLanes] = {};
    const float* arow = a.data() + i * k;
    int64_t j = 0;
    for (; j + kLanes <= k; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) part[l] += arow[j + l] * x[static_cast<size_t>(j + l)];
    for (; j < k; ++j) part[j % kLanes] += arow[j] * x[static_cast<size_t>(j)];
    for (int64_t w = kLanes / 2; w >= 1; w /= 2)
      for (int64_t l = 0; l < w; ++l) part[l] += part[l + w];
    y[static_cast<size_t>(i)] = part[0];
  }
  store_bf16(y, inv.args[2], offset);
}

// The same physics as the tile kernels' cost vocabulary (kernels/
// kernel_common.h), restated here because npu/ sits below kernels/.
KernelCost matmul_cost(const KernelParams& p, const DeviceSpec& s) {
  const int64_t bm = ceil_div(param(p, "m"), s.mmul_m), bk = ceil_div(param(p, "k"), s.mmul_k),
                bn = ceil_div(param(p, "n"), s.mmul_n);
  const double per_instr = static_cast<double>(s.mmul_m * s.mmul_k * s.mmul_n) / s.macs_per_cycle_bf16;
  const double loops = static_cast<double>(ceil_div(bm, 2) * ceil_div(bn, 2));
  return {static_cast<double>(bm * bk * bn) * per_instr + loops * s.mmul_loop_overhead_cycles, 0,
          s.core_call_overhead_cycles};
}

KernelCost gemv_cost(const KernelParams& p, const DeviceSpec& s) {
  const double vectors = static_cast<double>(param(p, "rows") * ceil_div(param(p, "k"), s.vector_lanes_bf16));
  return {0, vectors * s.vector_lanes_bf16 / s.gemv_macs_per_cycle, s.core_call_overhead_cycles};
}

KernelDef with_cost(KernelDef d, std::function<KernelCost(const KernelParams&, const DeviceSpec&)> cost) {
  d.cycles = [cost](const KernelParams& p, const DeviceSpec& s) { return std::llround(cost(p, s).total()); };
  d.cost = std::move(cost);
  return d;
}

}  // namespace

void register_microbench_kernels(KernelRegistry& registry) {
  auto none = [](const KernelParams&) { return int64_t{0}; };
  auto copy = [](const char* key, int64_t elem) {
    return [key, elem](const KernelParams& p, const DeviceSpec& s) {
      return KernelCost{0, static_cast<double>(ceil_div(param(p, key) * elem, vector_bytes(s))), 0};
    };
  };
  registry.add(with_cost({"passthrough", run_passthrough, nullptr, none}, copy("bytes", 1)));
  registry.add(with_cost({"zero_f32", run_zero_f32, nullptr, none}, copy("elems", 4)));
  registry.add(with_cost({"matmul_bf16_f32", run_matmul, nullptr,
                          [](const KernelParams& p) { return param(p, "m") * param(p, "k") * param(p, "n"); }},
                         matmul_cost));
  registry.add(with_cost({"store_bf16", run_store_bf16, nullptr, none}, copy("elems", 4)));
  registry.add(with_cost({"gemv_bf16", run_gemv, nullptr,
                          [](const KernelParams& p) { return param(p, "rows") * param(p, "k"); }},
                         gemv_cost));
}

std::vector<bf16> reference_gemm(std::span<const bf16> a, std::span<const bf16> b, int64_t M,
                                 int64_t K, int64_t N) {
  std::vector<double> acc(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t p = 0; p < K; ++p) {
      double av = bf16_to_f32(a[static_cast<size_t>(i * K + p)]);
      for (int64_t j = 0; j < N; ++j)
        acc[static_cast<size_t>(i * N + j)] += av * bf16_to_f32(b[static_cast<size_t>(p * N + j)]);
    }
  std::vector<bf16> out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) out[i] = f32_to_bf16(static_cast<float>(acc[i]));
  return out;
}

std::vector<bf16> reference_gemv(std::span<const bf16> a, std::span<const bf16> x, int64_t M,
                                 int64_t K) {
  std::vector<bf16> out(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) {
    double acc = 0;
    for (int64_t j = 0; j < K; ++j)
      acc += static_cast<double>(bf16_to_f32(a[static_cast<size_t>(i * K + j)])) *
             bf16_to_f32(x[static_cast<size_t>(j)]);
    out[static_cast<size_t>(i)] = f32_to_bf16(static_cast<float>(acc));
  }
  return out;
}

}  // namespace tessera::npu
