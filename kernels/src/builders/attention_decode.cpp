// attention_decode: one query token over a KV cache in DDR, the context split
// over every tile and the partial softmax states merged per head (dataflow in
// kernels/builders/attention.h).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "tessera/core/mutants.h"
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
using npu::TileCoord;
namespace b = npu::build;
using attn::ceil_div;
using attn::core;
using attn::kL1Align;
using attn::mem;
using attn::opt;
using attn::q_host;
using attn::shim;

std::string shape_text(const DecodePlan& p) {
  return fmt::format("attention_decode T={} heads={} kv_heads={} head_dim={}", p.T, p.heads,
                     p.kv_heads, p.D);
}

std::string kv_host(int c) { return fmt::format("kv_c{}", c); }

// Item i = h * NCH + chunk runs on column i % C as its round i / C; tile r of
// it owns sub-chunk chunk * R + r: blocks [s * nb, s * nb + nb) of head h.
int64_t item_head(const DecodePlan& p, int c, int64_t round) {
  return (round * p.C + c) / p.NCH;
}
int64_t first_block(const DecodePlan& p, int c, int64_t round, int r) {
  const int64_t chunk = (round * p.C + c) % p.NCH;
  return (chunk * p.R + r) * p.nb;
}
int64_t state_offset(const DecodePlan& p, int c, int64_t round) {
  return (int64_t{c} * p.rounds + round) * p.R * p.state_floats();
}

std::vector<CoreOp> worker_round(const DecodePlan& p, int c, int64_t round, int r,
                                 const std::string& q, const std::string& kv,
                                 const std::string& s) {
  const npu::KernelParams st{{"rows", p.G}, {"head_dim", p.D}};
  auto params = [&](int64_t rows) {
    return npu::KernelParams{{"group", p.G}, {"kv_rows", rows}, {"head_dim", p.D},
                             {"scale", p.scale}};
  };
  const std::vector<std::string> args = {q, kv + "[0]", kv + "[1]", s};
  const int64_t b0 = first_block(p, c, round, r);
  const int64_t valid = std::clamp<int64_t>(p.NKB - b0, 0, p.nb);
  const bool ragged = valid > 0 && b0 + valid == p.NKB && p.T % p.bk != 0;
  const int64_t full = valid - (ragged ? 1 : 0);
  std::vector<CoreOp> ops = {b::acquire_in(q), b::acquire_out(s), b::call("attn_init", {s}, st)};
  if (full > 0)
    ops.push_back(b::loop(full, {b::acquire_in(kv, 2), b::call("decode_attn", args, params(p.bk)),
                                 b::release_in(kv, 2)}));
  if (ragged)
    ops.insert(ops.end(), {b::acquire_in(kv, 2),
                           b::call("decode_attn", args, params(p.T - (p.NKB - 1) * p.bk)),
                           b::release_in(kv, 2)});
  // Blocks past the context: zeros in the stream, released without a call.
  if (p.nb > valid)
    ops.push_back(b::loop(p.nb - valid, {b::acquire_in(kv, 2), b::release_in(kv, 2)}));
  ops.insert(ops.end(), {b::release_out(s), b::release_in(q)});
  return ops;
}

// Resident K/V, head-major ([kv_heads][cache_rows][D]): object (round i,
// block k, slot) of column c gathers the R sub-blocks its tiles own (rows
// first_block(r) + k blocks on, head h), each one contiguous run of bk rows,
// in stream order K then V.
void add_resident_kv(npu::Launch& l, const DecodePlan& p, int c, const std::string& kv,
                     int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t h = item_head(p, c, i);
    for (int64_t k = 0; k < p.nb; ++k) {
      const int64_t row0 = first_block(p, c, i, 0) * p.bk + k * p.bk;
      // bk rows of D: one contiguous run (the timing model merges the dims).
      const auto pat = b::pattern({{p.R, p.nb * p.bk * p.D}, {p.bk, p.D}, {p.D, 1}},
                                  (h * p.cache_rows + row0) * p.D);
      l.sequence.push_back(b::to_device(kv, "k_cache", pat));
      l.sequence.push_back(b::to_device(kv, "v_cache", pat));
    }
  }
}

// Rounds [i0, i1) of every column (a resident cache needs a shim task per
// block, so its rounds are split over launches that fit the BDs).
npu::Launch partial_launch(const DecodePlan& p, const npu::DeviceSpec& spec, int64_t i0,
                           int64_t i1) {
  npu::Launch l;
  l.name = i1 - i0 == p.rounds ? std::string("attention_decode_partial")
                               : fmt::format("attention_decode_partial_r{}", i0);
  const int64_t blk = p.bk * p.D, sf = p.state_floats();
  const int64_t total_states = int64_t{p.C} * p.rounds * p.R * sf;
  const std::string what = shape_text(p);
  for (int c = 0; c < p.C; ++c) {
    const std::string q = fmt::format("q{}", c), kv = fmt::format("kv{}", c),
                      s = fmt::format("s{}", c);
    std::vector<TileCoord> col;
    for (int r = 0; r < p.R; ++r) col.push_back(core(spec, c, r));
    l.fifos.push_back(b::fifo(q, shim(c), col, p.G * p.D * 2, 1));
    l.fifos.push_back(b::fifo(kv, shim(c), {mem(spec, c)}, p.R * blk * 2, 2));
    l.fifos.push_back(b::fifo(s, mem(spec, c), {shim(c)}, p.R * sf * 4, 2, 4));
    npu::Link split{mem(spec, c), {kv}, {}, {}}, join{mem(spec, c), {}, {s}, {}};
    for (int r = 0; r < p.R; ++r) {
      const std::string kvr = fmt::format("kv{}_{}", c, r), sr = fmt::format("s{}_{}", c, r);
      l.fifos.push_back(b::fifo(kvr, mem(spec, c), {core(spec, c, r)}, blk * 2, 4));
      l.fifos.push_back(b::fifo(sr, core(spec, c, r), {mem(spec, c)}, sf * 4, 1, 4));
      split.outputs.push_back(kvr);
      split.offsets_bytes.push_back(r * blk * 2);
      join.inputs.push_back(sr);
      join.offsets_bytes.push_back(r * sf * 4);
      std::vector<CoreOp> prog;
      for (int64_t i = i0; i < i1; ++i) {
        auto ops = worker_round(p, c, i, r, q, kvr, sr);
        prog.insert(prog.end(), ops.begin(), ops.end());
      }
      l.cores.push_back({core(spec, c, r), std::move(prog)});
    }
    l.links.push_back(std::move(split));
    l.links.push_back(std::move(join));
    const int64_t qe = p.G * p.D;
    l.sequence.push_back(b::to_device(q, q_host(c), span_pattern(i0 * qe, (i1 - i0) * qe,
                                                                 p.rounds * qe, 1, spec, what + " q")));
    if (p.cache_rows > 0)
      add_resident_kv(l, p, c, kv, i0, i1);
    else
      l.sequence.push_back(b::to_device(kv, kv_host(c)));
    l.sequence.push_back(b::from_device(
        s, "part", span_pattern(state_offset(p, c, i0), (i1 - i0) * p.R * sf, total_states, 1, spec,
                                what + " partial states")));
  }
  return l;
}

// One tile per column folds the NCH * R partial states of each of its heads.
npu::Launch merge_launch(const DecodePlan& p, const npu::DeviceSpec& spec) {
  npu::Launch l;
  l.name = "attention_decode_merge";
  const int64_t sf = p.state_floats();
  const int64_t total_states = int64_t{p.C} * p.rounds * p.R * sf;
  const std::string what = shape_text(p);
  for (int c = 0; c < p.C && c < p.kv_heads; ++c) {
    const std::string m = fmt::format("m{}", c), o = fmt::format("out{}", c);
    const TileCoord t = core(spec, c, 0);
    l.fifos.push_back(b::fifo(m, shim(c), {t}, sf * 4, 2, 4));
    l.fifos.push_back(b::fifo(o, t, {shim(c)}, p.G * p.D * 2, 1));
    l.buffers.push_back({"acc", t, sf * 4, -1});
    const npu::KernelParams st{{"rows", p.G}, {"head_dim", p.D}};
    int64_t heads = 0;
    for (int64_t h = c; h < p.kv_heads; h += p.C, ++heads) {
      for (int64_t k = 0; k < p.NCH; ++k) {
        const int64_t i = h * p.NCH + k;
        l.sequence.push_back(b::to_device(
            m, "part", span_pattern(state_offset(p, static_cast<int>(i % p.C), i / p.C),
                                    p.R * sf, total_states, 1, spec, what + " merge states")));
      }
      l.sequence.push_back(b::from_device(
          o, "out", span_pattern(h * p.G * p.D, p.G * p.D, p.heads * p.D, 1, spec, what + " out")));
    }
    std::vector<CoreOp> body = {
        b::call("attn_init", {"acc"}, st),
        b::loop(p.NCH * p.R, {b::acquire_in(m), b::call("attn_merge", {"acc", m}, st),
                              b::release_in(m)}),
        b::acquire_out(o), b::call("attn_finalize", {"acc", o}, st), b::release_out(o)};
    l.cores.push_back({t, {b::loop(heads, std::move(body))}});
    if (heads * (p.NCH + 1) > spec.shim.buffer_descriptors)
      throw_error<LimitError>("{}: merging {} heads x {} chunks on column {} needs {} shim BDs, {} "
                              "has {}", what, heads, p.NCH, c, heads * (p.NCH + 1), spec.name,
                              spec.shim.buffer_descriptors);
  }
  return l;
}

// Item stream layouts: q_c [rounds][G][D]; kv_c [rounds][nb][2][R][bk][D].
void pack_q(const DecodePlan& p, const npu::Design& d, std::span<const float> q,
            npu::HostMemory& host) {
  for (int c = 0; c < p.C; ++c) {
    bf16* dst = host_bf16(d, q_host(c), host);
    for (int64_t i = 0; i < p.rounds; ++i) {
      const float* src = q.data() + item_head(p, c, i) * p.G * p.D;
      for (int64_t e = 0; e < p.G * p.D; ++e) dst[i * p.G * p.D + e] = f32_to_bf16(src[e]);
    }
  }
}

void pack_kv(const DecodePlan& p, const npu::Design& d, std::span<const float> x, int slot,
             npu::HostMemory& host) {
  if (p.cache_rows > 0) {  // resident, head-major: row t of head h is position t
    bf16* dst = host_bf16(d, slot == 0 ? "k_cache" : "v_cache", host);
    for (int64_t t = 0; t < p.T; ++t)
      for (int64_t h = 0; h < p.kv_heads; ++h)
        for (int64_t e = 0; e < p.D; ++e)
          dst[(h * p.cache_rows + t) * p.D + e] = f32_to_bf16(x[(t * p.kv_heads + h) * p.D + e]);
    return;
  }
  for (int c = 0; c < p.C; ++c) {
    bf16* dst = host_bf16(d, kv_host(c), host);
    for (int64_t i = 0; i < p.rounds; ++i) {
      const int64_t h = item_head(p, c, i);
      for (int r = 0; r < p.R; ++r)
        for (int64_t k = 0; k < p.nb; ++k) {
          const int64_t t0 = (first_block(p, c, i, r) + k) * p.bk;
          bf16* blk = dst + ((((i * p.nb + k) * 2 + slot) * p.R + r) * p.bk) * p.D;
          for (int64_t t = t0; t < std::min(t0 + p.bk, p.T); ++t) {
            const float* src = x.data() + t * p.kv_heads * p.D + h * p.D;
            for (int64_t e = 0; e < p.D; ++e) blk[(t - t0) * p.D + e] = f32_to_bf16(src[e]);
          }
        }
    }
  }
}

npu::Design make_design(const DecodePlan& p, const npu::DeviceSpec& spec) {
  npu::Design d;
  d.name = fmt::format("attention_decode_T{}_h{}_kv{}_d{}_bk{}", p.T, p.heads, p.kv_heads, p.D, p.bk);
  for (int c = 0; c < p.C; ++c) {
    d.host_buffers.push_back({q_host(c), p.rounds * p.G * p.D * 2, 2});
    if (p.cache_rows == 0)
      d.host_buffers.push_back({kv_host(c), p.rounds * p.nb * 2 * p.R * p.bk * p.D * 2, 2});
  }
  if (p.cache_rows > 0) {
    d.name += fmt::format("_cache{}", p.cache_rows);
    for (const char* name : {"k_cache", "v_cache"})
      d.host_buffers.push_back({name, p.cache_rows * p.kv_heads * p.D * 2, 2});
  }
  d.host_buffers.push_back({"part", int64_t{p.C} * p.rounds * p.R * p.state_floats() * 4, 4});
  d.host_buffers.push_back({"out", p.heads * p.D * 2, 2});
  for (int64_t i0 = 0; i0 < p.rounds; i0 += p.rounds_per_launch)
    d.launches.push_back(partial_launch(p, spec, i0, std::min(p.rounds, i0 + p.rounds_per_launch)));
  d.launches.push_back(merge_launch(p, spec));
  return d;
}

class AttentionDecodeBuilder : public OpBuilder {
 public:
  std::string op() const override { return "attention_decode"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    return build_attention_decode(shape, spec, tiles);
  }
};

// The resident cache must hold every row a tile's blocks span, and each
// column's shim a task per (round, block, K|V) besides q and the states: the
// rounds are split over launches so that one launch's tasks fit the BDs.
void check_resident(DecodePlan& p, const npu::DeviceSpec& spec, int64_t splits) {
  const int64_t span = splits * p.nb * p.bk;
  if (p.cache_rows < span)
    throw_error<LimitError>("{}: the resident cache of {} rows is shorter than the {} rows "
                            "({} tiles x {} blocks of {}) the tiles stream", shape_text(p),
                            p.cache_rows, span, splits, p.nb, p.bk);
  const int64_t stride = p.nb * p.bk * p.D;  // from one tile's rows to the next's
  if (stride > spec.bd_max_stride || p.D > spec.bd_max_wrap || p.bk > spec.bd_max_size)
    throw_error<LimitError>("{}: a resident cache read strides {} elements between tiles (runs of "
                            "{}), past the BD limits of {}", shape_text(p), stride, p.bk * p.D,
                            spec.name);
  p.rounds_per_launch = (spec.shim.buffer_descriptors - 2) / (2 * p.nb);
  if (p.rounds_per_launch < 1)
    throw_error<LimitError>("{}: reading one round of a resident cache takes {} shim tasks per "
                            "column ({} blocks x K,V + q + states), {} has {} shim BDs",
                            shape_text(p), 2 + 2 * p.nb, p.nb, spec.name,
                            spec.shim.buffer_descriptors);
  p.rounds_per_launch = std::min(p.rounds_per_launch, p.rounds);
}

}  // namespace

int64_t DecodePlan::l1_bytes() const {
  auto pool = [](int64_t bytes) { return round_up(bytes, kL1Align); };
  return pool(G * D * 2) + pool(4 * bk * D * 2) + pool(state_floats() * 4);
}

DecodePlan plan_attention_decode(const OpShape& shape, const npu::DeviceSpec& spec,
                                 const TileOptions& tiles) {
  check_tile_keys(shape.key(), tiles, {"bk", "columns", "rows", "cache_rows"});
  DecodePlan p;
  p.T = shape.dim("T");
  p.heads = shape.dim("heads");
  p.kv_heads = shape.dim("kv_heads");
  p.D = shape.dim("head_dim");
  if (p.T < 1 || p.heads < 1 || p.kv_heads < 1 || p.D < 2 || p.D % 2 != 0 ||
      p.heads % p.kv_heads != 0)
    throw_error<LimitError>("{}: needs T >= 1, an even head_dim and heads a multiple of kv_heads",
                            shape_text(p));
  p.G = p.heads / p.kv_heads;
  p.scale = shape.attr("scale", 1.0 / std::sqrt(static_cast<double>(p.D))) * (mutant_on(Mutant::softmax_scale_decode) ? 1.01 : 1.0);
  p.C = static_cast<int>(opt(tiles, "columns", spec.columns));
  const int rmax = std::min({spec.compute_rows, spec.mem.dma_out - 1, spec.mem.dma_in - 1});
  p.R = static_cast<int>(opt(tiles, "rows", rmax));
  if (p.C < 1 || p.C > spec.columns || p.R < 1 || p.R > rmax)
    throw_error<LimitError>("{}: {} columns x {} rows outside the {} x {} usable tiles of {}",
                            shape_text(p), p.C, p.R, spec.columns, rmax, spec.name);
  // Items per head so that the kv_heads * NCH items fill the columns evenly.
  p.NCH = p.C / std::gcd(int64_t{p.C}, p.kv_heads);
  p.rounds = p.kv_heads * p.NCH / p.C;
  const int64_t splits = p.NCH * p.R;
  // Largest block that fits L1 (four K/V objects: k and v double-buffered),
  // but no larger than one tile's share of the context.
  const int64_t want = round_up(ceil_div(p.T, splits), 8);
  p.bk = opt(tiles, "bk", 0);
  if (p.bk == 0)
    for (int64_t bk = std::min<int64_t>(256, want); bk >= 8 && p.bk == 0; bk -= 8) {
      p.bk = bk;
      if (p.l1_bytes() > spec.compute.memory_bytes) p.bk = 0;
    }
  if (p.bk < 1 || p.l1_bytes() > spec.compute.memory_bytes)
    throw_error<LimitError>("{}: no K/V block fits the {}-byte L1 of {} (bk={})", shape_text(p),
                            spec.compute.memory_bytes, spec.name, p.bk);
  // Same block count per tile with the smallest block: less zero padding streamed.
  if (!tiles.count("bk")) {
    const int64_t nb = ceil_div(ceil_div(p.T, p.bk), splits);
    p.bk = std::min(p.bk, round_up(ceil_div(p.T, splits * nb), 8));
  }
  p.NKB = ceil_div(p.T, p.bk);
  p.nb = ceil_div(p.NKB, splits);
  p.cache_rows = opt(tiles, "cache_rows", 0);
  p.rounds_per_launch = p.rounds;
  if (p.cache_rows > 0) {
    // A resident read takes a shim task per block: a head's context is cut
    // into more chunks (more rounds, each of fewer blocks, merged like the
    // others) until one round's tasks fit a column's BDs.
    const int64_t most = (spec.shim.buffer_descriptors - 2) / 2;
    if (p.nb > most && most >= 1) {
      const int64_t f = ceil_div(p.nb, most);
      p.NCH *= f;
      p.rounds *= f;
      p.nb = ceil_div(p.NKB, p.NCH * p.R);
    }
    check_resident(p, spec, p.NCH * p.R);
  }
  return p;
}

BuiltOp build_attention_decode(const OpShape& shape, const npu::DeviceSpec& spec,
                               const TileOptions& tiles) {
  DecodePlan p = plan_attention_decode(shape, spec, tiles);
  BuiltOp out;
  out.shape = shape;
  out.design = make_design(p, spec);
  validate_design(out.design, spec);
  out.inputs = {{"q", {1, p.heads * p.D}},
                {"k", {p.T, p.kv_heads * p.D}},
                {"v", {p.T, p.kv_heads * p.D}}};
  out.outputs = {{"out", {1, p.heads * p.D}}};
  out.tiles = {{"bk", p.bk}, {"columns", p.C}, {"rows", p.R}};
  if (p.cache_rows > 0) out.tiles["cache_rows"] = p.cache_rows;
  auto design = std::make_shared<npu::Design>(out.design);
  const std::string key = shape.key();
  out.pack = [p, design, key](size_t input, std::span<const float> v, npu::HostMemory& host) {
    check_numel(key, input == 0 ? "q" : input == 1 ? "k" : "v", v.size(),
                input == 0 ? p.heads * p.D : p.T * p.kv_heads * p.D);
    if (input == 0)
      pack_q(p, *design, v, host);
    else
      pack_kv(p, *design, v, static_cast<int>(input) - 1, host);
  };
  out.unpack = [p, design](size_t, const npu::HostMemory& host) {
    const bf16* src = host_bf16(*design, "out", host);
    std::vector<float> y(static_cast<size_t>(p.heads * p.D));
    for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_f32(src[i]);
    return y;
  };
  return out;
}

void register_attention_decode_builder() {
  register_op_builder(std::make_unique<AttentionDecodeBuilder>());
}

}  // namespace tessera::kernels
