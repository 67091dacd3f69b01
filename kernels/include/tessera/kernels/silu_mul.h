#pragma once
// SwiGLU activation: out = bf16(silu(gate) * up), silu from the tile's bf16
// exp and fp32 reciprocal (nonlinear.h, silu_tile).
//   silu_mul (gate bf16[count], up bf16[count], out bf16[count]); params: count.
// out may be the same object as gate or up.
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

void silu_mul(const bf16* gate, const bf16* up, bf16* out, int64_t count);
std::vector<TileKernel> silu_mul_kernels();

}  // namespace tessera::kernels
