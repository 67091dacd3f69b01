#include "tessera/core/mutants.h"
#include "tessera/kernels/head_rmsnorm.h"

#include "tessera/kernels/rmsnorm.h"

namespace tessera::kernels {

std::vector<TileKernel> head_rmsnorm_kernels() {
  static constexpr const char* name = "head_rmsnorm";
  struct Dims {
    int64_t vectors, head_dim;
  };
  auto dims = [](const npu::KernelParams& p) {
    int64_t tokens = param_in(p, "tokens", 1, 1 << 20, name);
    int64_t heads = param_in(p, "heads", 1, 1024, name);
    return Dims{tokens * heads, param_in(p, "head_dim", 1, 4096, name)};
  };
  return {make_tile_kernel(
      name,
      [=](const npu::KernelInvocation& inv) {
        auto [vectors, d] = dims(*inv.params);
        float eps = static_cast<float>(required_eps(*inv.params, name)) * (mutant_on(Mutant::head_rmsnorm_eps_x100) ? 100.0f : 1.0f);
        rmsnorm_rows(arg_ptr<const bf16>(inv, 0, vectors * d, name, "x"),
                     arg_ptr<const bf16>(inv, 1, d, name, "w"),
                     arg_ptr<bf16>(inv, 2, vectors * d, name, "out"), vectors, d, eps);
      },
      [=](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        auto [vectors, d] = dims(p);
        return rmsnorm_cycles(vectors, d, s);
      },
      [=](const npu::KernelParams& p) {
        auto [vectors, d] = dims(p);
        return 2 * (2 * vectors * d + d);
      })};
}

}  // namespace tessera::kernels
