#pragma once
// Embedding row gather over one block of the embedding table: a builder splits
// the vocab into blocks (the table is far larger than L1) and every block call
// copies the rows of the tokens whose id falls inside it.
//   embedding_gather (ids int32[count], table bf16[block_rows, hidden],
//                     out bf16[count, hidden])
//   params: count, hidden, row0 (vocab id of table row 0), block_rows, vocab.
// Rows of tokens outside [row0, row0 + block_rows) are left untouched; an id
// outside [0, vocab) throws KernelArgError naming the token.
// A copy: values are bit-exact.
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

struct EmbeddingBlock {
  int64_t count = 0, hidden = 0, row0 = 0, block_rows = 0, vocab = 0;
};

// Returns how many rows were copied.
int64_t embedding_gather(const int32_t* ids, const bf16* table, bf16* out, const EmbeddingBlock& b);
std::vector<TileKernel> embedding_kernels();

}  // namespace tessera::kernels
