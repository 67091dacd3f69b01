// The row-wise dataflow shared by the norm / elementwise / rope / kv builders
// (see kernels/builders/rowwise.h for the flows and why they are shaped so).
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/builders/grid.h"
#include "tessera/kernels/builders/rowwise.h"
#include "tessera/kernels/tile_kernels.h"
#include "tessera/npu/builder.h"

namespace tessera::kernels {
namespace {

using npu::CoreOp;
using npu::TileCoord;
namespace b = npu::build;

using grid::ceil_div;
using grid::core;
using grid::kL1Align;
using grid::mem;
using grid::opt;
using grid::pool;
using grid::shim;

// The gemm x buffers some row reaches (fewer than R when M < R * m): the
// others the producer would never write, so they are not its output.
int gemm_x_buffers(const GemmXLayout& g) {
  return g.on() ? static_cast<int>(std::min<int64_t>(g.R, (g.M + g.m - 1) / g.m)) : 0;
}

// Per tile: P stream objects double-buffered, the constant once, two side
// objects double-buffered, two out objects, plus the kernel's own scratch.
int64_t footprint(const RowwiseSpec& s, int64_t m, int64_t wt) {
  int64_t bytes = pool(2 * s.P * m * wt * 2) + pool(2 * m * wt * 2);
  if (s.const_elems) bytes += pool(s.const_elems * 2);
  if (s.side_cols) bytes += pool(4 * m * s.side_cols * 4);
  return bytes + tile_kernel_l1_bytes(s.kernel, s.params(m, wt));
}

}  // namespace

RowwisePlan plan_rowwise(const RowwiseSpec& s, const npu::DeviceSpec& spec,
                         const TileOptions& tiles) {
  RowwisePlan p;
  p.heads_mode = s.heads > 0;
  if (s.rows < 1 || s.cols < 1)
    throw_error<LimitError>("{}: rows {} and cols {} must be >= 1", s.what, s.rows, s.cols);
  int C = static_cast<int>(opt(tiles, "columns", spec.columns));
  int R = static_cast<int>(opt(tiles, "rows", spec.compute_rows));
  if (C < 1 || C > spec.columns || R < 1 || R > spec.compute_rows)
    throw_error<LimitError>("{}: {} columns x {} rows outside the {}x{} array of {}", s.what, C, R,
                            spec.columns, spec.compute_rows, spec.name);
  // Short inputs use fewer tiles rather than padding every tile.
  C = static_cast<int>(std::min<int64_t>(C, s.rows));
  int64_t row_tiles = C;
  if (p.heads_mode) {
    R = static_cast<int>(std::min<int64_t>(R, s.heads));
    // No padded heads where a divisor of heads keeps at least half the rows:
    // padded heads cost DDR bytes, and without them a one-row tensor is laid
    // out plain, as the row-major producer of a decode rope writes it.
    for (int d = R; d >= (R + 1) / 2 && !tiles.count("rows"); --d)
      if (s.heads % d == 0) {
        R = d;
        break;
      }
    int64_t hr = ceil_div(s.heads, R);
    R = static_cast<int>(ceil_div(s.heads, hr));  // no tile left without a head
    p.wt = hr * s.unit;
  } else {
    R = static_cast<int>(std::min<int64_t>(R, ceil_div(s.rows, C)));
    row_tiles = int64_t{C} * R;
    p.wt = s.cols;
  }
  p.C = C;
  p.R = R;
  const int64_t budget = spec.compute.memory_bytes;
  int64_t want = ceil_div(s.rows, row_tiles);
  int64_t m = opt(tiles, "m", want);
  if (!tiles.count("m") && footprint(s, m, p.wt) > budget) {
    // Largest m that fits (footprint grows with m): fewest, largest calls.
    int64_t lo = 1, hi = m;
    while (lo + 1 < hi) {
      int64_t mid = (lo + hi) / 2;
      (footprint(s, mid, p.wt) <= budget ? lo : hi) = mid;
    }
    m = lo;
  }
  // Objects are whole 4-byte DMA words.
  if (m < 1 || footprint(s, m, p.wt) > budget || (m * p.wt) % 2)
    throw_error<LimitError>("{}: a block of {} rows x {} columns needs {} bytes of L1 (limit {} "
                            "on {}) or is not whole 4-byte words",
                            s.what, m, p.wt, footprint(s, std::max<int64_t>(m, 1), p.wt), budget,
                            spec.name);
  p.S = ceil_div(s.rows, row_tiles * m);
  // Spread the padding: the smallest m that keeps S steps.
  if (!tiles.count("m")) m = ceil_div(s.rows, row_tiles * p.S);
  if ((m * p.wt) % 2) ++m;
  p.m = m;
  p.l1_bytes = footprint(s, m, p.wt);
  return p;
}

namespace {

std::string in_fifo(int c, int r) { return fmt::format("in{}_{}", c, r); }
std::string y_fifo(int c, int r) { return fmt::format("y{}_{}", c, r); }

void add_fifos(npu::Launch& l, const RowwiseSpec& s, const RowwisePlan& p,
               const npu::DeviceSpec& spec) {
  const int64_t obj = p.m * p.wt * 2;
  std::vector<TileCoord> all;
  for (int c = 0; c < p.C; ++c)
    for (int r = 0; r < p.R; ++r) all.push_back(core(spec, c, r));
  if (s.const_elems) l.fifos.push_back(b::fifo("w", shim(0), all, s.const_elems * 2, 1));
  for (int c = 0; c < p.C; ++c) {
    std::string in = fmt::format("in{}", c), y = fmt::format("y{}", c);
    l.fifos.push_back(b::fifo(in, shim(c), {mem(spec, c)}, p.R * obj, 2));
    npu::Link split{mem(spec, c), {in}, {}, {}};
    npu::Link join{mem(spec, c), {}, {y}, {}};
    std::vector<TileCoord> col;
    for (int r = 0; r < p.R; ++r) {
      col.push_back(core(spec, c, r));
      l.fifos.push_back(b::fifo(in_fifo(c, r), mem(spec, c), {core(spec, c, r)}, obj, 2 * s.P));
      split.outputs.push_back(in_fifo(c, r));
      split.offsets_bytes.push_back(r * obj);
      l.fifos.push_back(b::fifo(y_fifo(c, r), core(spec, c, r), {mem(spec, c)}, obj, 2));
      join.inputs.push_back(y_fifo(c, r));
      join.offsets_bytes.push_back(r * obj);
    }
    l.links.push_back(std::move(split));
    l.links.push_back(std::move(join));
    l.fifos.push_back(b::fifo(y, mem(spec, c), {shim(c)}, p.R * obj, 2));
    if (s.side_cols)
      l.fifos.push_back(
          b::fifo(fmt::format("t{}", c), shim(c), col, p.m * s.side_cols * 4, 4, 4));
  }
}

std::vector<CoreOp> core_program(const RowwiseSpec& s, const RowwisePlan& p, int c, int r) {
  const std::string in = in_fifo(c, r), y = y_fifo(c, r), t = fmt::format("t{}", c);
  std::vector<std::string> args;
  for (int i = 0; i < s.P; ++i) args.push_back(fmt::format("{}[{}]", in, i));
  if (s.const_elems) args.push_back("w");
  if (s.side_cols) {
    args.push_back(t + "[0]");
    args.push_back(t + "[1]");
  }
  args.push_back(y);
  std::vector<CoreOp> step = {b::acquire_in(in, s.P)};
  if (s.side_cols) step.push_back(b::acquire_in(t, 2));
  step.push_back(b::acquire_out(y));
  step.push_back(b::call(s.kernel, args, s.params(p.m, p.wt)));
  step.push_back(b::release_in(in, s.P));
  if (s.side_cols) step.push_back(b::release_in(t, 2));
  step.push_back(b::release_out(y));
  std::vector<CoreOp> prog;
  if (s.const_elems) prog.push_back(b::acquire_in("w"));
  prog.push_back(b::loop(p.S, std::move(step)));
  if (s.const_elems) prog.push_back(b::release_in("w"));
  return prog;
}

}  // namespace

namespace {

// The row-major variant: the blocked variant's fifos, links and programs per
// launch of at most rowmajor_steps_per_launch M steps, the shim tasks cutting
// the objects out of the row-major buffers (rowwise_rowmajor.cpp).
npu::Design make_rowmajor_design(const RowwiseSpec& s, const RowwisePlan& p,
                                 const npu::DeviceSpec& spec) {
  npu::Design d;
  d.name = fmt::format("{}_{}x{}_m{}_S{}_rowmajor", s.kernel, p.C, p.R, p.m, p.S);
  if (s.gemm_x.on()) d.name += fmt::format("_gemmx{}x{}", s.gemm_x.m, s.gemm_x.k);
  if (s.const_elems) d.host_buffers.push_back({"w", s.const_elems * 2, 2});
  for (int i = 0; i < s.P; ++i) d.host_buffers.push_back({rowmajor_in(i), s.numel * 2, 2});
  // The f32 side table (rope's cos / sin) is host-made: blocked as ever.
  for (int c = 0; s.side_cols && c < p.C; ++c)
    d.host_buffers.push_back({fmt::format("t_c{}", c), p.S * 2 * p.m * s.side_cols * 4, 4});
  if (!s.gemm_x.on()) d.host_buffers.push_back({"y_rows", s.numel * 2, 2});
  for (int r = 0; r < gemm_x_buffers(s.gemm_x); ++r)
    d.host_buffers.push_back({gemm_x_buffer(r), s.gemm_x.buffer_elems() * 2, 2});
  const int64_t per = rowmajor_steps_per_launch(s, p, spec);
  for (int64_t s0 = 0; s0 < p.S; s0 += per) {
    RowwisePlan q = p;
    q.S = std::min(per, p.S - s0);
    npu::Launch l;
    l.name = fmt::format("{}_s{}", s.kernel, s0);
    add_fifos(l, s, q, spec);
    if (s.const_elems) l.sequence.push_back(b::to_device("w", "w"));
    add_rowmajor_io(l, s, p, spec, s0, q.S);
    for (int c = 0; c < q.C; ++c)
      for (int r = 0; r < q.R; ++r) l.cores.push_back({core(spec, c, r), core_program(s, q, c, r)});
    d.launches.push_back(std::move(l));
  }
  return d;
}

// Column c's output rows written into a head-major out_host: row by row, each
// row's heads `out_rows * unit` apart.
npu::AccessPattern head_major_rows(const RowwiseSpec& s, const RowwisePlan& p, int c,
                                   const npu::DeviceSpec& spec) {
  const int64_t rows = p.S * p.R * p.m, heads = p.wt / s.out_unit;
  if (p.heads_mode || p.wt != s.cols || s.cols % s.out_unit != 0 || rows > spec.bd_max_size ||
      heads > spec.bd_max_size || s.out_unit > spec.bd_max_wrap ||
      s.out_rows * s.out_unit > spec.bd_max_stride)
    throw_error<LimitError>("{}: a head-major output of {} heads x {} rows x {} exceeds the shim "
                            "BD size / wrap / stride limits of {} (or the heads do not tile {} "
                            "columns)", s.what, s.cols / std::max<int64_t>(s.out_unit, 1),
                            s.out_rows, s.out_unit, spec.name, s.cols);
  npu::AccessPattern a;
  a.offset = (s.out_row0 + c * rows) * s.out_unit;
  a.dims = {{rows, s.out_unit}, {heads, s.out_rows * s.out_unit}, {s.out_unit, 1}};
  return a;
}

}  // namespace

// Element (row, col) of out_host (row-major, or head-major with out_unit).
int64_t rowwise_out_index(const RowwiseSpec& s, int64_t row, int64_t col) {
  if (s.out_unit <= 0) return row * s.cols + col;
  return (col / s.out_unit * s.out_rows + row) * s.out_unit + col % s.out_unit;
}

// Row-major elements [begin, end) of a zero-copy out_host (begin at a row's
// start) as runs contiguous in both: fn(flat index, index in out_host,
// length). A run is a row, or a head's out_unit columns of it in a
// head-major layout.
template <typename Fn>
void for_out_runs(const RowwiseSpec& s, int64_t begin, int64_t end, Fn&& fn) {
  const int64_t unit = s.out_unit > 0 ? s.out_unit : s.cols;
  for (int64_t flat = begin; flat < end; flat += unit)
    fn(flat, rowwise_out_index(s, flat / s.cols, flat % s.cols), std::min(unit, end - flat));
}

npu::Design make_rowwise_design(const RowwiseSpec& s, const RowwisePlan& p,
                                const npu::DeviceSpec& spec) {
  if (s.rowmajor) return make_rowmajor_design(s, p, spec);
  npu::Design d;
  d.name = fmt::format("{}_{}x{}_m{}_S{}", s.kernel, p.C, p.R, p.m, p.S);
  const int64_t col_elems = p.S * p.R * p.m * p.wt;  // one column's out elements
  if (s.const_elems) d.host_buffers.push_back({"w", s.const_elems * 2, 2});
  if (!s.out_host.empty()) d.host_buffers.push_back({s.out_host, s.out_rows * p.wt * 2, 2});
  npu::Launch l;
  l.name = s.kernel;
  add_fifos(l, s, p, spec);
  if (s.const_elems) l.sequence.push_back(b::to_device("w", "w"));
  for (int c = 0; c < p.C; ++c) {
    std::string in = fmt::format("in_c{}", c), y = fmt::format("y_c{}", c);
    d.host_buffers.push_back({in, s.P * col_elems * 2, 2});
    l.sequence.push_back(b::to_device(fmt::format("in{}", c), in));
    if (s.side_cols) {
      std::string t = fmt::format("t_c{}", c);
      d.host_buffers.push_back({t, p.S * 2 * p.m * s.side_cols * 4, 4});
      l.sequence.push_back(b::to_device(fmt::format("t{}", c), t));
    }
    if (s.out_host.empty()) {
      d.host_buffers.push_back({y, col_elems * 2, 2});
      l.sequence.push_back(b::from_device(fmt::format("y{}", c), y));
    } else if (s.out_unit > 0) {
      l.sequence.push_back(b::from_device(fmt::format("y{}", c), s.out_host,
                                          head_major_rows(s, p, c, spec)));
    } else {
      l.sequence.push_back(b::from_device(
          fmt::format("y{}", c), s.out_host,
          span_pattern((s.out_row0 + c * p.S * p.R * p.m) * p.wt, col_elems, s.out_rows * p.wt, 1,
                       spec, s.what + " out rows")));
    }
  }
  for (int c = 0; c < p.C; ++c)
    for (int r = 0; r < p.R; ++r) l.cores.push_back({core(spec, c, r), core_program(s, p, c, r)});
  d.launches.push_back(std::move(l));
  return d;
}

namespace {

// Block (c, s, r) of a streamed tensor: its first logical row and column.
struct Origin {
  int64_t row, col;
};
Origin origin(const RowwisePlan& p, int c, int64_t s, int r) {
  if (p.heads_mode) return {(c * p.S + s) * p.m, r * p.wt};
  return {((c * p.S + s) * p.R + r) * p.m, 0};
}

// Visits every element of the blocks of column c: fn(host index within the
// column's P-stream buffer for stream 0, logical flat index or -1 if padding).
template <class Fn>
void for_blocks(const RowwiseSpec& s, const RowwisePlan& p, int c, int P, Fn fn) {
  for (int64_t st = 0; st < p.S; ++st)
    for (int r = 0; r < p.R; ++r) {
      Origin o = origin(p, c, st, r);
      int64_t base = ((st * P) * p.R + r) * p.m * p.wt;
      for (int64_t i = 0; i < p.m; ++i) {
        int64_t row = o.row + i;
        for (int64_t j = 0; j < p.wt; ++j) {
          int64_t col = o.col + j, flat = row * s.cols + col;
          bool ok = row < s.rows && col < s.cols && flat < s.numel;
          fn(base + i * p.wt + j, ok ? flat : -1);
        }
      }
    }
}

// A group of the gemm's rows must start and end on one of the producer's
// objects (add_rowmajor_io), which the L1-filling block need not do (silu_mul's
// flat rows: 7 of 512 against groups of 64 x 8192): unless given, the largest
// m that fits and whose objects tile a group.
TileOptions gemm_x_blocks(const RowwiseSpec& s, const npu::DeviceSpec& spec,
                          const TileOptions& tiles) {
  if (!s.gemm_x.on() || tiles.count("m")) return tiles;
  const RowwisePlan first = plan_rowwise(s, spec, tiles);
  const int64_t group = s.gemm_x.m * s.gemm_x.K;
  TileOptions out = tiles;
  for (int64_t m = first.m; m >= 1; --m)
    if (group % (first.R * m * first.wt) == 0) {
      out["m"] = m;
      break;
    }
  return out;
}

// A flat view whose rows of 512 do not tile the gemm's rows (Qwen2.5's
// silu_mul into down, K = 4864 or 11008): a launch's run then starts inside
// a row and its first task is a piece of a row, not whole objects, so the
// gemm x output is refused. Objects of q whole rows (q dividing the gemm's m,
// largest first) split over R tiles as m flat rows of a width dividing them
// start every run on a row and end every group on an object. Returns the
// tiles (m, rows) with s's width set, or `tiles` as given when none fits L1.
TileOptions whole_row_objects(RowwiseSpec& s, const npu::DeviceSpec& spec, const TileOptions& tiles) {
  const int64_t K = s.gemm_x.K;
  // One row (a gemv's x) is written as one span: no row to start inside.
  if (!s.flat || !s.gemm_x.on() || s.gemm_x.M == 1 || tiles.count("m") || tiles.count("rows") ||
      K % s.cols == 0)
    return tiles;
  for (int64_t q = s.gemm_x.m; q >= 1; --q) {
    if (s.gemm_x.m % q || s.gemm_x.M % q) continue;
    for (int R = spec.compute_rows; R >= 1; --R) {
      if ((q * K) % R) continue;
      const int64_t per = q * K / R;  // elements of one tile's block
      int64_t w = std::min(per, kFlatWidth);
      while (w > 1 && (per % w || w % 2)) --w;
      if (per % w || w % 2) continue;
      RowwiseSpec c = s;
      c.cols = w;
      c.rows = (s.numel + w - 1) / w;
      TileOptions t = tiles;
      t["m"] = per / w;
      t["rows"] = R;
      try {
        plan_rowwise(c, spec, t);
      } catch (const LimitError&) {
        continue;
      }
      s = c;
      return t;
    }
  }
  return tiles;
}

}  // namespace

namespace {

// Whether rows of the output are runs of out_host (or of the row-major y_rows)
// that unpack() reads one by one: the zero-copy and row-major layouts whose
// row is the output's row (the flat views of elementwise ops are not).
bool rs_zero_copy_rows(const RowwiseSpec& s, int64_t out_rows, int64_t out_numel) {
  if (s.gemm_x.on() || out_rows <= 0 || out_numel % out_rows != 0) return false;
  if (s.rowmajor) return true;
  return !s.out_host.empty() && s.cols == out_numel / out_rows;
}

}  // namespace

BuiltOp build_rowwise(const OpShape& shape, const RowwiseSpec& s, const npu::DeviceSpec& spec,
                      const TileOptions& tiles, std::vector<OpTensor> inputs,
                      std::vector<RowwiseInput> roles, OpTensor output) {
  auto sp = std::make_shared<RowwiseSpec>(s);
  // Row-major streams cost no more than blocked ones: the output-only
  // request is served by the whole row-major variant.
  for (const char* key : {kRowMajorTile, kRowMajorOutTile}) {
    auto rm = tiles.find(key);
    sp->rowmajor = sp->rowmajor || (rm != tiles.end() && rm->second != 0);
  }
  // The gemm x output reads its streams row-major (rowwise.h GemmXLayout).
  sp->gemm_x = gemm_x_layout(s.what, tiles, shape_numel(output.shape) / output.shape.back(),
                             output.shape.back(), spec);
  sp->rowmajor = sp->rowmajor || sp->gemm_x.on();
  const TileOptions blocks = gemm_x_blocks(*sp, spec, whole_row_objects(*sp, spec, tiles));
  auto p = std::make_shared<RowwisePlan>(plan_rowwise(*sp, spec, blocks));
  BuiltOp out;
  out.shape = shape;
  out.design = make_rowwise_design(*sp, *p, spec);
  validate_design(out.design, spec);
  out.inputs = inputs;
  out.outputs = {output};
  out.tiles = {{"m", p->m}, {"columns", p->C}, {"rows", p->R}, {"steps", p->S}};
  if (sp->rowmajor) out.tiles[kRowMajorTile] = 1;
  if (sp->gemm_x.on())
    out.tiles.insert({{kGemmXM, sp->gemm_x.m}, {kGemmXK, sp->gemm_x.k}, {kGemmXRows, sp->gemm_x.R}});
  auto d = std::make_shared<npu::Design>(out.design);
  std::string key = shape.key();
  // Rows before `from_row` of an out_init input are in place already (the
  // executor's resident cache image); every other input packs whole.
  auto pack = [p, sp, d, roles, inputs, key](size_t input, std::span<const float> v, npu::HostMemory& host,
                                             int64_t from_row) {
    check_numel(key, inputs.at(input).name, v.size(), shape_numel(inputs[input].shape));
    const RowwiseInput role = roles.at(input);
    const RowwisePlan& pl = *p;
    const RowwiseSpec& rs = *sp;
    if (role.role == RowwiseInput::Role::constant) {
      f32_to_bf16(v, std::span<bf16>(host_bf16(*d, "w", host), v.size()));
      return;
    }
    if (role.role == RowwiseInput::Role::side) {
      const int64_t half = rs.side_cols;
      for (int c = 0; c < pl.C; ++c) {
        auto* t = reinterpret_cast<float*>(host_bytes(*d, fmt::format("t_c{}", c), host).data());
        for (int64_t st = 0; st < pl.S; ++st)
          for (int64_t i = 0; i < pl.m; ++i) {
            // Row-major steps past the end re-read the last whole block
            // (rowwise.h): their table rows follow it.
            int64_t row = (c * pl.S + st) * pl.m;
            if (rs.rowmajor) row = std::min(row, rs.rows - pl.m);
            row += i;
            if (row >= rs.rows) continue;
            float* dst = t + ((st * 2 + role.index) * pl.m + i) * half;
            std::copy_n(v.data() + row * half, half, dst);
          }
      }
      return;
    }
    if (role.role == RowwiseInput::Role::out_init) {
      bf16* o = host_bf16(*d, rs.out_host, host);
      const auto n = static_cast<int64_t>(v.size());
      for_out_runs(rs, std::min(from_row * rs.cols, n), n, [&](int64_t flat, int64_t at, int64_t len) {
        f32_to_bf16(v.subspan(static_cast<size_t>(flat), static_cast<size_t>(len)),
                    std::span<bf16>(o + at, static_cast<size_t>(len)));
      });
      // Padded stream rows carry the rows they will overwrite.
      for (int c = 0; c < pl.C; ++c) {
        bf16* dst = host_bf16(*d, fmt::format("in_c{}", c), host);
        for_blocks(rs, pl, c, 1, [&](int64_t h, int64_t flat) {
          if (flat >= 0) return;
          int64_t row = rs.out_row0 + c * pl.S * pl.R * pl.m + h / pl.wt;
          if (row * pl.wt + h % pl.wt < n) dst[h] = o[rowwise_out_index(rs, row, h % pl.wt)];
        });
      }
      return;
    }
    if (rs.rowmajor) {
      f32_to_bf16(v, std::span<bf16>(host_bf16(*d, rowmajor_in(role.index), host), v.size()));
      return;
    }
    const int64_t shift = role.index * pl.R * pl.m * pl.wt;  // stream p's objects
    for (int c = 0; c < pl.C; ++c) {
      bf16* dst = host_bf16(*d, fmt::format("in_c{}", c), host);
      for_blocks(rs, pl, c, rs.P, [&](int64_t h, int64_t flat) {
        if (flat >= 0) dst[h + shift] = f32_to_bf16(v[flat]);
      });
    }
  };
  out.pack = [pack](size_t input, std::span<const float> v, npu::HostMemory& host) { pack(input, v, host, 0); };
  if (!sp->rowmajor && !sp->out_host.empty())
    out.pack_rows = [pack](size_t input, std::span<const float> v, npu::HostMemory& host, int64_t first_row) {
      pack(input, v, host, std::max<int64_t>(first_row, 0));
    };
  int64_t out_numel = shape_numel(output.shape);
  out.unpack = [p, sp, d, out_numel](size_t, const npu::HostMemory& host) {
    const RowwisePlan& pl = *p;
    const RowwiseSpec& rs = *sp;
    std::vector<float> y(static_cast<size_t>(out_numel));
    if (const GemmXLayout& g = rs.gemm_x; g.on()) {
      std::vector<const bf16*> xr;
      for (int r = 0; r < gemm_x_buffers(g); ++r) xr.push_back(host_bf16(*d, gemm_x_buffer(r), host));
      for (int64_t i = 0; i < out_numel; ++i)
        y[i] = bf16_to_f32(xr[g.buffer(i / g.K)][g.index(i / g.K, i % g.K)]);
      return y;
    }
    if (!rs.out_host.empty() || rs.rowmajor) {
      const bf16* o = host_bf16(*d, rs.rowmajor ? std::string("y_rows") : rs.out_host, host);
      if (rs.rowmajor) {
        bf16_to_f32(std::span<const bf16>(o, y.size()), y);
        return y;
      }
      for_out_runs(rs, 0, out_numel, [&](int64_t flat, int64_t at, int64_t len) {
        bf16_to_f32(std::span<const bf16>(o + at, static_cast<size_t>(len)),
                    std::span<float>(y).subspan(static_cast<size_t>(flat), static_cast<size_t>(len)));
      });
      return y;
    }
    for (int c = 0; c < pl.C; ++c) {
      const bf16* src = host_bf16(*d, fmt::format("y_c{}", c), host);
      for_blocks(rs, pl, c, 1, [&](int64_t h, int64_t flat) {
        if (flat >= 0) y[flat] = bf16_to_f32(src[h]);
      });
    }
    return y;
  };
  const int64_t out_rows = output.shape.empty() ? 0 : output.shape[0];
  if (rs_zero_copy_rows(s, out_rows, out_numel))
    out.unpack_rows = [sp, d, out_numel, out_rows, key = shape.key()](size_t, const npu::HostMemory& host,
                                                                      int64_t first, int64_t count) {
      const RowwiseSpec& rs = *sp;
      const int64_t width = out_numel / out_rows;
      if (first < 0 || count < 0 || first + count > out_rows)
        throw_error<InternalError>("{}: rows [{}, {}) of an output of {} rows", key, first, first + count, out_rows);
      std::vector<float> y(static_cast<size_t>(count * width));
      const bf16* o = host_bf16(*d, rs.rowmajor ? std::string("y_rows") : rs.out_host, host);
      if (rs.rowmajor) {
        bf16_to_f32(std::span<const bf16>(o + first * width, y.size()), y);
        return y;
      }
      for_out_runs(rs, first * width, (first + count) * width, [&](int64_t flat, int64_t at, int64_t len) {
        bf16_to_f32(std::span<const bf16>(o + at, static_cast<size_t>(len)),
                    std::span<float>(y).subspan(static_cast<size_t>(flat - first * width), static_cast<size_t>(len)));
      });
      return y;
    };
  return out;
}

BuiltOp build_elementwise2(const OpShape& shape, const std::string& kernel,
                           const npu::DeviceSpec& spec, const TileOptions& tiles,
                           const std::string& a, const std::string& b, const std::string& out) {
  const int64_t M = shape.dim("M"), N = shape.dim("N");
  RowwiseSpec s;
  s.what = shape.key();
  s.kernel = kernel;
  s.numel = M * N;
  s.cols = kFlatWidth;
  s.rows = (s.numel + kFlatWidth - 1) / kFlatWidth;
  s.P = 2;
  s.flat = true;
  s.params = [](int64_t m, int64_t wt) { return npu::KernelParams{{"count", m * wt}}; };
  return build_rowwise(shape, s, spec, tiles, {{a, {M, N}}, {b, {M, N}}},
                       {{RowwiseInput::Role::stream, 0}, {RowwiseInput::Role::stream, 1}},
                       {out, {M, N}});
}

}  // namespace tessera::kernels
