#pragma once
// Per-head RMSNorm (Qwen3 QK-norm): the RMSNorm of rmsnorm.h applied to every
// head_dim vector of q or k (before RoPE), with one weight of head_dim shared
// by all heads.
//   head_rmsnorm (x bf16[tokens, heads, head_dim], w bf16[head_dim],
//                 out bf16[tokens, heads, head_dim]);
//   params: tokens, heads, head_dim, eps (float, required).
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

std::vector<TileKernel> head_rmsnorm_kernels();

}  // namespace tessera::kernels
