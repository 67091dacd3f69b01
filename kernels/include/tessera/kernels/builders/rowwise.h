#pragma once
// Shared dataflow of the row-wise builders (rmsnorm, head_rmsnorm, rope,
// bias_add, silu_mul, residual_add, kv_append): the logical tensors are viewed
// as [rows, cols] and cut into blocks of m rows, spread over C columns x R
// compute tiles. Column c owns a contiguous run of rows: its shim streams the
// column's blocks to its mem tile, which splits each object over the R tiles;
// results are joined in the mem tile and leave by the same shim.
//  - P streamed inputs travel as P consecutive objects of ONE fifo (a tile
//    acquires P and names them in[0..P-1]): a compute tile has only two input
//    channels and a mem tile six outputs, so a second stream would not fit.
//  - A constant vector (norm weight, bias) is broadcast once from shim 0 to
//    every tile and held for the whole program.
//  - heads mode (rope): the R tiles of a column share the rows and split the
//    columns into head groups, so the per-row f32 side table (cos, sin: two
//    objects per step) is broadcast from the column's shim to its tiles.
// pack() zero-fills every padded row / column / trailing element; zero rows
// stay zero through every kernel (rmsnorm of 0 is 0 * rsqrt(eps) = 0) and
// padded outputs are never read back.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/kernels/activation_layout.h"
#include "tessera/kernels/op_builder.h"

namespace tessera::kernels {

// The blocked x layout of a gemm (kernels/builders/linear.h): host buffers
// x_r0..x_r{R-1}, each [S][kb][m][k] of the rows r*m.. of every M step of
// R * m rows, zero where a block runs past M. A row-wise op asked for it
// (TileOptions kGemmX*, activation_layout.h) writes its output there, so the
// gemm reading it needs no re-layout and still streams x in whole blocks.
struct GemmXLayout {
  int64_t m = 0, k = 0, R = 0;  // the gemm's row block, K block, row groups
  int64_t M = 0, K = 0;         // logical rows and row length of the tensor
  bool on() const { return m > 0; }
  int64_t S() const { return (M + R * m - 1) / (R * m); }
  int64_t kb() const { return (K + k - 1) / k; }
  int64_t buffer_elems() const { return S() * kb() * m * k; }
  int buffer(int64_t row) const { return static_cast<int>(row / m % R); }
  int64_t index(int64_t row, int64_t col) const {
    return ((row / (R * m) * kb() + col / k) * m + row % m) * k + col % k;
  }
};
// The layout the tile options ask for (off without kGemmXM); LimitError when
// K is not whole k blocks (one row, a gemv's x: zero-padded to them) or a
// block exceeds the shim BD limits.
GemmXLayout gemm_x_layout(const std::string& what, const TileOptions& tiles, int64_t M, int64_t K,
                          const npu::DeviceSpec& spec);
std::string gemm_x_buffer(int r);  // "x_r0", as the linear builder names them
// Shim tasks writing the logical elements [a, b) of a row-major stream from
// `fifo` into the layout, `repeat` times; LimitError for a run that does not
// start and end on k-block boundaries.
void add_gemm_x_writes(std::vector<npu::DmaTask>& out, const std::string& fifo,
                       const GemmXLayout& g, int64_t a, int64_t b, int64_t repeat,
                       const npu::DeviceSpec& spec, const std::string& what);

struct RowwiseSpec {
  std::string what;      // op key for names and errors
  std::string kernel;
  int64_t rows = 0;      // logical rows of each streamed tensor
  int64_t cols = 0;      // logical columns (heads mode: heads * unit)
  int64_t numel = 0;     // valid elements (flat views end in a partial row)
  int P = 1;             // streamed inputs
  int64_t heads = 0;     // > 0: heads mode with column groups of `unit`
  int64_t unit = 0;
  int64_t const_elems = 0;  // bf16 vector broadcast to every tile
  int64_t side_cols = 0;    // f32 per-row side table (2 objects per step)
  // Kernel params for a block of m rows x wt columns.
  std::function<npu::KernelParams(int64_t m, int64_t wt)> params;
  bool kernel_has_output = true;  // args end with the out object
  // When set, outputs land in this host buffer (rows offset by out_row0, of
  // out_rows rows) instead of per-column output buffers: zero-copy writes.
  std::string out_host;
  int64_t out_row0 = 0, out_rows = 0;
  // > 0: out_host is head-major, [cols / out_unit][out_rows][out_unit] (the
  // resident KV cache: each head's rows one contiguous run), else row-major.
  int64_t out_unit = 0;
  // kRowMajorTile: streams and output in one row-major buffer each (below).
  bool rowmajor = false;
  // Only positions matter (build_elementwise2's flat rows of kFlatWidth):
  // the builder may pick another width, e.g. so an object is whole rows of a
  // gemm's x (gemm_x below).
  bool flat = false;
  // With rowmajor: the output in a gemm's blocked x layout instead of y_rows.
  GemmXLayout gemm_x;
};

struct RowwisePlan {
  int C = 0, R = 0;
  int64_t m = 0, S = 0, wt = 0;
  int64_t l1_bytes = 0;
  int64_t rows_padded() const { return heads_mode ? C * S * m : int64_t{C} * S * R * m; }
  bool heads_mode = false;
};

// TileOptions keys: "m" (rows per block), "columns", "rows".
RowwisePlan plan_rowwise(const RowwiseSpec& s, const npu::DeviceSpec& spec,
                         const TileOptions& tiles);
npu::Design make_rowwise_design(const RowwiseSpec& s, const RowwisePlan& p,
                                const npu::DeviceSpec& spec);

// The canonical (row-major) variant, rowwise_rowmajor.cpp: stream p lives in
// host buffer rowmajor_in(p), the output in "y_rows", each exactly numel
// bf16. Object (c, s) of a column (R blocks of m rows, contiguous in the flat
// view) starts at min(((c * S + s) * R * m) * wt, numel - object): objects past
// the end re-read the last whole object and write back the same values, so
// there is no padding and no garbage. In heads mode (rope) an object is m
// whole rows, cut [R][m][wt] by one 3-D shim task per step, and the side
// table stays blocked (host-made), its rows following the clamped objects.
// Throws LimitError for padded heads, side tables outside heads mode,
// zero-copy outputs, or a tensor smaller than one object.
// Several streams alternate object by object in one fifo, a shim task each,
// so the steps are split over launches that fit the shim's BDs.
std::string rowmajor_in(int p);
void check_rowmajor(const RowwiseSpec& s, const RowwisePlan& p);
int64_t rowmajor_steps_per_launch(const RowwiseSpec& s, const RowwisePlan& p,
                                  const npu::DeviceSpec& spec);
// The shim tasks of steps [s0, s0 + steps) of every column (p: the whole plan).
void add_rowmajor_io(npu::Launch& l, const RowwiseSpec& s, const RowwisePlan& p,
                     const npu::DeviceSpec& spec, int64_t s0, int64_t steps);

// How a logical input reaches the design.
struct RowwiseInput {
  enum class Role { stream, constant, side, out_init } role = Role::stream;
  // stream p / side object (0 cos, 1 sin) / out_init: the out_host tensor
  // itself (padded stream rows take its values, so writing them back is an
  // identity).
  int index = 0;
};

// Element (row, col) of a zero-copy out_host in its layout (out_unit).
int64_t rowwise_out_index(const RowwiseSpec& s, int64_t row, int64_t col);

// Validated design + pack / unpack for the given inputs (in OpShape order).
BuiltOp build_rowwise(const OpShape& shape, const RowwiseSpec& s, const npu::DeviceSpec& spec,
                      const TileOptions& tiles, std::vector<OpTensor> inputs,
                      std::vector<RowwiseInput> roles, OpTensor output);

// Two-input elementwise ops on [M, N] (silu_mul, residual_add): the tensors
// are viewed flat as rows of kFlatWidth elements, since only position matters
// (long rows like 11008 would not double-buffer in L1 as whole rows).
constexpr int64_t kFlatWidth = 512;
BuiltOp build_elementwise2(const OpShape& shape, const std::string& kernel,
                           const npu::DeviceSpec& spec, const TileOptions& tiles,
                           const std::string& a, const std::string& b, const std::string& out);

}  // namespace tessera::kernels
