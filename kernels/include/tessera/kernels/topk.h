#pragma once
// Argmax / top-k over a block of logits with mergeable partial results: the LM
// head's logits arrive in vocab blocks (over tiles and over time), each block
// updates a running top-k, and partial top-ks of different tiles merge.
//
// State: k TopkEntry {float value; int32 index}, best first. Order: larger
// value first; equal values by smaller index (torch.argmax / topk keep the
// first occurrence), so the result does not depend on the blocking. Empty
// slots hold (-inf, -1). Argmax is k = 1.
//   topk_init  (state)                       params: k
//   topk_block (logits bf16[n], state)       params: n, k, index0 (vocab index
//                                            of logits[0])
//   topk_merge (state_a, state_b)            params: k    a = top-k of a and b
// A NaN logit throws KernelNumericError naming its index (a NaN cannot be
// ranked, and silently skipping it would hide a numerical failure upstream).
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

struct TopkEntry {
  float value;
  int32_t index;
};

void topk_init(TopkEntry* state, int64_t k);
void topk_block(const bf16* logits, int64_t n, int64_t index0, TopkEntry* state, int64_t k);
void topk_merge(TopkEntry* a, const TopkEntry* b, int64_t k);

std::vector<TileKernel> topk_kernels();

}  // namespace tessera::kernels
