#pragma once
// Residual add: out = bf16(a + b), elementwise (h_mid = h + o, h_out = h_mid +
// down). One fp32 add, one rounding.
//   residual_add (a bf16[count], b bf16[count], out bf16[count]); params: count.
// out may be the same object as a or b.
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

void residual_add(const bf16* a, const bf16* b, bf16* out, int64_t count);
std::vector<TileKernel> residual_add_kernels();

}  // namespace tessera::kernels
