// attention_prefill: FlashAttention over the array (dataflow in
// kernels/builders/attention.h). Tile sizes come from the DeviceSpec's L1.
#include <algorithm>
#include <cmath>
#include <memory>
#include <tuple>
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
using attn::o_host;
using attn::q_host;
using attn::shim;

std::string shape_text(const PrefillPlan& p) {
  return fmt::format("attention_prefill S={} P={} heads={} kv_heads={} head_dim={}", p.S, p.P,
                     p.heads, p.kv_heads, p.D);
}

// Last valid absolute query position of block qb, and how many K/V blocks it sees.
int64_t last_pos(const PrefillPlan& p, int64_t qb) {
  return std::min(p.P + (qb + 1) * p.bq, p.T()) - 1;
}
int64_t blocks_seen(const PrefillPlan& p, int64_t qb) { return ceil_div(last_pos(p, qb) + 1, p.bk); }

// Picks bk and the largest bq that fits L1 (stepped down to one whose rounds
// fall inside a K/V block, see below); bq is capped so that the query
// blocks of all heads still cover every tile when S is short.
void choose_blocks(PrefillPlan& p, const TileOptions& t, const npu::DeviceSpec& spec) {
  const int64_t budget = spec.compute.memory_bytes;
  const int64_t units_per_head = std::max<int64_t>(1, ceil_div(int64_t{p.C} * p.R, p.kv_heads));
  const int64_t bq_cap = opt(t, "bq", std::max<int64_t>(1, ceil_div(p.S, units_per_head)));
  std::tuple<int64_t, int64_t, int64_t> best{-1, 0, 0};
  PrefillPlan chosen = p;
  const std::vector<int64_t> bks =
      t.count("bk") ? std::vector<int64_t>{t.at("bk")} : std::vector<int64_t>{128, 64, 32, 16, 8};
  for (int64_t bk : bks) {
    PrefillPlan c = p;
    c.bk = std::min<int64_t>(bk, round_up(c.T(), 8));
    c.kv_depth = static_cast<int>(opt(t, "kv_depth", 4));
    c.bq = 1;
    if (c.l1_bytes() > budget) continue;
    while (c.bq < bq_cap) {
      ++c.bq;
      if (c.l1_bytes() > budget) {
        --c.bq;
        break;
      }
    }
    // A round's R tiles own R * bq consecutive query positions; when those
    // fit one K/V block (bk a multiple of R * bq), every tile of the round
    // sees the same number of blocks, so none waits for a busier neighbour.
    if (!t.count("bq") && c.bk % int64_t{c.R} == 0) {
      int64_t even = c.bq;
      while (even > 1 && c.bk % (int64_t{c.R} * even) != 0) --even;
      if (c.bk % (int64_t{c.R} * even) == 0) c.bq = even;
    }
    if (t.count("bq") && c.bq != t.at("bq")) continue;
    // Work per flash_attn call, then the longer K/V block (a call's matrix
    // loops and per-row softmax cost are paid per block, not per score),
    // then fewer K/V re-streams (larger bq).
    const std::tuple score{c.rows() * c.bk, c.bk, c.bq};
    if (score > best) {
      best = score;
      chosen = c;
    }
  }
  if (std::get<0>(best) < 0)
    throw_error<LimitError>("{}: no (bq, bk) block fits the {}-byte L1 of {} (q, K/V x{}, fp32 "
                            "state, out; options bq={} bk={})", shape_text(p), budget, spec.name,
                            opt(t, "kv_depth", 4), opt(t, "bq", 0), opt(t, "bk", 0));
  p = chosen;
}

// Causal rounds grow with j (round j's tiles see about j blocks), and a
// launch lasts as long as its busiest column: dealt in turn (round i to
// column i % C) the last column always holds the latest j of each group of C
// and sets the pace of every launch. Heaviest first, dealt in a snake (0..C-1,
// C-1..0, ...) so the rounds at the same position of every column's list --
// the ones that share a launch -- carry nearly the same K/V blocks.
void deal_rounds(PrefillPlan& p, std::vector<PrefillRound> all) {
  std::stable_sort(all.begin(), all.end(),
                   [](const PrefillRound& a, const PrefillRound& b) { return a.nkv > b.nkv; });
  p.rounds.assign(static_cast<size_t>(p.C), {});
  for (size_t i = 0; i < all.size(); ++i) {
    const size_t pos = i % static_cast<size_t>(p.C), pass = i / static_cast<size_t>(p.C);
    const size_t c = pass % 2 == 0 ? pos : static_cast<size_t>(p.C) - 1 - pos;
    p.rounds[c].push_back(all[i]);
  }
}

void assign_rounds(PrefillPlan& p, const npu::DeviceSpec& spec) {
  p.QB = ceil_div(p.S, p.bq);
  p.NKB = ceil_div(p.T(), p.bk);
  const int64_t J = ceil_div(p.QB, p.R);
  std::vector<PrefillRound> all;
  for (int64_t h = 0; h < p.kv_heads; ++h)
    for (int64_t j = 0; j < J; ++j) {
      const int64_t last_qb = std::min(p.QB, (j + 1) * p.R) - 1;
      all.push_back({h, j, blocks_seen(p, last_qb)});
    }
  deal_rounds(p, std::move(all));
  // Shim BDs per launch and column: one q task, one out task, a K/V task per round.
  p.rounds_per_launch = std::min<int64_t>(spec.shim.buffer_descriptors - 2, spec.bd_max_repeat);
  if (p.rounds_per_launch < 1)
    throw_error<LimitError>("{}: a launch needs 3 shim BDs per column, {} has {}", shape_text(p),
                            spec.name, spec.shim.buffer_descriptors);
}


npu::KernelParams block_params(const PrefillPlan& p, int64_t kv_rows, int64_t q_pos0,
                               int64_t k_pos0, bool causal) {
  return {{"q_rows", p.bq},     {"group", p.G},       {"kv_rows", kv_rows},
          {"head_dim", p.D},    {"q_pos0", q_pos0},   {"k_pos0", k_pos0},
          {"causal", int64_t{causal ? 1 : 0}}, {"scale", p.scale}};
}

// Tile r's program for one round: attend over the blocks its rows can see,
// release the masked tail of the shared K/V stream without a call.
std::vector<CoreOp> round_program(const PrefillPlan& p, const PrefillRound& rd, int r,
                                  const std::string& q, const std::string& kv,
                                  const std::string& o) {
  const int64_t qb = rd.j * p.R + r;
  std::vector<CoreOp> ops = {b::acquire_in(q)};
  auto skip = [&](int64_t n) {
    if (n > 0) ops.push_back(b::loop(n, {b::acquire_in(kv, 2), b::release_in(kv, 2)}));
  };
  if (qb >= p.QB) {  // no query block left for this tile: keep the streams moving
    skip(rd.nkv);
    ops.insert(ops.end(), {b::acquire_out(o), b::release_out(o), b::release_in(q)});
    return ops;
  }
  const npu::KernelParams st{{"rows", p.rows()}, {"head_dim", p.D}};
  const int64_t p0 = p.P + qb * p.bq, seen = blocks_seen(p, qb);
  const std::vector<std::string> args = {q, kv + "[0]", kv + "[1]", "state"};
  ops.push_back(b::call("attn_init", {"state"}, st));
  // Blocks wholly at or before the first query position: no mask, one loop.
  const int64_t past = std::min(seen, (p0 + 1) / p.bk);
  if (past > 0)
    ops.push_back(b::loop(past, {b::acquire_in(kv, 2),
                                 b::call("flash_attn", args, block_params(p, p.bk, p0, 0, false)),
                                 b::release_in(kv, 2)}));
  for (int64_t blk = past; blk < seen; ++blk) {
    const int64_t rows = std::min(p.bk, p.T() - blk * p.bk);
    ops.insert(ops.end(), {b::acquire_in(kv, 2),
                           b::call("flash_attn", args, block_params(p, rows, p0, blk * p.bk, true)),
                           b::release_in(kv, 2)});
  }
  skip(rd.nkv - seen);
  ops.insert(ops.end(), {b::acquire_out(o), b::call("attn_finalize", {"state", o}, st),
                         b::release_out(o), b::release_in(q)});
  return ops;
}

void add_column(npu::Launch& l, const PrefillPlan& p, const npu::DeviceSpec& spec, int c,
                int64_t r0, int64_t nr) {
  const int64_t qobj = p.q_elems() * 2;
  const std::string qc = fmt::format("q{}", c), oc = fmt::format("o{}", c),
                    kv = fmt::format("kv{}", c);
  std::vector<TileCoord> col;
  for (int r = 0; r < p.R; ++r) col.push_back(core(spec, c, r));
  l.fifos.push_back(b::fifo(kv, shim(c), col, p.bk * p.D * 2, p.kv_depth));
  l.fifos.push_back(b::fifo(qc, shim(c), {mem(spec, c)}, p.R * qobj, 2));
  l.fifos.push_back(b::fifo(oc, mem(spec, c), {shim(c)}, p.R * qobj, 2));
  npu::Link split{mem(spec, c), {qc}, {}, {}}, join{mem(spec, c), {}, {oc}, {}};
  const auto& rounds = p.rounds[static_cast<size_t>(c)];
  for (int r = 0; r < p.R; ++r) {
    const std::string q = fmt::format("q{}_{}", c, r), o = fmt::format("o{}_{}", c, r);
    l.fifos.push_back(b::fifo(q, mem(spec, c), {core(spec, c, r)}, qobj, p.q_depth));
    l.fifos.push_back(b::fifo(o, core(spec, c, r), {mem(spec, c)}, qobj, 1));
    split.outputs.push_back(q);
    split.offsets_bytes.push_back(r * qobj);
    join.inputs.push_back(o);
    join.offsets_bytes.push_back(r * qobj);
    l.buffers.push_back({"state", core(spec, c, r), attn_state_floats(p.rows(), p.D) * 4, -1});
    std::vector<CoreOp> prog;
    for (int64_t i = r0; i < r0 + nr; ++i) {
      auto ops = round_program(p, rounds[static_cast<size_t>(i)], r, q, kv, o);
      prog.insert(prog.end(), ops.begin(), ops.end());
    }
    l.cores.push_back({core(spec, c, r), std::move(prog)});
  }
  l.links.push_back(std::move(split));
  l.links.push_back(std::move(join));
  const int64_t per_round = p.R * p.q_elems(), total = int64_t(rounds.size()) * per_round;
  const std::string what = shape_text(p);
  l.sequence.push_back(b::to_device(qc, q_host(c), span_pattern(r0 * per_round, nr * per_round,
                                                                 total, 1, spec, what + " q")));
  const int64_t head_elems = p.NKB * 2 * p.bk * p.D;
  for (int64_t i = r0; i < r0 + nr; ++i) {
    const auto& rd = rounds[static_cast<size_t>(i)];
    l.sequence.push_back(b::to_device(
        kv, "kv", span_pattern(rd.h * head_elems, rd.nkv * 2 * p.bk * p.D,
                               p.kv_heads * head_elems, 1, spec, what + " k/v")));
  }
  l.sequence.push_back(b::from_device(oc, o_host(c), span_pattern(r0 * per_round, nr * per_round,
                                                                   total, 1, spec, what + " out")));
}

npu::Design make_design(const PrefillPlan& p, const npu::DeviceSpec& spec) {
  npu::Design d;
  d.name = fmt::format("attention_prefill_S{}_P{}_h{}_kv{}_d{}_bq{}_bk{}", p.S, p.P, p.heads,
                       p.kv_heads, p.D, p.bq, p.bk);
  d.host_buffers.push_back({"kv", p.kv_heads * p.NKB * 2 * p.bk * p.D * 2, 2});
  int64_t most = 0;
  for (int c = 0; c < p.C; ++c) {
    const int64_t n = static_cast<int64_t>(p.rounds[static_cast<size_t>(c)].size());
    most = std::max(most, n);
    if (n == 0) continue;
    d.host_buffers.push_back({q_host(c), n * p.R * p.q_elems() * 2, 2});
    d.host_buffers.push_back({o_host(c), n * p.R * p.q_elems() * 2, 2});
  }
  for (int64_t r0 = 0; r0 < most; r0 += p.rounds_per_launch) {
    npu::Launch l;
    l.name = fmt::format("attention_prefill_r{}", r0);
    for (int c = 0; c < p.C; ++c) {
      const int64_t n = static_cast<int64_t>(p.rounds[static_cast<size_t>(c)].size());
      if (n > r0) add_column(l, p, spec, c, r0, std::min(p.rounds_per_launch, n - r0));
    }
    d.launches.push_back(std::move(l));
  }
  return d;
}

// Visits every (column, unit slot, query block) of the stream layout: fn(c,
// slot offset in elements within the column buffer, qb, kv head).
template <class Fn>
void for_each_unit(const PrefillPlan& p, Fn fn) {
  for (int c = 0; c < p.C; ++c) {
    const auto& rounds = p.rounds[static_cast<size_t>(c)];
    for (size_t i = 0; i < rounds.size(); ++i)
      for (int r = 0; r < p.R; ++r) {
        const int64_t qb = rounds[i].j * p.R + r;
        if (qb < p.QB) fn(c, (int64_t(i) * p.R + r) * p.q_elems(), qb, rounds[i].h);
      }
  }
}

// Unit layout [bq][G][D] <-> q / out rows [S, heads * D] (query head h*G + g).
void pack_q(const PrefillPlan& p, const npu::Design& d, std::span<const float> q,
            npu::HostMemory& host) {
  for_each_unit(p, [&](int c, int64_t off, int64_t qb, int64_t h) {
    bf16* dst = host_bf16(d, q_host(c), host) + off;
    for (int64_t i = 0; i < p.bq && qb * p.bq + i < p.S; ++i)
      for (int64_t g = 0; g < p.G; ++g) {
        const float* src = q.data() + (qb * p.bq + i) * p.heads * p.D + (h * p.G + g) * p.D;
        for (int64_t e = 0; e < p.D; ++e) dst[(i * p.G + g) * p.D + e] = f32_to_bf16(src[e]);
      }
  });
}

std::vector<float> unpack_out(const PrefillPlan& p, const npu::Design& d,
                              const npu::HostMemory& host) {
  std::vector<float> out(static_cast<size_t>(p.S * p.heads * p.D));
  for_each_unit(p, [&](int c, int64_t off, int64_t qb, int64_t h) {
    const bf16* src = host_bf16(d, o_host(c), host) + off;
    for (int64_t i = 0; i < p.bq && qb * p.bq + i < p.S; ++i)
      for (int64_t g = 0; g < p.G; ++g) {
        float* dst = out.data() + (qb * p.bq + i) * p.heads * p.D + (h * p.G + g) * p.D;
        for (int64_t e = 0; e < p.D; ++e) dst[e] = bf16_to_f32(src[(i * p.G + g) * p.D + e]);
      }
  });
  return out;
}

class AttentionPrefillBuilder : public OpBuilder {
 public:
  std::string op() const override { return "attention_prefill"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    return build_attention_prefill(shape, spec, tiles);
  }
  // Query and K/V blocks: larger blocks amortize the per-call cost but fill
  // fewer tiles and re-stream K/V less; the timing model weighs them (options
  // that overflow L1 fail to build and are dropped). K/V stays double-buffered
  // (depth 4 = K and V twice): the model does not charge a stall for less.
  std::vector<TileOptions> tile_candidates(const OpShape&, const npu::DeviceSpec&) const override {
    std::vector<TileOptions> out;
    for (int64_t bk : {32, 64, 128})
      for (int64_t bq : {1, 2, 4, 6, 8, 12, 16}) out.push_back({{"bk", bk}, {"bq", bq}});
    // The published cascade, K and V joint or on their own streams: its stage
    // 0 carries most of the causal work, so it rarely wins, but the timing
    // model decides (llama-3.2-1b at S = 2048: 21.6 / 19.9 ms against 10.1).
    for (int64_t split : {0, 1}) out.push_back({{"cascade", 4}, {"qtiles", 4}, {"kv_split", split}});
    return out;
  }
};

}  // namespace

void pack_prefill_kv(int64_t T, int64_t kv_heads, int64_t D, int64_t bk, const npu::Design& d,
                     std::span<const float> x, int slot, npu::HostMemory& host) {
  bf16* dst = host_bf16(d, "kv", host);
  const int64_t nkb = ceil_div(T, bk);
  for (int64_t h = 0; h < kv_heads; ++h)
    for (int64_t t = 0; t < T; ++t) {
      const float* src = x.data() + t * kv_heads * D + h * D;
      bf16* row = dst + (((h * nkb + t / bk) * 2 + slot) * bk + t % bk) * D;
      for (int64_t e = 0; e < D; ++e) row[e] = f32_to_bf16(src[e]);
    }
}

int64_t PrefillPlan::l1_bytes() const {
  auto pool = [](int64_t bytes) { return round_up(bytes, kL1Align); };
  return pool(q_depth * q_elems() * 2) + pool(kv_depth * bk * D * 2) +
         pool(attn_state_floats(rows(), D) * 4) + pool(q_elems() * 2);
}

PrefillPlan plan_attention_prefill(const OpShape& shape, const npu::DeviceSpec& spec,
                                   const TileOptions& tiles) {
  check_tile_keys(shape.key(), tiles, {"bq", "bk", "kv_depth", "columns", "rows"});
  PrefillPlan p;
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
  p.scale = shape.attr("scale", 1.0 / std::sqrt(static_cast<double>(p.D))) * (mutant_on(Mutant::softmax_scale_prefill) ? 1.01 : 1.0);
  p.C = static_cast<int>(opt(tiles, "columns", spec.columns));
  // The mem tile splits q into R objects and joins R outputs (plus the column
  // stream each way), within its DMA channels.
  const int rmax = std::min({spec.compute_rows, spec.mem.dma_out - 1, spec.mem.dma_in - 1});
  p.R = static_cast<int>(opt(tiles, "rows", rmax));
  if (p.C < 1 || p.C > spec.columns || p.R < 1 || p.R > rmax)
    throw_error<LimitError>("{}: {} columns x {} rows outside the {} x {} usable tiles of {}",
                            shape_text(p), p.C, p.R, spec.columns, rmax, spec.name);
  choose_blocks(p, tiles, spec);
  assign_rounds(p, spec);
  return p;
}

BuiltOp build_attention_prefill(const OpShape& shape, const npu::DeviceSpec& spec,
                                const TileOptions& tiles) {
  if (tiles.count("cascade")) return build_attention_cascade(shape, spec, tiles);
  PrefillPlan p = plan_attention_prefill(shape, spec, tiles);
  BuiltOp out;
  out.shape = shape;
  out.design = make_design(p, spec);
  validate_design(out.design, spec);
  out.inputs = {{"q", {p.S, p.heads * p.D}},
                {"k", {p.T(), p.kv_heads * p.D}},
                {"v", {p.T(), p.kv_heads * p.D}}};
  out.outputs = {{"out", {p.S, p.heads * p.D}}};
  out.tiles = {{"bq", p.bq}, {"bk", p.bk}, {"kv_depth", p.kv_depth}, {"columns", p.C}, {"rows", p.R}};
  auto design = std::make_shared<npu::Design>(out.design);
  const std::string key = shape.key();
  out.pack = [p, design, key](size_t input, std::span<const float> v, npu::HostMemory& host) {
    const int64_t rows = input == 0 ? p.S : p.T();
    check_numel(key, input == 0 ? "q" : input == 1 ? "k" : "v", v.size(),
                rows * (input == 0 ? p.heads : p.kv_heads) * p.D);
    if (input == 0)
      pack_q(p, *design, v, host);
    else
      pack_prefill_kv(p.T(), p.kv_heads, p.D, p.bk, *design, v, static_cast<int>(input) - 1, host);
  };
  out.unpack = [p, design](size_t, const npu::HostMemory& host) {
    return unpack_out(p, *design, host);
  };
  return out;
}

void register_attention_prefill_builder() {
  register_op_builder(std::make_unique<AttentionPrefillBuilder>());
}

}  // namespace tessera::kernels
