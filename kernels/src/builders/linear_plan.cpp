// Tile choice for the linear builder: which dataflow, which block sizes, how
// many launches. Every number that bounds a choice comes from the DeviceSpec.
#include <algorithm>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/linear.h"
#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {
namespace {

// Decode and short prompts: one M block, weights read once.
constexpr int64_t kGemvMaxM = 32;
// Largest GEMM block edge: 64^3 keeps x, w (both double-buffered), the fp32
// accumulator and two y objects inside a 64 KiB L1 (the mlir-aie whole-array
// default).
constexpr int64_t kGemmEdge = 64;
// The allocator starts every pool / buffer on a 32-byte boundary.
constexpr int64_t kL1Align = 32;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t opt(const TileOptions& t, const char* key, int64_t fallback) {
  auto it = t.find(key);
  return it == t.end() ? fallback : it->second;
}

// K blocks are multiples of the 8-wide bf16 MAC granule; long K in multiples
// of 64 so that every shim run factorises into BD dims.
int64_t k_quantum(int64_t K) { return K >= 64 ? 64 : 8; }

bool needs_acc(const LinearPlan& p) { return !(p.m == 1 && p.kb == 1); }

[[noreturn]] void no_fit(const LinearPlan& p, const npu::DeviceSpec& spec, const char* why) {
  throw_error<LimitError>("linear M={} K={} N={}: {} (L1 {} bytes on {}, block m={} k={} n={})",
                          p.M, p.K, p.N, why, spec.compute.memory_bytes, spec.name, p.m, p.k, p.n);
}

// Largest n (multiple of `gran`, or 0) whose per-tile footprint fits.
int64_t max_n(LinearPlan p, int64_t budget, int64_t gran) {
  p.n = 0;
  int64_t fixed = p.l1_bytes();
  p.n = gran;
  int64_t per = p.l1_bytes() - fixed;
  int64_t n = std::max<int64_t>(0, (budget - fixed) / per * gran);
  // The estimate ignores 32-byte rounding of each pool; step down to the truth.
  for (p.n = n; p.n > 0 && p.l1_bytes() > budget; p.n -= gran) {
  }
  return p.n;
}

void plan_gemv(LinearPlan& p, const TileOptions& t, int64_t budget, const npu::DeviceSpec& spec) {
  const int64_t tiles = int64_t{p.C} * p.R;
  p.m = opt(t, "m", std::min(p.M, kGemvMaxM));
  p.S = ceil_div(p.M, p.m);
  // The matrix unit's n granule; for m = 1 a y object must still be whole
  // 4-byte DMA words.
  const int64_t gran = p.m > 1 ? 4 : 2;
  const int64_t want_n = std::max<int64_t>(1, ceil_div(p.N, tiles));
  const int64_t q = k_quantum(p.K);
  int64_t best = -1;
  LinearPlan chosen = p;
  // Largest weight object per call wins (fewest calls, longest DMA runs), but
  // a further K split must gain a quarter: every split re-streams x and adds
  // accumulator passes.
  for (int64_t kb = 1; kb <= 256; ++kb) {
    LinearPlan c = p;
    c.kb = kb;
    c.k = opt(t, "k", round_up(ceil_div(p.K, kb), q));
    c.kb = ceil_div(p.K, c.k);
    if (c.kb != kb) continue;
    c.n = opt(t, "n", std::min(max_n(c, budget, gran), round_up(want_n, gran)));
    if (c.n < 1 || c.l1_bytes() > budget) continue;
    if (best < 0 || c.n * c.k * 4 > best * 5) {
      best = c.n * c.k;
      chosen = c;
    }
    if (t.count("k") || (kb == 1 && c.n >= want_n)) break;
  }
  if (best < 0) no_fit(p, spec, "no K split fits");
  p = chosen;
  p.NB = ceil_div(p.N, tiles * p.n);
}

void plan_gemm(LinearPlan& p, const TileOptions& t, int64_t budget, const npu::DeviceSpec& spec) {
  p.m = opt(t, "m", std::min(kGemmEdge, round_up(ceil_div(p.M, p.R), 4)));
  p.n = opt(t, "n", std::min(kGemmEdge, round_up(ceil_div(p.N, p.C), 4)));
  const int64_t q = k_quantum(p.K);
  if (t.count("k")) {
    p.k = t.at("k");
    p.kb = ceil_div(p.K, p.k);
  } else {
    LinearPlan c = p;
    c.kb = 2;  // x double-buffered
    int64_t kmax = 0;
    for (c.k = q; c.k <= round_up(p.K, q) && c.l1_bytes() <= budget; c.k += q) kmax = c.k;
    if (kmax < q) no_fit(p, spec, "no K block of the 8-wide granule fits");
    p.kb = ceil_div(p.K, kmax);
    p.k = round_up(ceil_div(p.K, p.kb), q);
  }
  p.S = ceil_div(p.M, int64_t{p.R} * p.m);
  p.NB = ceil_div(p.N, int64_t{p.C} * p.n);
}

}  // namespace

int64_t LinearPlan::l1_bytes() const {
  auto pool = [](int64_t bytes) { return round_up(bytes, kL1Align); };
  int64_t x = pool((kb == 1 ? 1 : 2) * m * k * 2);
  int64_t w = pool(2 * n * k * 2);
  int64_t acc = needs_acc(*this) ? pool(m * n * 4) : 0;
  int64_t y = pool(2 * m * n * 2);
  return x + w + acc + y;
}

LinearPlan plan_linear(int64_t M, int64_t K, int64_t N, const npu::DeviceSpec& spec,
                       const TileOptions& tiles) {
  LinearPlan p;
  p.M = M;
  p.K = K;
  p.N = N;
  if (M < 1 || K < 1 || N < 1)
    throw_error<LimitError>("linear M={} K={} N={}: every dim must be >= 1", M, K, N);
  p.C = static_cast<int>(opt(tiles, "columns", spec.columns));
  p.R = static_cast<int>(opt(tiles, "rows", spec.compute_rows));
  if (p.C < 1 || p.C > spec.columns || p.R < 1 || p.R > spec.compute_rows)
    throw_error<LimitError>("linear M={} K={} N={}: {} columns x {} rows outside the {}x{} array "
                            "of {}", M, K, N, p.C, p.R, spec.columns, spec.compute_rows, spec.name);
  p.gemm = opt(tiles, "gemm", M > kGemvMaxM ? 1 : 0) != 0;
  // Row group r of the gemm dataflow is fed by shim r.
  if (p.gemm && p.R > p.C)
    throw_error<LimitError>("linear M={} K={} N={}: the gemm dataflow feeds compute row r from "
                            "shim r and needs rows {} <= columns {}", M, K, N, p.R, p.C);
  const int64_t budget = spec.compute.memory_bytes;
  if (p.gemm)
    plan_gemm(p, tiles, budget, spec);
  else
    plan_gemv(p, tiles, budget, spec);
  if (p.m < 1 || p.k < 1 || p.n < 1 || p.l1_bytes() > budget)
    no_fit(p, spec, "the blocks (x, w double-buffered, fp32 acc, y) overflow L1");
  // Shim BDs: a W and a y task per launch, plus x tasks on the x shim (one
  // for a resident x, else one per M step and 255 repeats of it).
  const int64_t x_per_s = p.kb == 1 ? 0 : ceil_div(p.NB, spec.bd_max_repeat);
  const int64_t free_bds = spec.shim.buffer_descriptors - 2 - (p.kb == 1 ? 1 : 0);
  p.s_per_launch = x_per_s == 0 ? p.S : free_bds / x_per_s;
  p.s_per_launch = std::min({p.s_per_launch, p.S, spec.bd_max_repeat});
  if (p.s_per_launch < 1) no_fit(p, spec, "one M step needs more shim BDs than the spec has");
  return p;
}

}  // namespace tessera::kernels
