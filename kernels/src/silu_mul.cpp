#include "tessera/core/mutants.h"
#include "tessera/kernels/silu_mul.h"

#include "tessera/kernels/nonlinear.h"

namespace tessera::kernels {

void silu_mul(const bf16* gate, const bf16* up, bf16* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    out[i] = f32_to_bf16(silu_tile(bf16_to_f32(gate[i])) * bf16_to_f32(up[i]));
  }
  if (mutant_on(Mutant::silu_exp_truncate)) {
    for (int64_t i = 0; i < count; ++i) {
      const float g = bf16_to_f32(gate[i]), e = truncate_bf16(exp2_f32(-g * 1.4426950408889634f));
      out[i] = f32_to_bf16(g * recip_tile(1.0f + e) * bf16_to_f32(up[i]));
    }
  }
  if (mutant_on(Mutant::silu_slope_2pct)) {
    for (int64_t i = 0; i < count; ++i) out[i] = f32_to_bf16(1.02f * silu_tile(bf16_to_f32(gate[i])) * bf16_to_f32(up[i]));
  }
}

std::vector<TileKernel> silu_mul_kernels() {
  static constexpr const char* name = "silu_mul";
  auto count_of = [](const npu::KernelParams& p) { return param_in(p, "count", 1, 1 << 24, name); };
  return {make_tile_kernel(
      name,
      [=](const npu::KernelInvocation& inv) {
        int64_t n = count_of(*inv.params);
        silu_mul(arg_ptr<const bf16>(inv, 0, n, name, "gate"),
                 arg_ptr<const bf16>(inv, 1, n, name, "up"),
                 arg_ptr<bf16>(inv, 2, n, name, "out"), n);
      },
      // Per vector: exp(-x) (negation folded into its scale), add 1, a
      // reciprocal, two multiplies.
      [=](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        return vector_cycles(count_of(p), VectorOps{3, 1, 1}, s);
      },
      [=](const npu::KernelParams& p) { return 3 * 2 * count_of(p); })};
}

}  // namespace tessera::kernels
