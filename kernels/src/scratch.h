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

inline void bf16_to_f32_n(const bf16* in, float* out, int64_t n) {
  bf16_to_f32(std::span<const bf16>(in, static_cast<size_t>(n)),
              std::span<float>(out, static_cast<size_t>(n)));
}

}  // namespace tessera::kernels
