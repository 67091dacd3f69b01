#pragma once
// Bias add (Qwen2 q/k/v projections carry a bias): out[r, j] = bf16(x[r, j] +
// bias[j]). Applied to the bf16 projection output, as a separate kernel
// boundary (a fused GEMM epilogue would round once less; see the report).
//   bias_add (x bf16[rows, n], bias bf16[n], out bf16[rows, n]); params: rows, n.
// out may be the same object as x.
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

void bias_add(const bf16* x, const bf16* bias, bf16* out, int64_t rows, int64_t n);
std::vector<TileKernel> bias_add_kernels();

}  // namespace tessera::kernels
