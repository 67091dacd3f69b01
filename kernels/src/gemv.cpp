#include "tessera/core/mutants.h"
#include "tessera/kernels/gemv.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <variant>

#include "scratch.h"
#include "tessera/kernels/gemm.h"
#include "vec_ops.h"

namespace tessera::kernels {

namespace {
TESSERA_VECTOR_CLONES void gemv_block_generic(const bf16* w, const bf16* x, float* acc, int64_t n, int64_t k,
                                              bool accumulate) {
  float* xf = scratch_f32(ScratchSlot::row, k);
  bf16_to_f32_n(x, xf, k);
  for (int64_t j = 0; j < n; ++j) {
    float s = mutant_on(Mutant::gemv_bf16_accum) ? dot_bf16_accum(w + j * k, xf, k) : dot(w + j * k, xf, k);
    acc[j] = accumulate ? acc[j] + s : s;
  }
}
}  // namespace

void gemv_block(const bf16* w, const bf16* x, float* acc, int64_t n, int64_t k, bool accumulate,
                std::span<const std::byte> ahead, std::span<const std::byte> ahead_far) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2 && !mutant_on(Mutant::gemv_bf16_accum)) {
    detail::gemv_block_avx2(w, x, acc, n, k, accumulate, ahead, ahead_far);
    return;
  }
  gemv_block_generic(w, x, acc, n, k, accumulate);
}

int64_t gemv_l1_bytes(int64_t n, int64_t k, bool fused) {
  return 2 * (n * k + k) + (fused ? 2 : 4) * n;
}

// One dot product per row at the spec's GEMV MAC rate, then the lane fold.
Cost gemv_cycles(int64_t n, int64_t k, const npu::DeviceSpec& spec) {
  const int64_t lanes = spec.vector_lanes_bf16;
  const int64_t fold = std::bit_width(static_cast<uint64_t>(lanes));
  const double rate = std::min<double>(spec.gemv_macs_per_cycle, static_cast<double>(lanes));
  const Cost dot{0, static_cast<double>(round_up(k, lanes)) / rate, 0};
  return static_cast<double>(n) * (dot + fixed_cycles(fold));
}

namespace {

struct GemvDims {
  int64_t n, k;
  int64_t x_off;  // element offset of this k block in a resident x object
};

int64_t int_in(const npu::ParamValue* v, const char* key, int64_t lo, int64_t hi, const char* kernel) {
  if (v == nullptr) throw_error<KernelArgError>("kernel {}: missing param '{}'", kernel, key);
  const auto* i = std::get_if<int64_t>(v);
  if (i == nullptr) throw_error<KernelArgError>("kernel {}: param '{}' must be an integer", kernel, key);
  if (*i < lo || *i > hi)
    throw_error<KernelArgError>("kernel {}: param '{}' = {} outside [{}, {}]", kernel, key, *i, lo, hi);
  return *i;
}

// One pass over the params instead of a map lookup per key (param_in): a
// decode token makes thousands of GEMV calls of a few rows each, and three
// lookups by string cost about as much as the row's MACs.
GemvDims dims_of(const npu::KernelParams& p, const char* kernel) {
  const npu::ParamValue *n = nullptr, *k = nullptr, *x_off = nullptr;
  for (const auto& [key, v] : p) {
    if (key == "n") n = &v;
    else if (key == "k") k = &v;
    else if (key == "x_off") x_off = &v;
  }
  return {int_in(n, "n", 1, 1 << 24, kernel), int_in(k, "k", 1, 1 << 24, kernel),
          x_off ? int_in(x_off, "x_off", 0, std::numeric_limits<int64_t>::max(), kernel) : 0};
}

// The replay entry (npu::KernelDef::replay): run()'s arithmetic on args a
// checked run() accepted.
template <bool Accumulate, bool Fused>
void gemv_replay(const npu::KernelInvocation& inv) {
  const auto& d = *static_cast<const GemvDims*>(inv.bound);
  const auto* w = reinterpret_cast<const bf16*>(inv.args[0].data());
  const auto* x = reinterpret_cast<const bf16*>(inv.args[1].data()) + d.x_off;
  if constexpr (!Fused) {
    gemv_block(w, x, reinterpret_cast<float*>(inv.args[2].data()), d.n, d.k, Accumulate, inv.ahead, inv.ahead_far);
  } else {
    float* acc = scratch_f32(ScratchSlot::gemm_acc, d.n);
    gemv_block(w, x, acc, d.n, d.k, false, inv.ahead, inv.ahead_far);
    gemm_finalize(acc, reinterpret_cast<bf16*>(inv.args[2].data()), d.n);
  }
}

TileKernel gemv_kernel(const char* name, bool accumulate, bool fused) {
  auto run = [=](const npu::KernelInvocation& inv) {
    const auto [n, k, x_off] = inv.bound ? *static_cast<const GemvDims*>(inv.bound) : dims_of(*inv.params, name);
    const auto* w = arg_ptr<const bf16>(inv, 0, n * k, name, "w");
    const auto* x = arg_ptr<const bf16>(inv, 1, x_off + k, name, "x") + x_off;
    if (!fused) {
      gemv_block(w, x, arg_ptr<float>(inv, 2, n, name, "acc"), n, k, accumulate, inv.ahead, inv.ahead_far);
      return;
    }
    auto* y = arg_ptr<bf16>(inv, 2, n, name, "y");
    float* acc = scratch_f32(ScratchSlot::gemm_acc, n);
    gemv_block(w, x, acc, n, k, false, inv.ahead, inv.ahead_far);
    gemm_finalize(acc, y, n);
  };
  TileKernel t = make_tile_kernel(
      name, run,
      [=](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        auto d = dims_of(p, name);
        return gemv_cycles(d.n, d.k, s);
      },
      [=](const npu::KernelParams& p) {
        auto d = dims_of(p, name);
        return gemv_l1_bytes(d.n, d.k, fused) + 2 * d.x_off;  // x reaches x_off + k
      },
      [=](const npu::KernelParams& p) {
        auto d = dims_of(p, name);
        return d.n * d.k;
      });
  t.def.read_only_args = 0b011;  // w, x
  t.def.prefetches_ahead = true;
  t.def.replay = fused ? gemv_replay<false, true> : accumulate ? gemv_replay<true, false> : gemv_replay<false, false>;
  t.def.bind = [=](const npu::KernelParams& p) -> std::shared_ptr<const void> {
    return std::make_shared<const GemvDims>(dims_of(p, name));
  };
  return t;
}

}  // namespace

std::vector<TileKernel> gemv_kernels() {
  return {gemv_kernel("gemv_init", false, false), gemv_kernel("gemv_acc", true, false),
          gemv_kernel("gemv", false, true)};
}

}  // namespace tessera::kernels
