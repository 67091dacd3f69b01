#pragma once
// Row softmax with max subtraction: p = exp_tile(x - max(x)), out =
// bf16(p * recip(sum p)). Max subtraction is what keeps exp in range: without
// it, logits above ~88 overflow fp32 (and bf16) to inf and the row turns NaN.
//   softmax (x bf16[rows, n], out bf16[rows, n]); params: rows, n.
// out may be the same object as x.
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

void softmax_rows(const bf16* x, bf16* out, int64_t rows, int64_t n);
std::vector<TileKernel> softmax_kernels();

}  // namespace tessera::kernels
