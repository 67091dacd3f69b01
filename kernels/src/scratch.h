#pragma once
// Host-side scratch for kernel bodies: fp32 copies of bf16 operands so the hot
// loops run on plain floats. This is host memory, not modelled L1: on a tile
// the conversion happens in vector registers. Thread-local because the
// simulator may run tiles on several threads; slots keep two live scratch
// arrays of one call apart.
#include <cstddef>
#include <cstdint>
#include <span>

#include "tessera/core/bf16.h"

namespace tessera::kernels {

enum class ScratchSlot { gemm_a, gemm_b, gemm_acc, attn_k, attn_v, attn_s, row, table, count_ };

float* scratch_f32(ScratchSlot slot, int64_t count);

// Inline, with a fixed-width inner loop: GCC's -O2 cost model vectorizes that
// (in each TESSERA_VECTOR_CLONES caller's own ISA), not an open-ended loop; the
// out-of-line core conversion ran scalar, as long as the GEMV it fed.
inline void bf16_to_f32_n(const bf16* __restrict in, float* __restrict out, int64_t n) {
  constexpr int64_t kBlock = 16;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    for (int64_t l = 0; l < kBlock; ++l) out[i + l] = bf16_to_f32(in[i + l]);
  for (; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}

}  // namespace tessera::kernels
