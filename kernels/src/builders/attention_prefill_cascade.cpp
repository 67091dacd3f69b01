// attention_prefill in the published configuration (CascadePlan in
// kernels/builders/attention.h): q tiles per column, K/V split over a cascade
// of cores whose partial states fold from the last stage to the first.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/attention.h"
#include "tessera/kernels/builders/attention_tiles.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/flash_attention.h"
#include "tessera/kernels/kernel_common.h"
#include "tessera/npu/builder.h"

namespace tessera::kernels {
namespace {

using npu::CoreOp;
namespace b = npu::build;
using attn::ceil_div;
using attn::core;
using attn::kL1Align;
using attn::o_host;
using attn::opt;
using attn::shim;

std::string shape_text(const CascadePlan& p) {
  return fmt::format("attention_prefill (cascade {}) S={} P={} heads={} kv_heads={} head_dim={}",
                     p.NS, p.S, p.P, p.heads, p.kv_heads, p.D);
}

// The unit a column works on in iteration i (hp outer, lx inner).
struct Unit {
  int64_t head = 0, qb = 0;
  bool valid = false;  // a query block inside S (a ragged LQP leaves some empty)
};

Unit unit_of(const CascadePlan& p, int c, int64_t i) {
  const int64_t hp = i / p.LX, lx = i % p.LX;
  const int g = c / p.NQ, tx = c % p.NQ;
  Unit u{hp * p.H + g, lx * p.NQ + tx, false};
  u.valid = u.qb < p.QB;
  return u;
}

std::string kv_fifo(int g, int s) { return fmt::format("kv{}_{}", g, s); }
// kv_split: stage s of segment g takes the segment's q objects, then its K
// blocks, on qk{g}_{s}, and its V blocks on v{g}_{s}.
std::string qk_fifo(int g, int s) { return fmt::format("qk{}_{}", g, s); }
std::string v_fifo(int g, int s) { return fmt::format("v{}_{}", g, s); }

// Column c's q objects: its own buffer [iters][bq][D], or with kv_split its
// segment's [iters][NQ][bq][D] (the order the qk streams carry them in).
std::string q_host(const CascadePlan& p, int c) {
  return p.kv_split ? fmt::format("q_g{}", c / p.NQ) : fmt::format("q_c{}", c);
}
int64_t q_offset(const CascadePlan& p, int c, int64_t i) {
  return (p.kv_split ? i * p.NQ + c % p.NQ : i) * p.q_elems();
}
int64_t q_host_elems(const CascadePlan& p) {
  return p.iters() * p.q_elems() * (p.kv_split ? p.NQ : 1);
}

// Stage s's K/V blocks [b0, b1) (empty when the stage has none).
std::pair<int64_t, int64_t> stage_range(const CascadePlan& p, int s) {
  return {s * p.cps, std::min(p.NKB, (s + 1) * p.cps)};
}
// Stage s's state handed to stage s - 1 (shared memory of vertical neighbours).
std::string cascade_fifo(int c, int s) { return fmt::format("cs{}_{}", c, s); }

npu::KernelParams block_params(const CascadePlan& p, int64_t kv_rows, int64_t q_pos0,
                               int64_t k_pos0, bool causal) {
  return {{"q_rows", p.bq},     {"group", int64_t{1}}, {"kv_rows", kv_rows},
          {"head_dim", p.D},    {"q_pos0", q_pos0},    {"k_pos0", k_pos0},
          {"causal", int64_t{causal ? 1 : 0}}, {"scale", p.scale}};
}

// The FIFOs a stage's blocks arrive on: one stream of (K, V) pairs held
// together by one flash_attn call, or (kv_split) K and V on their own, K
// released after attn_scores so that it refills while attn_pv runs on V.
struct BlockStreams {
  std::string kv, k, v;  // kv empty: split
};

// One block's ops; no params: the block is streamed and released unused.
std::vector<CoreOp> block_ops(const BlockStreams& st, const std::string& q,
                              const std::string& state, const npu::KernelParams* prm) {
  if (!st.kv.empty()) {
    std::vector<CoreOp> ops = {b::acquire_in(st.kv, 2)};
    if (prm) ops.push_back(b::call("flash_attn", {q, st.kv + "[0]", st.kv + "[1]", state}, *prm));
    ops.push_back(b::release_in(st.kv, 2));
    return ops;
  }
  std::vector<CoreOp> ops = {b::acquire_in(st.k)};
  if (prm) ops.push_back(b::call("attn_scores", {q, st.k, "p", state}, *prm));
  ops.push_back(b::release_in(st.k));
  ops.push_back(b::acquire_in(st.v));
  if (prm) ops.push_back(b::call("attn_pv", {"p", st.v, state}, *prm));
  ops.push_back(b::release_in(st.v));
  return ops;
}

// Stage s's K/V blocks for unit u: the blocks wholly before the first query
// row run unmasked in one loop, the diagonal ones carry their offsets, and
// the fully masked tail is released without a call, or (causal_skip false)
// computed with its offsets like a diagonal block: the kernel masks every
// score, so the state, and every bit of the output, is the same either way.
void stage_blocks(const CascadePlan& p, const Unit& u, int s, const BlockStreams& st,
                  const std::string& q, const std::string& state, std::vector<CoreOp>& ops) {
  const auto [b0, b1] = stage_range(p, s);
  if (b1 <= b0) return;
  const int64_t p0 = p.P + u.qb * p.bq;
  const int64_t last = std::min(p0 + p.bq, p.T()) - 1;
  const int64_t seen = u.valid ? std::clamp<int64_t>(last / p.bk + 1, b0, b1) : b0;
  const int64_t past = u.valid ? std::clamp<int64_t>((p0 + 1) / p.bk, b0, seen) : b0;
  if (past > b0) {
    const npu::KernelParams prm = block_params(p, p.bk, p0, 0, false);
    ops.push_back(b::loop(past - b0, block_ops(st, q, state, &prm)));
  }
  const int64_t computed = p.causal_skip || !u.valid ? seen : b1;
  for (int64_t blk = past; blk < computed; ++blk) {
    const npu::KernelParams prm =
        block_params(p, std::min(p.bk, p.T() - blk * p.bk), p0, blk * p.bk, true);
    for (auto& op : block_ops(st, q, state, &prm)) ops.push_back(std::move(op));
  }
  if (b1 > computed) ops.push_back(b::loop(b1 - computed, block_ops(st, q, state, nullptr)));
}

// kv_split: the segment's NQ q objects pass on the stage's qk stream; column
// tx keeps the tx-th in its local "qbuf" (mlir-air's selective capture).
void capture_q(const CascadePlan& p, const Unit& u, int c, const std::string& qk,
               std::vector<CoreOp>& ops) {
  const int tx = c % p.NQ;
  const std::vector<CoreOp> pass = {b::acquire_in(qk), b::release_in(qk)};
  if (tx > 0) ops.push_back(b::loop(tx, pass));
  ops.push_back(b::acquire_in(qk));
  if (u.valid) ops.push_back(b::call("attn_copy", {qk, "qbuf"}, {{"elems", p.q_elems()}}));
  ops.push_back(b::release_in(qk));
  if (tx + 1 < p.NQ) ops.push_back(b::loop(p.NQ - 1 - tx, pass));
}

// Core (c, s)'s program for iteration i: attend over the stage's blocks into
// its state (stage 0: a local buffer; later stages: the object handed down),
// fold in stage s + 1's state, then hand down (s > 0) or finalize (s = 0).
std::vector<CoreOp> iteration_program(const CascadePlan& p, int c, int s, int64_t i) {
  const Unit u = unit_of(p, c, i);
  const int g = c / p.NQ;
  const std::string o = fmt::format("o{}", c);
  const std::string q = p.kv_split ? std::string("qbuf") : fmt::format("q{}", c);
  const std::string state = s == 0 ? std::string("state") : cascade_fifo(c, s);
  const npu::KernelParams st{{"rows", p.bq}, {"head_dim", p.D}};
  const auto [b0, b1] = stage_range(p, s);
  std::vector<CoreOp> ops;
  if (!p.kv_split) ops.push_back(b::acquire_in(q));
  else if (b1 > b0) capture_q(p, u, c, qk_fifo(g, s), ops);
  if (s > 0) ops.push_back(b::acquire_out(state));
  if (u.valid) ops.push_back(b::call("attn_init", {state}, st));
  const BlockStreams streams = p.kv_split ? BlockStreams{"", qk_fifo(g, s), v_fifo(g, s)}
                                          : BlockStreams{kv_fifo(g, s), "", ""};
  stage_blocks(p, u, s, streams, q, state, ops);
  if (s + 1 < p.NS) {
    const std::string next = cascade_fifo(c, s + 1);
    ops.push_back(b::acquire_in(next));
    if (u.valid) ops.push_back(b::call("attn_merge", {state, next}, st));
    ops.push_back(b::release_in(next));
  }
  if (s > 0) {
    ops.push_back(b::release_out(state));
  } else {
    ops.push_back(b::acquire_out(o));
    if (u.valid) ops.push_back(b::call("attn_finalize", {state, o}, st));
    ops.push_back(b::release_out(o));
  }
  if (!p.kv_split) ops.push_back(b::release_in(q));
  return ops;
}

void add_streams(npu::Launch& l, const CascadePlan& p, const npu::DeviceSpec& spec, int64_t i0,
                 int64_t n) {
  const int64_t qobj = p.q_elems() * 2, total = p.iters() * p.q_elems();
  const std::string what = shape_text(p);
  const int64_t head_elems = p.NKB * 2 * p.bk * p.D;
  for (int c = 0; c < p.C(); ++c) {
    std::vector<npu::TileCoord> stages;
    for (int s = 0; s < p.NS; ++s) stages.push_back(core(spec, c, s));
    const std::string qc = fmt::format("q{}", c), oc = fmt::format("o{}", c);
    l.fifos.push_back(b::fifo(qc, shim(c), stages, qobj, p.q_depth));
    l.fifos.push_back(b::fifo(oc, core(spec, c, 0), {shim(c)}, qobj, 1));
    for (int s = 1; s < p.NS; ++s)
      l.fifos.push_back(b::fifo(cascade_fifo(c, s), core(spec, c, s), {core(spec, c, s - 1)},
                                attn_state_floats(p.bq, p.D) * 4, 1, 4));
    l.buffers.push_back({"state", core(spec, c, 0), attn_state_floats(p.bq, p.D) * 4, -1});
    l.sequence.push_back(b::to_device(qc, q_host(p, c), span_pattern(i0 * p.q_elems(), n * p.q_elems(),
                                                                   total, 1, spec, what + " q")));
    // Column g * NQ + s feeds stage s of segment g: one pattern per head
    // group, repeated for the group's LX iterations.
    const int g = c / p.NQ, s = c % p.NQ;
    const auto [b0, b1] = stage_range(p, s);
    const int64_t nb = b1 - b0;
    if (s < p.NS && nb > 0) {
      std::vector<npu::TileCoord> row;
      for (int tx = 0; tx < p.NQ; ++tx) row.push_back(core(spec, g * p.NQ + tx, s));
      l.fifos.push_back(b::fifo(kv_fifo(g, s), shim(c), row, p.bk * p.D * 2, p.kv_depth));
      for (int64_t hp = i0 / p.LX; hp < (i0 + n) / p.LX; ++hp) {
        const int64_t kvh = (hp * p.H + g) / p.G;
        l.sequence.push_back(b::to_device(
            kv_fifo(g, s), "kv",
            span_pattern((kvh * p.NKB + b0) * 2 * p.bk * p.D, nb * 2 * p.bk * p.D,
                         p.kv_heads * head_elems, p.LX, spec, what + " k/v")));
      }
    }
    l.sequence.push_back(b::from_device(oc, o_host(c), span_pattern(i0 * p.q_elems(), n * p.q_elems(),
                                                                     total, 1, spec, what + " out")));
  }
}

// K (slot 0) or V (slot 1) of blocks [b0, b0 + nb) of KV head kvh in the
// host "kv" buffer: nb runs of one block, every other block skipped.
npu::AccessPattern kv_slot_pattern(const CascadePlan& p, const npu::DeviceSpec& spec, int64_t kvh,
                                   int64_t b0, int64_t nb, int slot, const std::string& what) {
  const int64_t blk = p.bk * p.D;
  int64_t w = std::min(blk, spec.bd_max_wrap);
  while (blk % w != 0) --w;
  if (nb > spec.bd_max_size || blk / w > spec.bd_max_size || 2 * blk > spec.bd_max_stride ||
      spec.shim.bd_dims < 3)
    throw_error<LimitError>("{}: {} blocks of {} elements, every other one, are not one shim BD of "
                            "{} ({} dims, wrap <= {}, size <= {}, stride <= {})", what, nb, blk,
                            spec.name, spec.shim.bd_dims, spec.bd_max_wrap, spec.bd_max_size,
                            spec.bd_max_stride);
  return b::pattern({{nb, 2 * blk}, {blk / w, w}, {w, 1}}, ((kvh * p.NKB + b0) * 2 + slot) * blk);
}

// kv_split streams: per stage, qk (the segment's q objects, then the stage's K
// blocks) and v from the shim of column g * NQ + s straight to the row's NQ
// cores, single-buffered as aircc's omit_pingpong builds the source's
// QK2L1 / V2L1; out from stage 0. Each iteration takes three shim tasks (q, K,
// V), so the sequence waits after every iters_per_run iterations to reuse
// the BDs (each wait costs a pipeline drain and refill in the timing model).
void add_split_streams(npu::Launch& l, const CascadePlan& p, const npu::DeviceSpec& spec,
                       int64_t i0, int64_t n) {
  const int64_t qobj = p.q_elems() * 2, total = p.iters() * p.q_elems();
  const std::string what = shape_text(p);
  for (int c = 0; c < p.C(); ++c) {
    l.fifos.push_back(b::fifo(fmt::format("o{}", c), core(spec, c, 0), {shim(c)}, qobj, 1));
    for (int s = 1; s < p.NS; ++s)
      l.fifos.push_back(b::fifo(cascade_fifo(c, s), core(spec, c, s), {core(spec, c, s - 1)},
                                attn_state_floats(p.bq, p.D) * 4, 1, 4));
    l.buffers.push_back({"state", core(spec, c, 0), attn_state_floats(p.bq, p.D) * 4, -1});
    for (int s = 0; s < p.NS; ++s) {
      if (stage_range(p, s).second <= stage_range(p, s).first) continue;
      l.buffers.push_back({"qbuf", core(spec, c, s), qobj, -1});
      l.buffers.push_back({"p", core(spec, c, s), p.bq * p.bk * 2, -1});
    }
  }
  for (int g = 0; g < p.H; ++g)
    for (int s = 0; s < p.NS; ++s) {
      if (stage_range(p, s).second <= stage_range(p, s).first) continue;
      std::vector<npu::TileCoord> row;
      for (int tx = 0; tx < p.NQ; ++tx) row.push_back(core(spec, g * p.NQ + tx, s));
      l.fifos.push_back(b::fifo(qk_fifo(g, s), shim(g * p.NQ + s), row, qobj, 1));
      l.fifos.push_back(b::fifo(v_fifo(g, s), shim(g * p.NQ + s), row, qobj, 1));
    }
  for (int64_t r0 = i0; r0 < i0 + n; r0 += p.iters_per_run) {
    const int64_t r1 = std::min(i0 + n, r0 + p.iters_per_run);
    const size_t first = l.sequence.size();
    for (int g = 0; g < p.H; ++g)
      for (int s = 0; s < p.NS; ++s) {
        const auto [b0, b1] = stage_range(p, s);
        if (b1 <= b0) continue;
        for (int64_t i = r0; i < r1; ++i) {
          const int64_t kvh = (i / p.LX * p.H + g) / p.G;
          l.sequence.push_back(b::to_device(
              qk_fifo(g, s), q_host(p, g * p.NQ),
              span_pattern(q_offset(p, g * p.NQ, i), p.NQ * p.q_elems(), q_host_elems(p), 1, spec,
                           what + " q")));
          l.sequence.push_back(b::to_device(qk_fifo(g, s), "kv",
                                            kv_slot_pattern(p, spec, kvh, b0, b1 - b0, 0, what + " K")));
          l.sequence.push_back(b::to_device(v_fifo(g, s), "kv",
                                            kv_slot_pattern(p, spec, kvh, b0, b1 - b0, 1, what + " V")));
        }
      }
    for (int c = 0; c < p.C(); ++c)
      l.sequence.push_back(b::from_device(
          fmt::format("o{}", c), o_host(c),
          span_pattern(r0 * p.q_elems(), (r1 - r0) * p.q_elems(), total, 1, spec, what + " out")));
    if (r0 > i0) l.sequence[first].after_wait = true;  // the last run's BDs are free
  }
}

npu::Design make_design(const CascadePlan& p, const npu::DeviceSpec& spec) {
  npu::Design d;
  d.name = fmt::format("attention_prefill_cascade_S{}_P{}_h{}_kv{}_d{}_q{}x{}_bk{}_ns{}{}{}{}", p.S,
                       p.P, p.heads, p.kv_heads, p.D, p.NQ, p.bq, p.bk, p.NS, p.kv_split ? "_kvs" : "",
                       p.causal_skip ? "" : "_noskip",
                       p.kv_split && p.iters_per_run != (spec.shim.buffer_descriptors - 1) / 3
                           ? fmt::format("_r{}", p.iters_per_run)
                           : "");
  d.host_buffers.push_back({"kv", p.kv_heads * p.NKB * 2 * p.bk * p.D * 2, 2});
  for (int c = 0; c < p.C(); ++c) {
    if (!p.kv_split || c % p.NQ == 0) d.host_buffers.push_back({q_host(p, c), q_host_elems(p) * 2, 2});
    d.host_buffers.push_back({o_host(c), p.iters() * p.q_elems() * 2, 2});
  }
  const int64_t per_launch = p.groups_per_launch * p.LX;
  for (int64_t i0 = 0; i0 < p.iters(); i0 += per_launch) {
    const int64_t n = std::min(per_launch, p.iters() - i0);
    npu::Launch l;
    l.name = fmt::format("attention_prefill_cascade_i{}", i0);
    if (p.kv_split)
      add_split_streams(l, p, spec, i0, n);
    else
      add_streams(l, p, spec, i0, n);
    for (int c = 0; c < p.C(); ++c)
      for (int s = 0; s < p.NS; ++s) {
        std::vector<CoreOp> prog;
        for (int64_t i = i0; i < i0 + n; ++i) {
          auto ops = iteration_program(p, c, s, i);
          prog.insert(prog.end(), ops.begin(), ops.end());
        }
        l.cores.push_back({core(spec, c, s), std::move(prog)});
      }
    d.launches.push_back(std::move(l));
  }
  return d;
}

// Visits every valid (column, iteration) unit: fn(c, iteration, head, first
// query row).
template <class Fn>
void for_each_unit(const CascadePlan& p, Fn fn) {
  for (int c = 0; c < p.C(); ++c)
    for (int64_t i = 0; i < p.iters(); ++i) {
      const Unit u = unit_of(p, c, i);
      if (u.valid) fn(c, i, u.head, u.qb * p.bq);
    }
}

// Picks the largest bq = bk (the published causal kernel needs tile_size_q ==
// LKP) whose stage-0 tile fits L1, unless the options fix them.
void choose_blocks(CascadePlan& p, const TileOptions& t, const npu::DeviceSpec& spec) {
  for (int64_t blk : {int64_t{64}, int64_t{32}, int64_t{16}, int64_t{8}}) {
    // kv_split: q objects ride the K stream, so one option sets both.
    p.bq = opt(t, "bq", p.kv_split ? opt(t, "bk", blk) : blk);
    p.bk = opt(t, "bk", p.kv_split ? p.bq : blk);
    if (p.l1_bytes() <= spec.compute.memory_bytes) return;
    if (t.count("bq") || t.count("bk")) {
      if (t.count("bq") && t.count("bk")) break;
      if (p.kv_split) break;
    }
  }
  throw_error<LimitError>("{}: no q / K/V block fits the {}-byte L1 of {} (stage 0 holds {}, the "
                          "fp32 state and out; options bq={} bk={})", shape_text(p),
                          spec.compute.memory_bytes, spec.name,
                          p.kv_split ? "one K (behind q), one V, its q and the bf16 weights p"
                                     : fmt::format("q x{}, K/V x{}", p.q_depth, p.kv_depth),
                          opt(t, "bq", 0), opt(t, "bk", 0));
}

// kv_split's limits: q objects and K blocks share a stream (equal objects),
// a stage's shim sends qk and v, a core receives both, and a run of
// iterations (three shim tasks each, plus out) fits the shim's BDs.
void check_split(CascadePlan& p, const TileOptions& t, const npu::DeviceSpec& spec) {
  if (p.bq != p.bk)
    throw_error<LimitError>("{}: kv_split carries q blocks on the K stream, so bq {} must equal "
                            "bk {}", shape_text(p), p.bq, p.bk);
  if (spec.shim.dma_out < 2 || spec.compute.dma_in < 2)
    throw_error<LimitError>("{}: kv_split streams qk and v from one shim to each core: needs 2 "
                            "shim MM2S and 2 compute S2MM channels, {} has {} and {}",
                            shape_text(p), spec.name, spec.shim.dma_out, spec.compute.dma_in);
  const int64_t most = (spec.shim.buffer_descriptors - 1) / 3;
  if (most < 1)
    throw_error<LimitError>("{}: kv_split needs 4 shim BDs per column (q, K, V, out), {} has {}",
                            shape_text(p), spec.name, spec.shim.buffer_descriptors);
  p.iters_per_run = opt(t, "run_iters", most);
  if (p.iters_per_run < 1 || p.iters_per_run > most)
    throw_error<LimitError>("{}: run_iters {} outside [1, {}]: a run's three shim tasks per "
                            "iteration and its out task share the {} BDs of {}", shape_text(p),
                            p.iters_per_run, most, spec.shim.buffer_descriptors, spec.name);
  p.groups_per_launch = p.HP;  // waits, not launches, free the BDs
}

}  // namespace

int64_t CascadePlan::l1_bytes() const {
  auto pool = [](int64_t bytes) { return round_up(bytes, kL1Align); };
  if (kv_split)  // qk and v single, the captured q, the weights p, state, out
    return 2 * pool(bk * D * 2) + pool(q_elems() * 2) + pool(bq * bk * 2) +
           pool(attn_state_floats(bq, D) * 4) + pool(q_elems() * 2);
  return pool(q_depth * q_elems() * 2) + pool(kv_depth * bk * D * 2) +
         pool(attn_state_floats(bq, D) * 4) + pool(q_elems() * 2);
}

CascadePlan plan_attention_cascade(const OpShape& shape, const npu::DeviceSpec& spec,
                                   const TileOptions& tiles) {
  check_tile_keys(shape.key(), tiles,
                  {"cascade", "qtiles", "bq", "bk", "kv_split", "causal_skip", "run_iters"});
  CascadePlan p;
  p.S = shape.dim("S");
  p.P = shape.dim("P");
  p.heads = shape.dim("heads");
  p.kv_heads = shape.dim("kv_heads");
  p.D = shape.dim("head_dim");
  if (p.S < 1 || p.P < 0 || p.heads < 1 || p.kv_heads < 1 || p.D < 2 || p.D % 2 != 0 ||
      p.heads % p.kv_heads != 0)
    throw_error<LimitError>("{}: needs S >= 1, P >= 0, an even head_dim and heads a multiple of "
                            "kv_heads", shape_text(p));
  p.G = p.heads / p.kv_heads;
  p.scale = shape.attr("scale", 1.0 / std::sqrt(static_cast<double>(p.D)));
  p.NS = static_cast<int>(opt(tiles, "cascade", 4));
  p.NQ = static_cast<int>(opt(tiles, "qtiles", 4));
  // Stage s's K/V enters at the shim of column s of its segment, so the
  // stages cannot outnumber a segment's columns; segments fill the array.
  if (p.NS < 1 || p.NS > spec.compute_rows || p.NQ < p.NS || p.NQ > spec.columns)
    throw_error<LimitError>("{}: {} stages x {} q tiles need 1 <= stages <= {} rows and stages <= "
                            "q tiles <= {} columns of {}", shape_text(p), p.NS, p.NQ,
                            spec.compute_rows, spec.columns, spec.name);
  p.H = spec.columns / p.NQ;
  while (p.heads % p.H != 0) --p.H;  // an odd head count leaves segments idle
  const int64_t split = opt(tiles, "kv_split", 0);
  if (split != 0 && split != 1)
    throw_error<LimitError>("{}: kv_split {} is not 0 or 1", shape_text(p), split);
  p.kv_split = split == 1;
  const int64_t skip = opt(tiles, "causal_skip", 1);
  if (skip != 0 && skip != 1)
    throw_error<LimitError>("{}: causal_skip {} is not 0 or 1", shape_text(p), skip);
  p.causal_skip = skip == 1;
  if (!p.kv_split && tiles.count("run_iters"))
    throw_error<LimitError>("{}: run_iters applies to kv_split only (the joint design's K/V "
                            "pattern repeats in one BD)", shape_text(p));
  choose_blocks(p, tiles, spec);
  p.QB = ceil_div(p.S, p.bq);
  p.NKB = ceil_div(p.T(), p.bk);
  p.cps = ceil_div(p.NKB, p.NS);
  p.LX = ceil_div(p.QB, p.NQ);
  p.HP = p.heads / p.H;
  if (p.kv_split) {
    check_split(p, tiles, spec);
    return p;
  }
  if (p.LX > spec.bd_max_repeat)
    throw_error<LimitError>("{}: {} query super-blocks repeat one K/V pattern past the BD repeat "
                            "limit {} of {}", shape_text(p), p.LX, spec.bd_max_repeat, spec.name);
  // Shim BDs per launch and column: q, out and one K/V pattern per head group.
  p.groups_per_launch = std::min<int64_t>(p.HP, spec.shim.buffer_descriptors - 2);
  if (p.groups_per_launch < 1)
    throw_error<LimitError>("{}: a launch needs 3 shim BDs per column, {} has {}", shape_text(p),
                            spec.name, spec.shim.buffer_descriptors);
  return p;
}

BuiltOp build_attention_cascade(const OpShape& shape, const npu::DeviceSpec& spec,
                                const TileOptions& tiles) {
  const CascadePlan p = plan_attention_cascade(shape, spec, tiles);
  BuiltOp out;
  out.shape = shape;
  out.design = make_design(p, spec);
  validate_design(out.design, spec);
  out.inputs = {{"q", {p.S, p.heads * p.D}},
                {"k", {p.T(), p.kv_heads * p.D}},
                {"v", {p.T(), p.kv_heads * p.D}}};
  out.outputs = {{"out", {p.S, p.heads * p.D}}};
  out.tiles = {{"cascade", p.NS}, {"qtiles", p.NQ}, {"bq", p.bq}, {"bk", p.bk}};
  if (p.kv_split) out.tiles["kv_split"] = 1;
  if (!p.causal_skip) out.tiles["causal_skip"] = 0;
  if (tiles.count("run_iters")) out.tiles["run_iters"] = p.iters_per_run;
  auto design = std::make_shared<npu::Design>(out.design);
  const std::string key = shape.key();
  out.pack = [p, design, key](size_t input, std::span<const float> v, npu::HostMemory& host) {
    const int64_t rows = input == 0 ? p.S : p.T();
    check_numel(key, input == 0 ? "q" : input == 1 ? "k" : "v", v.size(),
                rows * (input == 0 ? p.heads : p.kv_heads) * p.D);
    if (input != 0) {
      pack_prefill_kv(p.T(), p.kv_heads, p.D, p.bk, *design, v, static_cast<int>(input) - 1, host);
      return;
    }
    for_each_unit(p, [&](int c, int64_t i, int64_t h, int64_t row0) {
      bf16* dst = host_bf16(*design, q_host(p, c), host) + q_offset(p, c, i);
      for (int64_t r = 0; r < p.bq && row0 + r < p.S; ++r)
        for (int64_t e = 0; e < p.D; ++e)
          dst[r * p.D + e] = f32_to_bf16(v[static_cast<size_t>((row0 + r) * p.heads * p.D + h * p.D + e)]);
    });
  };
  out.unpack = [p, design](size_t, const npu::HostMemory& host) {
    std::vector<float> y(static_cast<size_t>(p.S * p.heads * p.D));
    for_each_unit(p, [&](int c, int64_t i, int64_t h, int64_t row0) {
      const bf16* src = host_bf16(*design, o_host(c), host) + i * p.q_elems();
      for (int64_t r = 0; r < p.bq && row0 + r < p.S; ++r)
        for (int64_t e = 0; e < p.D; ++e)
          y[static_cast<size_t>((row0 + r) * p.heads * p.D + h * p.D + e)] = bf16_to_f32(src[r * p.D + e]);
    });
    return y;
  };
  return out;
}

}  // namespace tessera::kernels
