#pragma once
// Decode attention: one new query token (the `group` query heads of one KV
// head) over one block of the KV cache. The state is the running (m, l, o) of
// flash_attention.h, so a builder can split the context over tiles (each tile
// one run of KV blocks, its own state), join the states with attn_merge and
// finish with attn_finalize.
//   decode_attn (q bf16[group, head_dim], k bf16[kv_rows, head_dim],
//                v bf16[kv_rows, head_dim], state f32)
//   params: group, kv_rows, head_dim, scale (float, default 1/sqrt(head_dim)).
// Every key in the block is visible (the cache holds positions <= the query's
// own); kv_rows marks the valid rows of a ragged last block.
// Cost differs from flash_attn: with one query row the score and p.v products
// are matrix-vector work on the vector unit, not the matrix unit.
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

std::vector<TileKernel> decode_attention_kernels();

}  // namespace tessera::kernels
