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

std::string q_host(int c) { return fmt::format("q_c{}", c); }
std::string o_host(int c) { return fmt::format("o_c{}", c); }
std::string kv_fifo(int g, int s) { return fmt::format("kv{}_{}", g, s); }
// Stage s's state handed to stage s - 1 (shared memory of vertical neighbours).
std::string cascade_fifo(int c, int s) { return fmt::format("cs{}_{}", c, s); }

npu::KernelParams block_params(const CascadePlan& p, int64_t kv_rows, int64_t q_pos0,
                               int64_t k_pos0, bool causal) {
  return {{"q_rows", p.bq},     {"group", int64_t{1}}, {"kv_rows", kv_rows},
          {"head_dim", p.D},    {"q_pos0", q_pos0},    {"k_pos0", k_pos0},
          {"causal", int64_t{causal ? 1 : 0}}, {"scale", p.scale}};
}

// Stage s's K/V blocks for unit u, against a generic stream "kv" (bind_kv
// names it): the blocks wholly before the first query
// row run unmasked in one loop, the diagonal ones carry their offsets, and
// the fully masked tail is released without a call (the published kernel
// streams it and skips its matmuls and softmax).
void stage_blocks(const CascadePlan& p, const Unit& u, int s, const std::string& q,
                  const std::string& state, std::vector<CoreOp>& ops) {
  const int64_t b0 = s * p.cps, b1 = std::min(p.NKB, (s + 1) * p.cps);
  if (b1 <= b0) return;
  const int64_t p0 = p.P + u.qb * p.bq;
  const int64_t last = std::min(p0 + p.bq, p.T()) - 1;
  const int64_t seen = u.valid ? std::clamp<int64_t>(last / p.bk + 1, b0, b1) : b0;
  const int64_t past = u.valid ? std::clamp<int64_t>((p0 + 1) / p.bk, b0, seen) : b0;
  const std::vector<std::string> args = {q, "kv[0]", "kv[1]", state};
  auto held = [&](CoreOp call) {
    return std::vector<CoreOp>{b::acquire_in("kv", 2), std::move(call), b::release_in("kv", 2)};
  };
  if (past > b0)
    ops.push_back(b::loop(past - b0, held(b::call("flash_attn", args,
                                                  block_params(p, p.bk, p0, 0, false)))));
  for (int64_t blk = past; blk < seen; ++blk) {
    const int64_t rows = std::min(p.bk, p.T() - blk * p.bk);
    for (auto& op : held(b::call("flash_attn", args, block_params(p, rows, p0, blk * p.bk, true))))
      ops.push_back(std::move(op));
  }
  if (b1 > seen) ops.push_back(b::loop(b1 - seen, {b::acquire_in("kv", 2), b::release_in("kv", 2)}));
}

// Renames the stage's K/V stream in ops built against the generic "kv".
void bind_kv(std::vector<CoreOp>& ops, const std::string& kv) {
  for (auto& op : ops) {
    if (op.fifo == "kv") op.fifo = kv;
    for (auto& a : op.args)
      if (a.rfind("kv[", 0) == 0) a = kv + a.substr(2);
    bind_kv(op.body, kv);
  }
}

// Core (c, s)'s program for iteration i: attend over the stage's blocks into
// its state (stage 0: a local buffer; later stages: the object handed down),
// fold in stage s + 1's state, then hand down (s > 0) or finalize (s = 0).
std::vector<CoreOp> iteration_program(const CascadePlan& p, int c, int s, int64_t i) {
  const Unit u = unit_of(p, c, i);
  const std::string q = fmt::format("q{}", c), o = fmt::format("o{}", c);
  const std::string state = s == 0 ? std::string("state") : cascade_fifo(c, s);
  const npu::KernelParams st{{"rows", p.bq}, {"head_dim", p.D}};
  std::vector<CoreOp> ops = {b::acquire_in(q)};
  if (s > 0) ops.push_back(b::acquire_out(state));
  if (u.valid) ops.push_back(b::call("attn_init", {state}, st));
  std::vector<CoreOp> blocks;
  stage_blocks(p, u, s, q, state, blocks);
  bind_kv(blocks, kv_fifo(c / p.NQ, s));
  ops.insert(ops.end(), blocks.begin(), blocks.end());
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
  ops.push_back(b::release_in(q));
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
    l.sequence.push_back(b::to_device(qc, q_host(c), span_pattern(i0 * p.q_elems(), n * p.q_elems(),
                                                                   total, 1, spec, what + " q")));
    // Column g * NQ + s feeds stage s of segment g: one pattern per head
    // group, repeated for the group's LX iterations.
    const int g = c / p.NQ, s = c % p.NQ;
    const int64_t b0 = s * p.cps, nb = std::min(p.NKB, (s + 1) * p.cps) - b0;
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

npu::Design make_design(const CascadePlan& p, const npu::DeviceSpec& spec) {
  npu::Design d;
  d.name = fmt::format("attention_prefill_cascade_S{}_P{}_h{}_kv{}_d{}_q{}x{}_bk{}_ns{}", p.S, p.P,
                       p.heads, p.kv_heads, p.D, p.NQ, p.bq, p.bk, p.NS);
  d.host_buffers.push_back({"kv", p.kv_heads * p.NKB * 2 * p.bk * p.D * 2, 2});
  for (int c = 0; c < p.C(); ++c) {
    d.host_buffers.push_back({q_host(c), p.iters() * p.q_elems() * 2, 2});
    d.host_buffers.push_back({o_host(c), p.iters() * p.q_elems() * 2, 2});
  }
  const int64_t per_launch = p.groups_per_launch * p.LX;
  for (int64_t i0 = 0; i0 < p.iters(); i0 += per_launch) {
    const int64_t n = std::min(per_launch, p.iters() - i0);
    npu::Launch l;
    l.name = fmt::format("attention_prefill_cascade_i{}", i0);
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

// Visits every valid (column, iteration) unit: fn(c, element offset of its
// object in the column's buffer, head, first query row).
template <class Fn>
void for_each_unit(const CascadePlan& p, Fn fn) {
  for (int c = 0; c < p.C(); ++c)
    for (int64_t i = 0; i < p.iters(); ++i) {
      const Unit u = unit_of(p, c, i);
      if (u.valid) fn(c, i * p.q_elems(), u.head, u.qb * p.bq);
    }
}

// Picks the largest bq = bk (the published causal kernel needs tile_size_q ==
// LKP) whose stage-0 tile fits L1, unless the options fix them.
void choose_blocks(CascadePlan& p, const TileOptions& t, const npu::DeviceSpec& spec) {
  for (int64_t blk : {int64_t{64}, int64_t{32}, int64_t{16}, int64_t{8}}) {
    p.bq = opt(t, "bq", blk);
    p.bk = opt(t, "bk", blk);
    if (p.l1_bytes() <= spec.compute.memory_bytes) return;
    if (t.count("bq") && t.count("bk")) break;
  }
  throw_error<LimitError>("{}: no q / K/V block fits the {}-byte L1 of {} (stage 0 holds q x{}, "
                          "K/V x{}, the fp32 state and out; options bq={} bk={})",
                          shape_text(p), spec.compute.memory_bytes, spec.name, p.q_depth,
                          p.kv_depth, opt(t, "bq", 0), opt(t, "bk", 0));
}

}  // namespace

int64_t CascadePlan::l1_bytes() const {
  auto pool = [](int64_t bytes) { return round_up(bytes, kL1Align); };
  return pool(q_depth * q_elems() * 2) + pool(kv_depth * bk * D * 2) +
         pool(attn_state_floats(bq, D) * 4) + pool(q_elems() * 2);
}

CascadePlan plan_attention_cascade(const OpShape& shape, const npu::DeviceSpec& spec,
                                   const TileOptions& tiles) {
  check_tile_keys(shape.key(), tiles, {"cascade", "qtiles", "bq", "bk"});
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
  choose_blocks(p, tiles, spec);
  p.QB = ceil_div(p.S, p.bq);
  p.NKB = ceil_div(p.T(), p.bk);
  p.cps = ceil_div(p.NKB, p.NS);
  p.LX = ceil_div(p.QB, p.NQ);
  p.HP = p.heads / p.H;
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
    for_each_unit(p, [&](int c, int64_t off, int64_t h, int64_t row0) {
      bf16* dst = host_bf16(*design, q_host(c), host) + off;
      for (int64_t r = 0; r < p.bq && row0 + r < p.S; ++r)
        for (int64_t e = 0; e < p.D; ++e)
          dst[r * p.D + e] = f32_to_bf16(v[static_cast<size_t>((row0 + r) * p.heads * p.D + h * p.D + e)]);
    });
  };
  out.unpack = [p, design](size_t, const npu::HostMemory& host) {
    std::vector<float> y(static_cast<size_t>(p.S * p.heads * p.D));
    for_each_unit(p, [&](int c, int64_t off, int64_t h, int64_t row0) {
      const bf16* src = host_bf16(*design, o_host(c), host) + off;
      for (int64_t r = 0; r < p.bq && row0 + r < p.S; ++r)
        for (int64_t e = 0; e < p.D; ++e)
          y[static_cast<size_t>((row0 + r) * p.heads * p.D + h * p.D + e)] = bf16_to_f32(src[r * p.D + e]);
    });
    return y;
  };
  return out;
}

}  // namespace tessera::kernels
