#include "tessera/kernels/tile_kernels.h"

#include "tessera/kernels/gemm.h"

namespace tessera::kernels {

const std::vector<TileKernel>& tile_kernels() {
  static const std::vector<TileKernel> all = [] {
    std::vector<TileKernel> v;
    for (auto&& group : {gemm_kernels()}) {
      v.insert(v.end(), group.begin(), group.end());
    }
    return v;
  }();
  return all;
}

void register_tile_kernels(npu::KernelRegistry& registry) {
  for (const TileKernel& t : tile_kernels()) registry.add(t.def);
}

int64_t tile_kernel_l1_bytes(const std::string& kernel, const npu::KernelParams& params) {
  for (const TileKernel& t : tile_kernels()) {
    if (t.def.name == kernel) return t.l1_bytes(params);
  }
  throw_error<KernelArgError>("unknown tile kernel '{}'", kernel);
}

}  // namespace tessera::kernels
