#pragma once
// GEMV block for decode: y[n] = W[n, k] * x[k], W in HF weight layout
// ([out, in], row-major, so a weight row is one contiguous dot product).
//
// Registered kernels (args in order):
//   gemv_init (w bf16[n,k], x bf16[k], acc f32[n])   acc  = W x
//   gemv_acc  (w bf16[n,k], x bf16[k], acc f32[n])   acc += W x   (next k block)
//   gemv      (w bf16[n,k], x bf16[k], y bf16[n])    y = bf16(W x)
// params: n, k, and x_off (default 0): x starts x_off elements into the x arg,
// so a resident x object serves every k block of a K split. A k-split ends with gemm_finalize (count = n) on the acc.
// Each row keeps 16 lane-wise fp32 partial sums folded in a fixed tree.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

// `ahead` / `ahead_far`: bytes later calls read, prefetched into L1 / L2
// while the rows are computed (npu::KernelInvocation::ahead); no effect on
// the result.
void gemv_block(const bf16* w, const bf16* x, float* acc, int64_t n, int64_t k, bool accumulate,
                std::span<const std::byte> ahead = {}, std::span<const std::byte> ahead_far = {});

namespace detail {
// gemv_block() on AVX2 CPUs (gemv_rows.cpp): the same bits, with x widened in
// registers instead of through a scratch row. Call only where the CPU has AVX2.
void gemv_block_avx2(const bf16* w, const bf16* x, float* acc, int64_t n, int64_t k, bool accumulate,
                     std::span<const std::byte> ahead = {}, std::span<const std::byte> ahead_far = {});
}  // namespace detail

int64_t gemv_l1_bytes(int64_t n, int64_t k, bool fused);
// Vector unit, not the matrix unit: one lane-wide bf16 MAC per cycle per
// weight vector, plus a log2(lanes) lane fold per row.
npu::KernelCost gemv_cycles(int64_t n, int64_t k, const npu::DeviceSpec& spec);

std::vector<TileKernel> gemv_kernels();

}  // namespace tessera::kernels
