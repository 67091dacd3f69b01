#include "tessera/core/mutants.h"
#include "tessera/kernels/residual_add.h"

namespace tessera::kernels {

void residual_add(const bf16* a, const bf16* b, bf16* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
  if (mutant_on(Mutant::residual_last_truncate) && count > 0) out[count - 1] = f32_to_bf16_truncate(bf16_to_f32(a[count - 1]) + bf16_to_f32(b[count - 1]));
}

std::vector<TileKernel> residual_add_kernels() {
  static constexpr const char* name = "residual_add";
  auto count_of = [](const npu::KernelParams& p) { return param_in(p, "count", 1, 1 << 24, name); };
  return {make_tile_kernel(
      name,
      [=](const npu::KernelInvocation& inv) {
        int64_t n = count_of(*inv.params);
        residual_add(arg_ptr<const bf16>(inv, 0, n, name, "a"),
                     arg_ptr<const bf16>(inv, 1, n, name, "b"),
                     arg_ptr<bf16>(inv, 2, n, name, "out"), n);
      },
      // One add per vector (loads, store and srs pipeline behind it).
      [=](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        return vector_cycles(count_of(p), 1, s);
      },
      [=](const npu::KernelParams& p) { return 3 * 2 * count_of(p); })};
}

}  // namespace tessera::kernels
