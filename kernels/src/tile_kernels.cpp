#include "tessera/kernels/tile_kernels.h"

#include "tessera/kernels/bias_add.h"
#include "tessera/kernels/decode_attention.h"
#include "tessera/kernels/embedding.h"
#include "tessera/kernels/flash_attention.h"
#include "tessera/kernels/gemm.h"
#include "tessera/kernels/gemv.h"
#include "tessera/kernels/head_rmsnorm.h"
#include "tessera/kernels/kv_append.h"
#include "tessera/kernels/residual_add.h"
#include "tessera/kernels/rmsnorm.h"
#include "tessera/kernels/rope.h"
#include "tessera/kernels/silu_mul.h"
#include "tessera/kernels/softmax.h"
#include "tessera/kernels/topk.h"

namespace tessera::kernels {

const std::vector<TileKernel>& tile_kernels() {
  static const std::vector<TileKernel> all = [] {
    std::vector<TileKernel> v;
    for (auto&& group :
         {gemm_kernels(), gemv_kernels(), rmsnorm_kernels(), head_rmsnorm_kernels(),
          rope_kernels(), silu_mul_kernels(), residual_add_kernels(), bias_add_kernels(),
          softmax_kernels(), flash_attention_kernels(), decode_attention_kernels(),
          kv_append_kernels(), embedding_kernels(), topk_kernels()}) {
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
