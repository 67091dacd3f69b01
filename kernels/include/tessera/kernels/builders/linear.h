#pragma once
// The `linear` design builder: y[M,N] = x[M,K] w[N,K]^T (docs/ops.md).
//
// Two dataflows over the C x R compute tiles, chosen by M:
//  - gemv (decode, small M; linear_gemv.cpp): the weights stream from DDR
//    exactly once per M step over every shim MM2S channel the array has:
//    each channel is a weight "stream" feeding T = R / streams_per_column tiles
//    of its column through the mem tile (a split), and shim 0 gives one of its
//    channels to x, broadcast to every tile (so column 0 has one stream fewer
//    and its last T tiles idle). x stays resident in L1 for the whole M step
//    when it fits (a K split then reads its k blocks at an offset), else it
//    is re-streamed per output block (long K with several prompt rows).
//    Weight streaming is then bound by DDR, not by one port per column.
//  - gemm (prefill, large M): tile (c, r) owns M blocks of row r and N blocks
//    of column c; x row blocks are broadcast along a compute row straight from
//    shim r, weight blocks go down a column through its mem tile (broadcast to
//    the R tiles), fp32 accumulation across K stays in the tile. With the
//    weight panel ("panel", the default when it fits the mem tile's memory and
//    BDs) the loops run N blocks outer: the K panel of a column's N block is
//    staged once in L2 and re-sent to the cores for every M step of the launch
//    (Fifo::repeat), so W crosses DDR once per launch and x once per N block;
//    without it W is re-read per M step and x per N block. A mem-tile BD per
//    panel object bounds kb: past it (K >= 2560 at k = 64) an object holds
//    two K blocks (wk = 2, n shrunk to fit L1). With a row-major y, launches
//    split the N blocks rather than the M steps, so W is still read once.
//    The panel must hold all of K for n columns (n * K * 2 bytes): at
//    K = 8192 it does not fit 512 KiB, and the operands stream per pass,
//    unless a partial panel (LinearPlan::panel_k) keeps its first K blocks
//    in L2 and re-reads only the rest per M step.
// In both, output blocks are joined per column in the mem tile and leave by
// the column's shim. pack() pads M, K and N with zeros to the tiling and lays
// the tensors out blocked in the order the streams read them (x per row group,
// w per column or per stream, y per column), so every shim transfer is one
// contiguous run; zero K padding adds exact zeros, padded rows / columns of y
// are never read back.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "tessera/kernels/activation_layout.h"
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
  // N blocks per launch (panel + row-major y only; else NB): such a launch
  // writes each N block's rows with one 3-D shim task, so launches split the
  // N blocks, not the M steps, and W still crosses DDR once per op.
  int64_t nb_per_launch = 0;
  bool x_resident = false;  // one x object per M step (all K blocks), read at offsets
  // gemm: the K panel of each column's N block stays in the mem tile and is
  // re-sent to the cores for every M step of the launch (W crosses DDR once
  // per launch instead of once per M step).
  bool panel = false;
  // K blocks per weight object (panel only): a panel of kb blocks needs a
  // mem-tile BD per object, so a long K (kb past the BDs) stages wk blocks
  // per object and the core calls gemm wk times on it (b_off), with n shrunk
  // until the object fits L1 double-buffered.
  int64_t wk = 1;
  // gemm, panel, wk = 1: the K blocks of each N block's panel kept resident
  // in the mem tile when the whole panel does not fit it (TileOptions
  // "panel_k", 0 < panel_k < kb; 0 = the whole panel). They cross DDR once
  // per N block and are re-sent every M step; the other kb - panel_k blocks
  // follow them through the same fifo, read from DDR again per M step
  // (Fifo::repeat_tail). The core's K loop is the panel's, so every output
  // sums its K blocks in the same order: bit-identical to panel = 0.
  int64_t panel_k = 0;
  bool partial_panel() const { return panel && panel_k > 0; }
  // gemm: y objects per tile (TileOptions "y_depth", 1 or 2). One y object
  // frees the 8 KiB of a second for a longer K block (k = 80 instead of 64
  // at 64 x 64: fewer calls, each with the same fixed per-loop overhead).
  // It costs no stall when the tile's K loop per output block carries at
  // least as many bytes per input port as one y object (Kp >= min(m, n)):
  // the previous y has drained before the next block finishes its K loop.
  int y_depth = 2;
  // kRowMajorTile (gemm; gemv: see check_gemv_rows): x and y in one row-major buffer each, the
  // blocks cut by the shim tasks (linear_rowmajor.cpp); M steps past the
  // end re-read the last R * m rows and write them back unchanged.
  bool rowmajor = false;
  // kRowMajorOutTile (gemm; gemv: see check_gemv_rows): y alone row-major, x blocked, the weight
  // panel kept (y leaves per launch as N blocks x the launch's rows).
  bool rowmajor_y = false;
  bool y_rows() const { return rowmajor || rowmajor_y; }
  // gemv: weight streams per column (column 0 gives one channel to x) and
  // the tiles each stream feeds.
  int streams_per_column = 1;
  int streams_col0 = 1;
  int T = 1;
  int Rm() const { return gemm ? R : 1; }  // row groups sharing an M step
  int streams_in(int c) const;             // gemv: weight streams of column c
  int streams() const;                     // gemv: all weight streams
  int first_stream(int c) const;           // gemv: global index of column c's stream 0
  int64_t Mp() const { return S * Rm() * m; }
  int64_t Kp() const { return kb * k; }
  int64_t Np() const { return gemm ? C * NB * n : streams() * NB * T * n; }
  int64_t l1_bytes() const;  // per tile, objects at their FIFO depths
  // gemm: the fp32 accumulator's L1 address, or -1 to let the allocator place
  // it. With one y object it sits right after the x and w pools: the
  // allocator starts each block of a bank or more on a bank boundary when it
  // can, which at k = 80 (x and w pools of 20 KiB) leaves no 16 KiB gap for
  // it; fixed there, w packs against x (sharing one 8 KiB bank) and y takes
  // the last bank.
  int64_t acc_address() const;
};

// TileOptions keys: "gemm" (0|1), "m", "k", "n", "columns", "rows", "streams"
// (gemv weight streams per column), "x_resident" (gemv, 0|1), "panel" (gemm,
// 0|1; off by default with "rowmajor"), "panel_k" (gemm, resident K blocks of
// a partial panel, see LinearPlan::panel_k; never by default), "y_depth" (gemm, 1|2; by default 1
// when it buys a longer K block, else 2), kRowMajorTile (0|1), kRowMajorOutTile
// (0|1). Throws
// LimitError naming the op, the shape and the limit when nothing fits.
LinearPlan plan_linear(int64_t M, int64_t K, int64_t N, const npu::DeviceSpec& spec,
                       const TileOptions& tiles = {});

BuiltOp build_linear(const OpShape& shape, const npu::DeviceSpec& spec,
                     const TileOptions& tiles = {});

// The options the tile search times (OpBuilder::tile_candidates): gemv over
// streams, x residency, K split and n; gemm over m, n, the K block and the
// y depth.
std::vector<TileOptions> linear_tile_candidates(int64_t M, int64_t K, int64_t N,
                                               const npu::DeviceSpec& spec);

// The M steps and N blocks one launch covers.
struct LinearLaunch {
  int64_t s0 = 0, steps = 0;  // M steps [s0, s0 + steps)
  int64_t bb0 = 0, nbl = 0;   // N blocks [bb0, bb0 + nbl) of every column
};

// One launch per s_per_launch M steps and nb_per_launch N blocks.
void add_linear_launches(npu::Design& d, const LinearPlan& p,
                         const std::function<void(npu::Launch&, const LinearLaunch&)>& fill);

// The row-major gemm variant (linear_rowmajor.cpp). Throws LimitError naming
// the shape when the tiling cannot read x / write y without padding.
void check_linear_rowmajor(const LinearPlan& p, const npu::DeviceSpec& spec);
int64_t rowmajor_step_row(const LinearPlan& p, int64_t s);  // first row of M step s
int64_t rowmajor_tasks_per_step(const LinearPlan& p, const npu::DeviceSpec& spec);
void add_rowmajor_sequence(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec,
                           int64_t s0, int64_t steps);
// Column c's y tasks of launch `at` into "y_rows".
void add_rowmajor_y(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec, int c,
                    const LinearLaunch& at);
// The rows of `steps` M steps (panel + row-major y: one N block's y task) as
// shim dims {a, b * N}, {b, N}: returns b, a divisor of rows * m so that
// every shorter launch splits too (a and b within the BD size, b * N within
// its stride), or 0 when none fits.
int64_t rowmajor_row_split(const LinearPlan& p, int64_t steps, const npu::DeviceSpec& spec);

// The gemv dataflow's design and packing (linear_gemv.cpp). Row-major y
// (kRowMajorOutTile, or kRowMajorTile with x plain as well: Kp = K) for one
// row (decode): y is one buffer of N bf16, each column's block object written
// where its rows are, objects past N pulled back to end at N (recomputed rows
// written back unchanged), so there is no padding; LimitError otherwise.
void check_gemv_rows(const LinearPlan& p, const npu::DeviceSpec& spec);
npu::Design make_gemv_design(const LinearPlan& p, const npu::DeviceSpec& spec);
void pack_gemv_w(const LinearPlan& p, const npu::Design& d, std::span<const float> w,
                 npu::HostMemory& host);
std::vector<float> unpack_gemv_y(const LinearPlan& p, const npu::Design& d,
                                 const npu::HostMemory& host);

}  // namespace tessera::kernels
