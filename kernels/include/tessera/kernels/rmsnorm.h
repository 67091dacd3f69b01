#pragma once
// RMSNorm with weight (HF LlamaRMSNorm): per row,
//   out = bf16( x * rsqrt(mean(x^2) + eps) * w )
// sum of squares in fp32 (16 lane partials), rsqrt in fp32 (aie::invsqrt),
// both multiplies in fp32, one rounding at the end. (HF in bf16 rounds
// x * rsqrt to bf16 before the weight multiply; we round once, which is the
// closer of the two to the fp32 oracle.)
//   rmsnorm (x bf16[rows, n], w bf16[n], out bf16[rows, n]);
//   params: rows, n, eps (float, required: models differ, 1e-5 / 1e-6).
// out may be the same object as x.
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

void rmsnorm_rows(const bf16* x, const bf16* w, bf16* out, int64_t rows, int64_t n, float eps);
// Per row: square-accumulate one op per vector, then lane fold + rsqrt
// (kRowCycles), then two multiplies per vector.
npu::KernelCost rmsnorm_cycles(int64_t rows, int64_t n, const npu::DeviceSpec& spec);
double required_eps(const npu::KernelParams& p, const char* kernel);
std::vector<TileKernel> rmsnorm_kernels();

}  // namespace tessera::kernels
