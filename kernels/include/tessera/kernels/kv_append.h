#pragma once
// KV-cache append: copies `rows` new K or V rows of one KV head into a cache
// block at row dst_row, in the layout the attention kernels read.
//   kv_append (src bf16[rows, src_stride], dst bf16 cache block)
//   params: rows, head_dim, dst_row, capacity (rows of the cache block),
//           src_stride (default head_dim), src_col (default 0: the head's first
//           column inside a [rows, kv_heads * head_dim] projection output),
//           layout "rows" (default; dst [capacity, head_dim]) or "transposed"
//           (dst [head_dim, capacity], keys as k^T columns).
// A copy: values are bit-exact, no rounding.
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

struct KvAppend {
  int64_t rows = 0, head_dim = 0, dst_row = 0, capacity = 0;
  int64_t src_stride = 0, src_col = 0;
  bool transposed = false;
};

void kv_append(const bf16* src, bf16* dst, const KvAppend& a);
std::vector<TileKernel> kv_append_kernels();

}  // namespace tessera::kernels
