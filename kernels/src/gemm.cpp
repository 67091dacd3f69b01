#include "tessera/core/mutants.h"
#include "tessera/kernels/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "scratch.h"
#include "tessera/core/bf16x16.h"
#include "vec_ops.h"

namespace tessera::kernels {
namespace {

// Rows of A handled together: each B row loaded once feeds this many
// accumulator rows.
constexpr int64_t kRowBlock = 4;

// B as fp32 [k, n] (transposed from [n, k] when needed): one conversion per
// call, amortized over the m rows.
const float* b_as_f32_kn(const bf16* b, const GemmDims& d) {
  float* bf = scratch_f32(ScratchSlot::gemm_b, d.k * d.n);
  if (!d.b_nk) {
    bf16_to_f32_n(b, bf, d.k * d.n);
    return bf;
  }
  // Eight columns at a time: each K step writes 8 contiguous floats (one
  // element per strided store cost ~15 % of the kernel), and the 8 source
  // rows it reads stay in L1 as K advances.
  for (int64_t j0 = 0; j0 < d.n; j0 += 8) {
    const int64_t jn = std::min<int64_t>(8, d.n - j0);
    for (int64_t kk = 0; kk < d.k; ++kk)
      for (int64_t j = 0; j < jn; ++j) bf[kk * d.n + j0 + j] = bf16_to_f32(b[(j0 + j) * d.k + kk]);
  }
  return bf;
}

// One call's operands as fp32: A [m, k], B [k, n], acc [m, n]; K summed
// over [0, kend).
struct Panel {
  const float* af;
  const float* bf;
  float* acc;
  int64_t k, n, kend;
};

// kRowBlock rows x (L * H) columns at (i0, j0), V a vector of L floats (SSE
// or AVX2 registers): the accumulators stay in registers for the whole K loop
// (acc was re-read and re-written per K step, half of prefill's host time);
// every element still sums its products in K order, each product rounded
// before it is added.
template <class V, int H>
[[gnu::always_inline]] inline void register_tile(const Panel& p, int64_t i0, int64_t j0) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  V c[kRowBlock][H];
  for (int64_t r = 0; r < kRowBlock; ++r)
    for (int h = 0; h < H; ++h) std::memcpy(&c[r][h], p.acc + (i0 + r) * p.n + j0 + L * h, sizeof(V));
  const float* __restrict arow = p.af + i0 * p.k;
  for (int64_t kk = 0; kk < p.kend; ++kk) {
    V bv[H];
    for (int h = 0; h < H; ++h) std::memcpy(&bv[h], p.bf + kk * p.n + j0 + L * h, sizeof(V));
    for (int64_t r = 0; r < kRowBlock; ++r) {
      const float av = arow[r * p.k + kk];
      for (int h = 0; h < H; ++h) c[r][h] += av * bv[h];
    }
  }
  for (int64_t r = 0; r < kRowBlock; ++r)
    for (int h = 0; h < H; ++h) std::memcpy(p.acc + (i0 + r) * p.n + j0 + L * h, &c[r][h], sizeof(V));
}

// Rows [i_begin, i_end) x columns [j_begin, j_end), one product at a time in
// the same order.
[[gnu::always_inline]] inline void scalar_tile(const Panel& p, int64_t i_begin, int64_t i_end, int64_t j_begin,
                                               int64_t j_end) {
  for (int64_t i = i_begin; i < i_end; ++i)
    for (int64_t kk = 0; kk < p.kend; ++kk) {
      const float av = p.af[i * p.k + kk];
      const float* __restrict brow = p.bf + kk * p.n;
      float* __restrict crow = p.acc + i * p.n;
      for (int64_t j = j_begin; j < j_end; ++j) crow[j] += av * brow[j];
    }
}

}  // namespace

TESSERA_VECTOR_CLONES void gemm_block(const bf16* a, const bf16* b, float* acc, const GemmDims& d, bool accumulate) {
  const float* bf = b_as_f32_kn(b, d);
  float* af = scratch_f32(ScratchSlot::gemm_a, d.m * d.k);
  bf16_to_f32_n(a, af, d.m * d.k);
  const int64_t n = d.n, k = d.k;
  if (!accumulate) std::fill(acc, acc + d.m * n, 0.0f);
  const int64_t kend = k - (mutant_on(Mutant::gemm_drop_last_k) && k > 1 ? 1 : 0);
  const Panel p{af, bf, acc, k, n, kend};
  // Whole row blocks in register tiles 16, 8 and 4 columns wide, the rest of
  // each row block's columns and the rows past them one product at a time.
  const int64_t m_full = d.m / kRowBlock * kRowBlock;
  int64_t j0 = 0;
  for (; j0 + 16 <= n; j0 += 16)
    for (int64_t i0 = 0; i0 < m_full; i0 += kRowBlock) register_tile<simd::f32x8, 2>(p, i0, j0);
  for (; j0 + 8 <= n; j0 += 8)
    for (int64_t i0 = 0; i0 < m_full; i0 += kRowBlock) register_tile<simd::f32x8, 1>(p, i0, j0);
  for (; j0 + 4 <= n; j0 += 4)
    for (int64_t i0 = 0; i0 < m_full; i0 += kRowBlock) register_tile<simd::f32x4, 1>(p, i0, j0);
  scalar_tile(p, 0, m_full, j0, n);
  scalar_tile(p, m_full, d.m, 0, n);
}

void gemm_finalize(const float* acc, bf16* c, int64_t count) {
  if (mutant_on(Mutant::linear_truncate)) for (int64_t i = 0; i < count; ++i) c[i] = f32_to_bf16_truncate(acc[i]);
  else for (int64_t i = 0; i < count; ++i) c[i] = f32_to_bf16(acc[i]);
}

int64_t gemm_l1_bytes(const GemmDims& d, bool fused) {
  int64_t ab = 2 * (d.a_off + d.m * d.k + d.b_off + d.k * d.n);
  return ab + 4 * d.m * d.n + (fused ? 2 * d.m * d.n : 0);
}

Cost gemm_cycles(const GemmDims& d, const npu::DeviceSpec& spec) {
  return Cost{0, 0, spec.core_call_overhead_cycles} + mmul_cycles(d.m, d.k, d.n, spec);
}

namespace {

GemmDims dims_of(const npu::KernelParams& p, const char* kernel) {
  GemmDims d;
  d.m = param_in(p, "m", 1, 1 << 20, kernel);
  d.k = param_in(p, "k", 1, 1 << 20, kernel);
  d.n = param_in(p, "n", 1, 1 << 20, kernel);
  std::string layout = param_str_or(p, "b_layout", "kn", kernel);
  if (layout != "kn" && layout != "nk") {
    throw_error<KernelArgError>("kernel {}: b_layout '{}' is neither 'kn' nor 'nk'", kernel,
                                layout);
  }
  d.b_nk = layout == "nk";
  d.a_off = param_int_or(p, "a_off", 0, kernel);
  if (d.a_off < 0) throw_error<KernelArgError>("kernel {}: a_off {} is negative", kernel, d.a_off);
  d.b_off = param_int_or(p, "b_off", 0, kernel);
  if (d.b_off < 0) throw_error<KernelArgError>("kernel {}: b_off {} is negative", kernel, d.b_off);
  return d;
}

// The dims bound once per instruction (KernelDef::bind): a prefill GEMM's
// step calls looked up six params by name each, about a tenth of a prompt's
// host time.
GemmDims bound_or_parsed(const npu::KernelInvocation& inv, const char* name) {
  return inv.bound ? *static_cast<const GemmDims*>(inv.bound) : dims_of(*inv.params, name);
}

template <bool Accumulate>
void replay_step(const npu::KernelInvocation& inv) {
  const GemmDims& d = *static_cast<const GemmDims*>(inv.bound);
  gemm_block(reinterpret_cast<const bf16*>(inv.args[0].data()) + d.a_off,
             reinterpret_cast<const bf16*>(inv.args[1].data()) + d.b_off,
             reinterpret_cast<float*>(inv.args[2].data()), d, Accumulate);
}

void run_fused(const GemmDims& d, const bf16* a, const bf16* b, bf16* c) {
  float* acc = scratch_f32(ScratchSlot::gemm_acc, d.m * d.n);
  gemm_block(a, b, acc, d, false);
  gemm_finalize(acc, c, d.m * d.n);
}

void replay_fused(const npu::KernelInvocation& inv) {
  const GemmDims& d = *static_cast<const GemmDims*>(inv.bound);
  run_fused(d, reinterpret_cast<const bf16*>(inv.args[0].data()) + d.a_off,
            reinterpret_cast<const bf16*>(inv.args[1].data()) + d.b_off, reinterpret_cast<bf16*>(inv.args[2].data()));
}

TileKernel gemm_step_kernel(const char* name, bool accumulate) {
  npu::KernelDef def;
  def.name = name;
  def.bind = [name](const npu::KernelParams& p) -> std::shared_ptr<const void> {
    return std::make_shared<const GemmDims>(dims_of(p, name));
  };
  def.run = [name, accumulate](const npu::KernelInvocation& inv) {
    const GemmDims d = bound_or_parsed(inv, name);
    const auto* a = arg_ptr<const bf16>(inv, 0, d.a_off + d.m * d.k, name, "a") + d.a_off;
    const auto* b = arg_ptr<const bf16>(inv, 1, d.b_off + d.k * d.n, name, "b") + d.b_off;
    auto* acc = arg_ptr<float>(inv, 2, d.m * d.n, name, "acc");
    gemm_block(a, b, acc, d, accumulate);
  };
  def.replay = accumulate ? replay_step<true> : replay_step<false>;
  def.cost = [name](const npu::KernelParams& p, const npu::DeviceSpec& s) {
    return gemm_cycles(dims_of(p, name), s);
  };
  def.cycles = [cost = def.cost](const npu::KernelParams& p, const npu::DeviceSpec& s) {
    return std::llround(cost(p, s).total());
  };
  def.macs = [name](const npu::KernelParams& p) {
    GemmDims d = dims_of(p, name);
    return d.m * d.k * d.n;
  };
  def.read_only_args = 0b011;  // a, b (gemm's fused body below reads the same)
  return {def, [name](const npu::KernelParams& p) { return gemm_l1_bytes(dims_of(p, name), false); }};
}

TileKernel gemm_fused_kernel() {
  static constexpr const char* name = "gemm";
  TileKernel t = gemm_step_kernel(name, false);
  t.def.run = [](const npu::KernelInvocation& inv) {
    const GemmDims d = bound_or_parsed(inv, name);
    const auto* a = arg_ptr<const bf16>(inv, 0, d.a_off + d.m * d.k, name, "a") + d.a_off;
    const auto* b = arg_ptr<const bf16>(inv, 1, d.b_off + d.k * d.n, name, "b") + d.b_off;
    run_fused(d, a, b, arg_ptr<bf16>(inv, 2, d.m * d.n, name, "c"));
  };
  t.def.replay = replay_fused;
  t.l1_bytes = [](const npu::KernelParams& p) { return gemm_l1_bytes(dims_of(p, name), true); };
  return t;
}

TileKernel gemm_finalize_kernel() {
  static constexpr const char* name = "gemm_finalize";
  npu::KernelDef def;
  def.name = name;
  // count bound once per instruction: a K-split decode GEMV finalizes every
  // few calls, and a lookup by name per call cost as much as the rounding.
  def.bind = [](const npu::KernelParams& p) -> std::shared_ptr<const void> {
    return std::make_shared<const int64_t>(param_in(p, "count", 1, 1 << 24, name));
  };
  def.run = [](const npu::KernelInvocation& inv) {
    const int64_t count =
        inv.bound ? *static_cast<const int64_t*>(inv.bound) : param_in(*inv.params, "count", 1, 1 << 24, name);
    gemm_finalize(arg_ptr<const float>(inv, 0, count, name, "acc"),
                  arg_ptr<bf16>(inv, 1, count, name, "c"), count);
  };
  def.replay = [](const npu::KernelInvocation& inv) {
    gemm_finalize(reinterpret_cast<const float*>(inv.args[0].data()), reinterpret_cast<bf16*>(inv.args[1].data()),
                  *static_cast<const int64_t*>(inv.bound));
  };
  // One srs (fp32 -> bf16 shift-round-saturate) per vector.
  def.cost = [](const npu::KernelParams& p, const npu::DeviceSpec& s) {
    return Cost{0, 0, s.core_call_overhead_cycles} + vector_cycles(param_int(p, "count", name), 1, s);
  };
  def.cycles = [cost = def.cost](const npu::KernelParams& p, const npu::DeviceSpec& s) {
    return std::llround(cost(p, s).total());
  };
  def.macs = [](const npu::KernelParams&) { return int64_t{0}; };
  return {def, [](const npu::KernelParams& p) { return 6 * param_int(p, "count", name); }};
}

}  // namespace

std::vector<TileKernel> gemm_kernels() {
  return {gemm_step_kernel("gemm_init", false), gemm_step_kernel("gemm_acc", true),
          gemm_fused_kernel(), gemm_finalize_kernel()};
}

}  // namespace tessera::kernels
