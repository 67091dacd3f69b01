// The linear builder's gemm dataflow, packing and registration (dataflows in
// kernels/builders/linear.h, tile choice in linear_plan.cpp, the gemv
// dataflow in linear_gemv.cpp).
#include "tessera/kernels/builders/linear.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "tessera/kernels/builders/builder_support.h"
#include "tessera/npu/builder.h"
#include "tessera/npu/errors.h"

namespace tessera::kernels {
namespace {

using npu::CoreOp;
using npu::TileCoord;
namespace b = npu::build;


std::string x_host(int r) { return fmt::format("x_r{}", r); }
std::string w_host(int c) { return fmt::format("w_c{}", c); }
std::string y_host(int c) { return fmt::format("y_c{}", c); }
// The FIFO a tile reads x / w from.
std::string x_fifo(int r) { return fmt::format("x{}", r); }
std::string w_fifo(int c) { return fmt::format("w{}_l1", c); }

// x stays in the tile for a whole M step only when one block spans K and the
// step's output blocks follow each other (not in the panel order).
bool x_per_step(const LinearPlan& p) { return p.kb == 1 && !p.panel; }

void add_fifos(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec, int64_t steps) {
  const int xdepth = x_per_step(p) ? 1 : 2;
  const int64_t xobj = p.m * p.k * 2, wobj = p.n * p.wk * p.k * 2, yobj = p.m * p.n * 2;
  const int64_t wobjs = p.kb / p.wk;  // weight objects per N block
  for (int r = 0; r < p.R; ++r) {
    std::vector<TileCoord> row;
    for (int c = 0; c < p.C; ++c) row.push_back(core_tile(spec, c, r));
    l.fifos.push_back(b::fifo(x_fifo(r), shim_tile(r), row, xobj, xdepth));
  }
  for (int c = 0; c < p.C; ++c) {
    std::string w = fmt::format("w{}", c), y = fmt::format("y{}", c);
    // Panel: the column's K panel of an N block stays in the mem tile (pool
    // of kb objects) and is re-sent to the cores once per M step. A partial
    // panel keeps panel_k of them, with two slots for the streamed rest.
    const int wdepth = p.partial_panel() ? static_cast<int>(p.panel_k + 2)
                       : p.panel         ? static_cast<int>(std::max<int64_t>(wobjs, 2))
                                         : 2;
    l.fifos.push_back(b::fifo(w, shim_tile(c), {mem_tile(spec, c)}, wobj, wdepth));
    std::vector<TileCoord> col;
    for (int r = 0; r < p.R; ++r) col.push_back(core_tile(spec, c, r));
    l.fifos.push_back(b::fifo(w_fifo(c), mem_tile(spec, c), col, wobj, 2));
    if (p.panel) {
      l.fifos.back().repeat = static_cast<int>(steps);
      l.fifos.back().repeat_group = static_cast<int>(p.partial_panel() ? p.panel_k : wobjs);
      if (p.partial_panel()) l.fifos.back().repeat_tail = static_cast<int>(wobjs - p.panel_k);
    }
    l.links.push_back({mem_tile(spec, c), {w}, {w_fifo(c)}, {0}});
    npu::Link yl{mem_tile(spec, c), {}, {y}, {}};
    for (int r = 0; r < p.R; ++r) {
      std::string yr = fmt::format("y{}_{}", c, r);
      l.fifos.push_back(b::fifo(yr, core_tile(spec, c, r), {mem_tile(spec, c)}, yobj, p.y_depth));
      yl.inputs.push_back(yr);
      yl.offsets_bytes.push_back(r * yobj);
    }
    l.fifos.push_back(b::fifo(y, mem_tile(spec, c), {shim_tile(c)}, p.R * yobj, 2));
    l.links.push_back(std::move(yl));
  }
}

// One output block of a tile: kb K steps into the fp32 accumulator, then the
// bf16 y object.
std::vector<CoreOp> block_program(const LinearPlan& p, const std::string& x, const std::string& w,
                                  const std::string& y) {
  const npu::KernelParams kp{{"m", p.m}, {"k", p.k}, {"n", p.n}, {"b_layout", std::string("nk")}};
  const npu::KernelParams fin{{"count", p.m * p.n}};
  if (p.kb == 1 && p.panel)
    return {b::acquire_in(x), b::acquire_in(w), b::acquire_out(y),
            b::call("gemm_init", {x, w, "acc"}, kp), b::call("gemm_finalize", {"acc", y}, fin),
            b::release_in(x), b::release_in(w), b::release_out(y)};
  if (p.kb == 1)
    return {b::acquire_in(w), b::acquire_out(y), b::call("gemm_init", {x, w, "acc"}, kp),
            b::call("gemm_finalize", {"acc", y}, fin), b::release_in(w), b::release_out(y)};
  // One weight object: wk K blocks, each against its own x object.
  auto step = [&](bool first) {
    if (p.wk == 1)
      return std::vector<CoreOp>{b::acquire_in(x), b::acquire_in(w),
                                 b::call(first ? "gemm_init" : "gemm_acc", {x, w, "acc"}, kp),
                                 b::release_in(x), b::release_in(w)};
    std::vector<CoreOp> o = {b::acquire_in(w)};
    for (int64_t i = 0; i < p.wk; ++i) {
      npu::KernelParams ki = kp;
      if (i > 0) ki["b_off"] = i * p.n * p.k;
      o.insert(o.end(), {b::acquire_in(x),
                         b::call(first && i == 0 ? "gemm_init" : "gemm_acc", {x, w, "acc"}, ki),
                         b::release_in(x)});
    }
    o.push_back(b::release_in(w));
    return o;
  };
  std::vector<CoreOp> ops = step(true);
  if (p.kb / p.wk > 1) ops.push_back(b::loop(p.kb / p.wk - 1, step(false)));
  ops.push_back(b::acquire_out(y));
  ops.push_back(b::call("gemm_finalize", {"acc", y}, fin));
  ops.push_back(b::release_out(y));
  return ops;
}

void add_cores(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec,
               const LinearLaunch& at) {
  const int64_t steps = at.steps;
  for (int c = 0; c < p.C; ++c)
    for (int r = 0; r < p.R; ++r) {
      TileCoord t = core_tile(spec, c, r);
      std::string x = x_fifo(r), y = fmt::format("y{}_{}", c, r);
      l.buffers.push_back({"acc", t, p.m * p.n * 4, p.acc_address()});
      if (p.panel) {  // N blocks outer: each weight panel serves every M step
        l.cores.push_back(
            {t, {b::loop(at.nbl, {b::loop(steps, block_program(p, x, w_fifo(c), y))})}});
        continue;
      }
      std::vector<CoreOp> s_body;
      if (p.kb == 1) s_body.push_back(b::acquire_in(x));  // resident for the whole M step
      s_body.push_back(b::loop(p.NB, block_program(p, x, w_fifo(c), y)));
      if (p.kb == 1) s_body.push_back(b::release_in(x));
      l.cores.push_back({t, {b::loop(steps, std::move(s_body))}});
    }
}

// A partial panel's weights for column c, per N block in the order the mem
// tile's pool takes them (Fifo::repeat_tail): the resident K blocks once,
// then the rest once per M step of the launch.
void add_partial_panel_w(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec, int c,
                         const LinearLaunch& at) {
  const int64_t blk = p.n * p.k, total = p.NB * p.kb * blk;
  for (int64_t bb = at.bb0; bb < at.bb0 + at.nbl; ++bb) {
    const int64_t at0 = bb * p.kb * blk, res = p.panel_k * blk;
    l.sequence.push_back(b::to_device(fmt::format("w{}", c), w_host(c),
                                      span_pattern(at0, res, total, 1, spec, "linear resident w")));
    l.sequence.push_back(b::to_device(
        fmt::format("w{}", c), w_host(c),
        span_pattern(at0 + res, p.kb * blk - res, total, at.steps, spec, "linear streamed w")));
  }
}

void add_sequence(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec,
                  const LinearLaunch& at) {
  const int64_t s0 = at.s0, steps = at.steps;
  const int64_t x_step = p.kb * p.m * p.k;  // elements of one M step of one row group
  const int64_t x_total = p.S * x_step;
  for (int r = 0; r < p.Rm(); ++r) {
    std::string what = fmt::format("linear x row group {}", r);
    std::string f = x_fifo(r);
    if (p.panel) {  // the launch's x once per N block (panel pass)
      for (int64_t done = 0; done < at.nbl; done += spec.bd_max_repeat)
        l.sequence.push_back(b::to_device(
            f, x_host(r), span_pattern(s0 * x_step, steps * x_step, x_total,
                                       std::min(spec.bd_max_repeat, at.nbl - done), spec, what)));
      continue;
    }
    if (p.kb == 1) {
      l.sequence.push_back(b::to_device(
          f, x_host(r), span_pattern(s0 * x_step, steps * x_step, x_total, 1, spec, what)));
      continue;
    }
    // Re-streamed once per output block of the step: NB repeats, in BD-sized runs.
    for (int64_t s = s0; s < s0 + steps; ++s)
      for (int64_t done = 0; done < p.NB; done += spec.bd_max_repeat) {
        int64_t rep = std::min(spec.bd_max_repeat, p.NB - done);
        l.sequence.push_back(
            b::to_device(f, x_host(r), span_pattern(s * x_step, x_step, x_total, rep, spec, what)));
      }
  }
  const int64_t y_step = p.NB * p.R * p.m * p.n;
  const int64_t w_block = p.kb * p.n * p.k;  // one N block of a column's weights
  for (int c = 0; c < p.C; ++c) {
    npu::AccessPattern wp;
    wp.repeat = p.panel ? 1 : steps;  // the column's weights once per launch / per M step
    if (at.nbl != p.NB)  // the launch's N blocks only
      wp = span_pattern(at.bb0 * w_block, at.nbl * w_block, p.NB * w_block, 1, spec, "linear w");
    if (p.partial_panel())
      add_partial_panel_w(l, p, spec, c, at);
    else
      l.sequence.push_back(b::to_device(fmt::format("w{}", c), w_host(c), wp));
    if (p.rowmajor_y) {
      add_rowmajor_y(l, p, spec, c, at);
      continue;
    }
    l.sequence.push_back(b::from_device(
        fmt::format("y{}", c), y_host(c),
        span_pattern(s0 * y_step, steps * y_step, p.S * y_step, 1, spec, "linear y")));
  }
}

npu::Design make_design(const LinearPlan& p, const npu::DeviceSpec& spec) {
  if (!p.gemm) return make_gemv_design(p, spec);
  npu::Design d;
  d.name = fmt::format("linear_M{}_K{}_N{}_gemm_{}x{}x{}{}{}{}", p.M, p.K, p.N, p.m, p.k, p.n,
                       p.panel ? "_l2panel" : "",
                       p.partial_panel() ? fmt::format("_k{}of{}", p.panel_k, p.kb) : "",
                       p.y_depth == 1 ? "_y1" : "");
  if (p.rowmajor) {
    d.name += "_rowmajor";
    d.host_buffers.push_back({"x_rows", p.M * p.K * 2, 2});
  }
  if (p.y_rows()) {
    d.name += p.rowmajor ? "" : "_rowmajor_y";
    d.host_buffers.push_back({"y_rows", p.M * p.N * 2, 2});
  }
  for (int r = 0; r < p.Rm() && !p.rowmajor; ++r)
    d.host_buffers.push_back({x_host(r), p.S * p.kb * p.m * p.k * 2, 2});
  for (int c = 0; c < p.C; ++c) {
    d.host_buffers.push_back({w_host(c), p.NB * p.kb * p.n * p.k * 2, 2});
    if (!p.y_rows()) d.host_buffers.push_back({y_host(c), p.S * p.NB * p.R * p.m * p.n * 2, 2});
  }
  add_linear_launches(d, p, [&](npu::Launch& l, const LinearLaunch& at) {
    add_fifos(l, p, spec, at.steps);
    add_cores(l, p, spec, at);
    if (!p.rowmajor) return add_sequence(l, p, spec, at);
    add_rowmajor_sequence(l, p, spec, at.s0, at.steps);
    for (int c = 0; c < p.C; ++c) {
      npu::AccessPattern wp;
      wp.repeat = at.steps;  // no panel: the column's weights once per M step
      l.sequence.push_back(b::to_device(fmt::format("w{}", c), w_host(c), wp));
    }
  });
  return d;
}

// Copies values[row, col0 .. col0 + len) (clipped to `cols`) to dst as bf16.
void put_row(const float* src_row, int64_t col0, int64_t len, int64_t cols, bf16* dst) {
  int64_t valid = std::min(len, cols - col0);
  for (int64_t e = 0; e < valid; ++e) dst[e] = f32_to_bf16(src_row[col0 + e]);
}

void pack_x(const LinearPlan& p, const npu::Design& d, std::span<const float> x,
            npu::HostMemory& host) {
  if (p.rowmajor && p.gemm) {  // a gemv's x is one row either way (x_r0)
    bf16* dst = host_bf16(d, "x_rows", host);
    for (size_t i = 0; i < x.size(); ++i) dst[i] = f32_to_bf16(x[i]);
    return;
  }
  for (int r = 0; r < p.Rm(); ++r) {
    bf16* dst = host_bf16(d, x_host(r), host);
    for (int64_t s = 0; s < p.S; ++s)
      for (int64_t i = 0; i < p.m; ++i) {
        // Row-major y re-reads the last whole rows: x feeds those rows too.
        int64_t row = p.gemm && p.rowmajor_y ? rowmajor_step_row(p, s) + r * p.m + i
                                             : (s * p.Rm() + r) * p.m + i;
        if (row >= p.M) continue;
        for (int64_t j = 0; j < p.kb && j * p.k < p.K; ++j)
          put_row(x.data() + row * p.K, j * p.k, p.k, p.K, dst + ((s * p.kb + j) * p.m + i) * p.k);
      }
  }
}

void pack_w(const LinearPlan& p, const npu::Design& d, std::span<const float> w,
            npu::HostMemory& host) {
  if (!p.gemm) return pack_gemv_w(p, d, w, host);
  for (int c = 0; c < p.C; ++c) {
    bf16* dst = host_bf16(d, w_host(c), host);
    for (int64_t bb = 0; bb < p.NB; ++bb)
      for (int64_t i = 0; i < p.n; ++i) {
        int64_t nrow = (c * p.NB + bb) * p.n + i;
        if (nrow >= p.N) continue;
        for (int64_t j = 0; j < p.kb && j * p.k < p.K; ++j)
          put_row(w.data() + nrow * p.K, j * p.k, p.k, p.K, dst + ((bb * p.kb + j) * p.n + i) * p.k);
      }
  }
}

// Index of output block (M step s, N block bb, row r) in a column's y: M
// steps outer, or per launch N blocks outer in the panel order.
int64_t y_block(const LinearPlan& p, int64_t s, int64_t bb, int r) {
  if (!p.panel) return (s * p.NB + bb) * p.R + r;
  const int64_t s0 = s / p.s_per_launch * p.s_per_launch;
  const int64_t steps = std::min(p.s_per_launch, p.S - s0);
  return s0 * p.NB * p.R + (bb * steps + (s - s0)) * p.R + r;
}

std::vector<float> unpack_y(const LinearPlan& p, const npu::Design& d,
                            const npu::HostMemory& host) {
  if (!p.gemm) return unpack_gemv_y(p, d, host);
  std::vector<float> y(static_cast<size_t>(p.M * p.N));
  if (p.y_rows()) {
    const bf16* src = host_bf16(d, "y_rows", host);
    for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_f32(src[i]);
    return y;
  }
  for (int c = 0; c < p.C; ++c) {
    const bf16* src = host_bf16(d, y_host(c), host);
    for (int64_t s = 0; s < p.S; ++s)
      for (int64_t bb = 0; bb < p.NB; ++bb)
        for (int r = 0; r < p.R; ++r) {
          int64_t row0 = (s * p.R + r) * p.m;
          int64_t col0 = (c * p.NB + bb) * p.n;
          if (col0 >= p.N) continue;
          int64_t cols = std::min(p.n, p.N - col0);
          const bf16* blk = src + y_block(p, s, bb, r) * p.m * p.n;
          for (int64_t i = 0; i < p.m && row0 + i < p.M; ++i)
            for (int64_t e = 0; e < cols; ++e)
              y[(row0 + i) * p.N + col0 + e] = bf16_to_f32(blk[i * p.n + e]);
        }
  }
  return y;
}

class LinearBuilder : public OpBuilder {
 public:
  std::string op() const override { return "linear"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    return build_linear(shape, spec, tiles);
  }
  std::vector<TileOptions> tile_candidates(const OpShape& shape,
                                           const npu::DeviceSpec& spec) const override {
    return linear_tile_candidates(shape.dim("M"), shape.dim("K"), shape.dim("N"), spec);
  }
};

}  // namespace

void add_linear_launches(npu::Design& d, const LinearPlan& p,
                         const std::function<void(npu::Launch&, const LinearLaunch&)>& fill) {
  // A re-read last step (row-major y, ragged M) rewrites rows of the step
  // before it: in the panel order its rows would not continue the launch's.
  const bool tail_alone = p.panel && p.rowmajor_y && p.S > 1 && p.M % (int64_t{p.R} * p.m) != 0;
  const int64_t body = tail_alone ? p.S - 1 : p.S;
  const int64_t per_nb = p.nb_per_launch > 0 ? p.nb_per_launch : p.NB;
  auto launch = [&](int64_t s0, int64_t steps) {
    for (int64_t bb0 = 0; bb0 < p.NB; bb0 += per_nb) {
      npu::Launch l;
      l.name = per_nb == p.NB ? fmt::format("linear_s{}", s0) : fmt::format("linear_s{}_n{}", s0, bb0);
      fill(l, {s0, steps, bb0, std::min(per_nb, p.NB - bb0)});
      d.launches.push_back(std::move(l));
    }
  };
  for (int64_t s0 = 0; s0 < body; s0 += p.s_per_launch) launch(s0, std::min(p.s_per_launch, body - s0));
  if (tail_alone) launch(p.S - 1, 1);
}

BuiltOp build_linear(const OpShape& shape, const npu::DeviceSpec& spec, const TileOptions& tiles) {
  const int64_t M = shape.dim("M"), K = shape.dim("K"), N = shape.dim("N");
  check_tile_keys(shape.key(), tiles,
                  {"gemm", "m", "k", "n", "columns", "rows", "streams", "x_resident", "panel",
                   "panel_k", "wk", "y_depth", kRowMajorTile, kRowMajorOutTile});
  LinearPlan p = plan_linear(M, K, N, spec, tiles);
  BuiltOp out;
  out.shape = shape;
  out.design = make_design(p, spec);
  try {
    validate_design(out.design, spec);
  } catch (const npu::DesignError&) {
    // Two y objects of a given K block can fit L1 by size and still not
    // place: the allocator starts x and w on bank boundaries, and the gaps
    // left are each smaller than the accumulator (smollm2-135m's K=576 at
    // k=144, m=64, n=24). One y object with the accumulator fixed after x
    // and w packs (LinearPlan::acc_address).
    if (!p.gemm || p.y_depth == 1 || tiles.count("y_depth")) throw;
    TileOptions one = tiles;
    one["y_depth"] = 1;
    p = plan_linear(M, K, N, spec, one);
    out.design = make_design(p, spec);
    validate_design(out.design, spec);
  }
  out.inputs = {{"x", {M, K}}, {"w", {N, K}}};
  out.outputs = {{"y", {M, N}}};
  out.tiles = {{"gemm", p.gemm ? 1 : 0}, {"m", p.m}, {"k", p.k}, {"n", p.n},
               {"columns", p.C}, {"rows", p.R}};
  if (p.gemm) {
    out.tiles["panel"] = p.panel ? 1 : 0;
    out.tiles["y_depth"] = p.y_depth;
  }
  if (p.wk > 1) out.tiles["wk"] = p.wk;
  if (p.partial_panel()) out.tiles["panel_k"] = p.panel_k;
  if (p.rowmajor) out.tiles[kRowMajorTile] = 1;
  if (p.rowmajor_y) out.tiles[kRowMajorOutTile] = 1;
  if (!p.gemm) {
    out.tiles["streams"] = p.streams_per_column;
    out.tiles["x_resident"] = p.x_resident ? 1 : 0;
  }
  // pack / unpack only need the host buffer declarations; a shared copy keeps
  // them valid however the BuiltOp is moved.
  auto design = std::make_shared<npu::Design>(out.design);
  out.pack = [p, design](size_t input, std::span<const float> v, npu::HostMemory& host) {
    if (input == 0)
      pack_x(p, *design, v, host);
    else
      pack_w(p, *design, v, host);
  };
  out.unpack = [p, design](size_t, const npu::HostMemory& host) {
    return unpack_y(p, *design, host);
  };
  return out;
}

void register_linear_builder() { register_op_builder(std::make_unique<LinearBuilder>()); }

}  // namespace tessera::kernels
