#pragma once
// Rotary position embedding, HF rotate_half layout: element i of a head pairs
// with element i + d/2 (not i + 1), both rotated by the angle of frequency i:
//   out[i]       = x[i] cos_i - x[i + d/2] sin_i
//   out[i + d/2] = x[i + d/2] cos_i + x[i] sin_i        (i < d/2)
// The cos/sin table is an input (oracle::RopeTable rows, half width), so rope
// scaling (llama3) is the table's business, not the kernel's. Row r of x uses
// table row r: the builder moves the table rows of the positions it sends.
//   rope (x bf16[rows, heads, head_dim], cos T[rows, head_dim/2],
//         sin T[rows, head_dim/2], out bf16[rows, heads, head_dim]);
//   params: rows, heads, head_dim (even), table "f32" (default) or "bf16"
//   (T = float or bf16; HF casts cos/sin to the activation dtype, so a bf16
//   table reproduces a bf16 HF model). out may be the same object as x.
#include <cstdint>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

struct RopeDims {
  int64_t rows = 0, heads = 0, head_dim = 0;
};

// Table rows as float (convert a bf16 table first).
void rope_rows(const bf16* x, const float* cos, const float* sin, bf16* out, const RopeDims& d);
std::vector<TileKernel> rope_kernels();

}  // namespace tessera::kernels
