#pragma once
// FlashAttention block for prefill: one tile owns a block of query rows (all
// heads of one GQA group, so the K/V block is shared) and streams K/V blocks
// through an online softmax whose running state stays in L1.
//
// Layouts (row-major, dense):
//   q     bf16[q_rows, group, head_dim]  query positions q_pos0 .. q_pos0+q_rows-1,
//                                         the `group` query heads of one KV head
//   k, v  bf16[kv_rows, head_dim]         key positions k_pos0 .. k_pos0+kv_rows-1
//   state f32 [R] m | [R] l | [R, head_dim] o     R = q_rows * group
//         m running max of the scaled scores (-inf before any key), l running
//         sum of exp(s - m), o running sum of exp(s - m) * v.
//   out   bf16[q_rows, group, head_dim]
// Registered kernels (args in order; params in brackets):
//   attn_init     (state)                 [rows = R, head_dim]
//   flash_attn    (q, k, v, state)        [q_rows, group, kv_rows, head_dim, q_pos0,
//                                          k_pos0, causal (0/1, default 1),
//                                          scale (float, default 1/sqrt(head_dim))]
//   attn_scores   (q, k, p, state)        [flash_attn's]  the first half of flash_attn:
//                                         scores, online softmax of (m, l), o rescaled;
//                                         p bf16[R, kv_rows] gets the weights
//   attn_pv       (p, v, state)           [flash_attn's]  the second half: o += p v
//   attn_copy     (src, dst)              [elems]  bf16 copy (a q object captured)
//   attn_merge    (state_a, state_b)      [rows, head_dim]   a = a (+) b
//   attn_finalize (state, out)            [rows, head_dim]   out = bf16(o / l)
// attn_scores then attn_pv with the same params is flash_attn bit for bit: the
// weights are exp_tile results (bf16 values), so p holds them exactly, and o
// takes the same rescale and the same p v sums in the same order. The split
// lets a tile release K before it needs V (K and V on their own streams).
// kv_rows may be smaller than the K/V objects (a ragged last block): rows
// beyond kv_rows are never read, so padding cannot leak into the softmax.
// With causal = 1, query position p sees keys at positions <= p only.
//
// Numerics (as a tile computes them): scores q.k accumulate in fp32 (bf16
// products are exact) and stay in the fp32 accumulator through the scale and
// the max subtraction (AIE-ML adds/subtracts fp32 on accumulators); only the
// difference s - m becomes the bf16 operand of exp. Rounding s itself to bf16
// first would cost u|s| absolute - 0.4 at a score of 100, a 50 % weight error
// on the keys that matter - while rounding s - m costs u|s - m|, which
// vanishes on exactly those keys. p = exp_tile(s - m) is bf16, so p.v is again an exact-product
// fp32 accumulation; l and o stay fp32 across blocks; the rescale factor
// exp_tile(m_old - m_new) is bf16; finalize multiplies by the fp32 reciprocal.
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

struct AttnBlock {
  int64_t q_rows = 1;
  int64_t group = 1;
  int64_t kv_rows = 0;
  int64_t head_dim = 0;
  int64_t q_pos0 = 0;
  int64_t k_pos0 = 0;
  bool causal = true;
  float scale = 0.0f;
};

inline int64_t attn_state_floats(int64_t rows, int64_t head_dim) { return rows * (head_dim + 2); }

void attn_state_init(float* state, int64_t rows, int64_t head_dim);
void attn_block(const bf16* q, const bf16* k, const bf16* v, float* state, const AttnBlock& b);
void attn_scores(const bf16* q, const bf16* k, bf16* p, float* state, const AttnBlock& b);
void attn_pv(const bf16* p, const bf16* v, float* state, const AttnBlock& b);
void attn_merge(float* a, const float* b, int64_t rows, int64_t head_dim);
// Throws KernelNumericError when a row saw no key (l = 0): its output would be
// 0/0, which means the builder's blocking or masking is wrong.
void attn_finalize(const float* state, bf16* out, int64_t rows, int64_t head_dim);

// A numerical impossibility detected inside a kernel body.
struct KernelNumericError : InternalError {
  using InternalError::InternalError;
};

// Reads the flash_attn / decode_attn params (q_rows defaults to 1 and causal
// to `causal_default`).
AttnBlock attn_block_params(const npu::KernelParams& p, const char* kernel, bool causal_default);
// L1 bytes of q, k, v and state for one block call.
int64_t attn_block_l1_bytes(const AttnBlock& b);

std::vector<TileKernel> flash_attention_kernels();

}  // namespace tessera::kernels
