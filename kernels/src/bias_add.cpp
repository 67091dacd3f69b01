#include "tessera/core/mutants.h"
#include "tessera/kernels/bias_add.h"

namespace tessera::kernels {

void bias_add(const bf16* x, const bf16* bias, bf16* out, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const bf16* xr = x + r * n;
    bf16* orow = out + r * n;
    const float k = mutant_on(Mutant::bias_scaled) ? 1.0f + 1.0f / 64 : 1.0f;
    for (int64_t j = 0; j < n; ++j) orow[j] = f32_to_bf16(bf16_to_f32(xr[j]) + k * bf16_to_f32(bias[j]));
  }
}

std::vector<TileKernel> bias_add_kernels() {
  static constexpr const char* name = "bias_add";
  struct Dims {
    int64_t rows, n;
  };
  auto dims = [](const npu::KernelParams& p) {
    return Dims{param_in(p, "rows", 1, 1 << 20, name), param_in(p, "n", 1, 1 << 20, name)};
  };
  return {make_tile_kernel(
      name,
      [=](const npu::KernelInvocation& inv) {
        auto [rows, n] = dims(*inv.params);
        bias_add(arg_ptr<const bf16>(inv, 0, rows * n, name, "x"),
                 arg_ptr<const bf16>(inv, 1, n, name, "bias"),
                 arg_ptr<bf16>(inv, 2, rows * n, name, "out"), rows, n);
      },
      // One add per vector of each row (a ragged row end costs a full vector).
      [=](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        auto [rows, n] = dims(p);
        return rows * vector_cycles(n, 1, s);
      },
      [=](const npu::KernelParams& p) {
        auto [rows, n] = dims(p);
        return 2 * (2 * rows * n + n);
      })};
}

}  // namespace tessera::kernels
