#pragma once
// The attention design builders (docs/ops.md: attention_prefill, attention_decode).
//
// attention_prefill (FlashAttention, kernels flash_attn / attn_init /
// attn_finalize): a work unit is (KV head h, query block of bq rows) with the
// `group` query heads of h, so one K/V block serves the whole GQA group. A
// column takes "rounds": in round (h, j) its R tiles own query blocks j*R+r of
// head h; the K/V blocks of h stream from the column's shim and are
// broadcast to the R tiles (each tile calls flash_attn on the blocks its rows
// can see and only releases the fully masked tail, so no masked block costs a
// call). Q blocks reach the tiles through a mem-tile split, outputs leave
// through a mem-tile join. Blocks entirely in the past of a query block run
// with causal = 0; the diagonal / ragged last block carries its own q_pos0,
// k_pos0 and kv_rows, so S, P not multiples of the blocks stay exact.
// Rounds are dealt to the columns heaviest first in a snake order, so the
// rounds that share a launch carry about the same causal work in every column.
//
// attention_decode (kernels decode_attn / attn_merge): launch 1 splits the
// context of every KV head over C*R tiles (item (h, chunk) per column round,
// sub-chunk r per tile; K/V through a mem-tile split, q broadcast), each tile
// leaving its partial (m, l, o) state; launch 2 merges the states of each head
// on one tile per column and finalizes. Ragged last blocks carry kv_rows;
// tiles past the end of the context only release their (zero) objects and
// contribute an empty state, which attn_merge ignores.
//
// pack() lays q / k / v out blocked in stream order (zero padded); unpack()
// reads only the valid rows, so padding never reaches a result.
//
// Resident KV (attention_decode TileOptions "cache_rows" = R >= T): k and v are
// read where the cache lives between decode steps instead, host buffers
// "k_cache" / "v_cache" holding [kv_heads][R][head_dim] bf16, head-major (row
// t of head h = position t, rows past T unused), the layout kv_append with
// "cache_rows" = R and "cache_head_dim" = head_dim writes in place. It does
// not depend on T, so no step re-packs the cache; a tile's block is one
// contiguous run (whole DDR bursts, where a row-major cache gave a run of
// head_dim per row). The shim takes one task per (round, block, K|V), so the
// partial launch is split by rounds into launches whose tasks fit its BDs; a
// single round past them is a LimitError.
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/kernels/op_builder.h"

namespace tessera::kernels {

struct PrefillRound {
  int64_t h = 0, j = 0;  // KV head, query super-block (tile r owns block j*R + r)
  int64_t nkv = 0;       // K/V blocks streamed (what its last valid tile needs)
};

struct PrefillPlan {
  int64_t S = 0, P = 0, heads = 0, kv_heads = 0, D = 0, G = 0;
  double scale = 0;
  int C = 0, R = 0;
  int64_t bq = 0, bk = 0;
  int kv_depth = 4, q_depth = 2;
  int64_t T() const { return P + S; }
  int64_t QB = 0, NKB = 0;   // query blocks, K/V blocks per head
  std::vector<std::vector<PrefillRound>> rounds;  // per column
  int64_t rounds_per_launch = 0;
  int64_t rows() const { return bq * G; }          // state rows of one unit
  int64_t q_elems() const { return rows() * D; }   // one unit's q / out object
  int64_t l1_bytes() const;
};

// TileOptions keys: "bq", "bk", "kv_depth", "columns", "rows".
PrefillPlan plan_attention_prefill(const OpShape& shape, const npu::DeviceSpec& spec,
                                   const TileOptions& tiles = {});
BuiltOp build_attention_prefill(const OpShape& shape, const npu::DeviceSpec& spec,
                                const TileOptions& tiles = {});

// The published configuration of FlashAttention prefill (mlir-air's
// attn_npu2_seqfirst: LQP = qtiles * bq query rows per iteration, LKP = bk,
// a cascade of `stages` cores over K/V; attention_prefill_cascade.cpp). An
// iteration gives each of H segments (NQ columns x NS rows) one query head:
// column tx of segment g owns query block lx * NQ + tx of head hp * H + g,
// and row s of every column attends over K/V blocks [s * cps, (s + 1) * cps)
// of that head's KV head. Each stage's K/V blocks stream from one shim and are
// broadcast to the NQ columns of its row -- all of them, as the published
// kernel streams them; fully masked blocks cost no call. The partial
// (m, l, o) states then fold along the column from the last stage to the
// first (stage s merges s + 1's state into its own: a right fold, the order
// AttnSchedule::cascade names), through shared memory between vertical
// neighbours, and stage 0 finalizes. Iterations run head group by head group
// (hp outer, lx inner), so one K/V pattern repeated LX times feeds a group.
struct CascadePlan {
  int64_t S = 0, P = 0, heads = 0, kv_heads = 0, D = 0, G = 0;
  double scale = 0;
  int NQ = 4, NS = 4, H = 2;  // q tiles (columns) per segment, cascade stages (rows), segments
  int64_t bq = 0, bk = 0;
  int q_depth = 2, kv_depth = 2;
  int64_t QB = 0, NKB = 0, cps = 0;  // query blocks, K/V blocks per head, blocks per stage
  int64_t LX = 0, HP = 0;            // query super-blocks of NQ * bq rows, head groups
  int64_t groups_per_launch = 0;
  bool kv_split = false;       // K and V on their own streams (below)
  int64_t iters_per_run = 0;   // kv_split: iterations between sequence waits
  // Fully masked K/V blocks: streamed and released without a call (true), or
  // computed and masked like any diagonal block (false: the published kernel
  // before its causal_skip option, Xilinx/mlir-air 5caadbfbf, 2026-08).
  bool causal_skip = true;
  int64_t T() const { return P + S; }
  int C() const { return H * NQ; }
  int64_t iters() const { return HP * LX; }  // per column, over all launches
  int64_t q_elems() const { return bq * D; }
  int64_t l1_bytes() const;  // stage 0's (q, K/V, state, out): the fullest tile
};

//
// "kv_split" = 1 streams K and V apart, as the source does (QKIn_s / VIn_s):
// stage s of segment g takes, per iteration, the segment's NQ q objects and
// then its K blocks on qk{g}_{s}, and its V blocks on v{g}_{s}, both from the
// shim of column g * NQ + s, single-buffered (aircc's omit_pingpong). A core
// keeps its own q object (attn_copy into "qbuf": the source's selective
// capture; a third input stream would exceed its 2 S2MM channels), and per
// block calls attn_scores on K, releases K, then attn_pv on V: K refills while
// the core works on V and V while it works on the next K, where the joint
// stream holds both through one flash_attn call. Needs bq == bk (q objects
// and K blocks share the stream); the L1 holds the bf16 weights p in place of
// the second q buffer. Three shim tasks per iteration: the sequence waits
// every iters_per_run iterations so the BDs are reused, in one launch.
// TileOptions keys: "cascade" (stages, >= 1 selects this design), "qtiles",
// "bq", "bk", "kv_split" (0 | 1), "causal_skip" (1 | 0, above), "run_iters"
// (kv_split: iterations per run of shim tasks, at most what the BDs hold; 1 =
// a wait after every iteration, as the source's runtime_loop_tiling_sizes
// [1, 1]). build_attention_prefill hands options with "cascade" here.
CascadePlan plan_attention_cascade(const OpShape& shape, const npu::DeviceSpec& spec,
                                   const TileOptions& tiles);
BuiltOp build_attention_cascade(const OpShape& shape, const npu::DeviceSpec& spec,
                                const TileOptions& tiles);

// K (slot 0) or V (slot 1) rows [T, kv_heads * D] into host buffer "kv" laid
// out [kv_heads][NKB][2][bk][D], zero padded (both prefill designs).
void pack_prefill_kv(int64_t T, int64_t kv_heads, int64_t D, int64_t bk, const npu::Design& d,
                     std::span<const float> x, int slot, npu::HostMemory& host);

struct DecodePlan {
  int64_t T = 0, heads = 0, kv_heads = 0, D = 0, G = 0;
  double scale = 0;
  int C = 0, R = 0;
  int64_t bk = 0;
  int64_t NKB = 0;     // K/V blocks per head
  int64_t NCH = 0;     // column items per head
  int64_t nb = 0;      // blocks per tile per item
  int64_t rounds = 0;  // items per column
  int64_t cache_rows = 0;  // > 0: resident K/V buffers of this many rows
  int64_t rounds_per_launch = 0;  // partial launches take this many rounds each
  int64_t state_floats() const { return G * (D + 2); }
  int64_t l1_bytes() const;
};

// TileOptions keys: "bk", "columns", "rows", "cache_rows".
DecodePlan plan_attention_decode(const OpShape& shape, const npu::DeviceSpec& spec,
                                 const TileOptions& tiles = {});
BuiltOp build_attention_decode(const OpShape& shape, const npu::DeviceSpec& spec,
                               const TileOptions& tiles = {});

}  // namespace tessera::kernels
