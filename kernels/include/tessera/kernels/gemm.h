#pragma once
// GEMM block: C[m, n] = A[m, k] * B[k, n] on one compute tile, with an fp32
// accumulator object that stays in L1 across the k steps of a builder's loop.
//
// Registered kernels (args in order; all objects row-major, dense):
//   gemm_init      (a bf16[m,k], b bf16 B, acc f32[m,n])          acc  = A*B
//   gemm_acc       (a bf16[m,k], b bf16 B, acc f32[m,n])          acc += A*B
//   gemm_finalize  (acc f32[count], c bf16[count])                c = bf16(acc)
//   gemm           (a bf16[m,k], b bf16 B, c bf16[m,n])           c = bf16(A*B)
// params: m, k, n (int); b_layout "kn" (default: B is [k, n]) or "nk" (B is
// [n, k], i.e. an HF weight [out, in] block used without a host transpose);
// a_off (default 0): A starts a_off elements into the a arg (one resident
// [kb][m][k] x object serves every k block); b_off (default 0) likewise for B
// (a [wk][n][k] weight object serves wk k blocks); gemm_finalize takes count.
// Products of bf16 values are exact in fp32; sums are fp32 in k order.
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

struct GemmDims {
  int64_t m = 0, k = 0, n = 0;
  bool b_nk = false;  // B stored [n, k]
  int64_t a_off = 0;  // A starts a_off elements into its arg (a resident, K-blocked x)
  int64_t b_off = 0;  // B starts b_off elements into its arg (a weight object of several K blocks)
};

// acc = A*B (accumulate = false) or acc += A*B.
void gemm_block(const bf16* a, const bf16* b, float* acc, const GemmDims& d, bool accumulate);
void gemm_finalize(const float* acc, bf16* c, int64_t count);

// L1 bytes of the args of one call: A + B + acc (fp32); `fused` (the "gemm"
// kernel) has a bf16 C instead of the fp32 acc but still needs the fp32 sums as
// scratch.
int64_t gemm_l1_bytes(const GemmDims& d, bool fused);
// Matrix-unit cycles: m, k, n each padded to the bf16 mmul granule (4 x 8 x 4
// on AIE-ML: a ragged edge costs a full granule) at the DeviceSpec MAC rate.
npu::KernelCost gemm_cycles(const GemmDims& d, const npu::DeviceSpec& spec);

std::vector<TileKernel> gemm_kernels();

}  // namespace tessera::kernels
