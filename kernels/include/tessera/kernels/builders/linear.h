#pragma once
// The `linear` design builder: y[M,N] = x[M,K] w[N,K]^T (docs/ops.md).
//
// Two dataflows over the C x R compute tiles, chosen by M:
//  - gemv (decode, small M): every tile owns its own N rows, so the weights
//    stream from DDR exactly once, split over all C*R tiles (column c's shim
//    feeds its mem tile, which splits each object over the column's R tiles);
//    x is broadcast from shim 0 to all tiles (resident when K fits in one
//    block, else re-streamed per output block - it is tiny next to W).
//  - gemm (prefill, large M): tile (c, r) owns M blocks of row r and N blocks
//    of column c; x row blocks are broadcast along a compute row straight from
//    shim r, weight blocks go down a column through its mem tile (broadcast to
//    the R tiles), fp32 accumulation across K stays in the tile.
// In both, output blocks are joined per column in the mem tile and leave by
// the column's shim. pack() pads M, K and N with zeros to the tiling and lays
// the tensors out blocked in the order the streams read them (x per row group,
// w and y per column), so every shim transfer is one contiguous run; zero K
// padding adds exact zeros, padded rows / columns of y are never read back.
#include <cstdint>

#include "tessera/kernels/op_builder.h"

namespace tessera::kernels {

struct LinearPlan {
  int64_t M = 0, K = 0, N = 0;
  bool gemm = false;      // dataflow (see above)
  int C = 0, R = 0;       // columns and compute rows used
  int64_t m = 0, k = 0, n = 0;  // per-call block: x [m,k], w [n,k], y [m,n]
  int64_t kb = 0;         // K blocks: Kp = kb * k
  int64_t S = 0;          // M steps: Mp = S * Rm * m
  int64_t NB = 0;         // N blocks per tile: Np = C * NB * Rn * n
  int64_t s_per_launch = 0;
  int Rm() const { return gemm ? R : 1; }  // row groups sharing an M step
  int Rn() const { return gemm ? 1 : R; }  // tiles of a column splitting N
  int64_t Mp() const { return S * Rm() * m; }
  int64_t Kp() const { return kb * k; }
  int64_t Np() const { return C * NB * Rn() * n; }
  int64_t l1_bytes() const;  // per tile, objects at their FIFO depths
};

// TileOptions keys: "gemm" (0|1), "m", "k", "n", "columns", "rows". Throws
// LimitError naming the op, the shape and the limit when nothing fits.
LinearPlan plan_linear(int64_t M, int64_t K, int64_t N, const npu::DeviceSpec& spec,
                       const TileOptions& tiles = {});

BuiltOp build_linear(const OpShape& shape, const npu::DeviceSpec& spec,
                     const TileOptions& tiles = {});

}  // namespace tessera::kernels
