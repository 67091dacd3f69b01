// bf16 GEMM in the mlir-aie whole-array style (programming_examples/basic/
// matrix_multiplication/whole_array): core (c, r) owns C tiles of rows
// tm*rows*m + r*m and columns (tn*columns + c)*n. A row blocks enter through
// the first nA mem tiles (each splits g = rows / nA row blocks) and are
// broadcast along a compute row; B column blocks go down their column; the
// rows' C tiles are joined in the column's mem tile and leave by its shim.
// Per C tile a core zeroes nothing: store_bf16 leaves its accumulator at 0.
#include <algorithm>

#include <fmt/format.h>

#include "designs/design_util.h"
#include "tessera/npu/designs.h"
#include "tessera/npu/errors.h"

namespace tessera::npu {

using namespace detail;

namespace {

struct Plan {
  GemmParams p;
  int C = 0, R = 0, nA = 0, g = 0;
  int64_t tm_total = 0, tn = 0, kt = 0;
  bool b_one_task = true;  // B's per-tm pattern fits one 3-d BD
  int64_t tm_per_launch = 0;
  int64_t tn_per_launch = 0;  // < tn when one C tile row needs more shim BDs than exist
};

Plan plan(const GemmParams& p, const DeviceSpec& spec) {
  Plan pl;
  pl.p = p;
  pl.C = p.columns;
  pl.R = p.rows == 0 ? spec.compute_rows : p.rows;
  if (pl.C < 1 || pl.C > spec.columns || pl.R < 1 || pl.R > spec.compute_rows)
    throw_error<DesignError>("gemm: {} columns x {} rows does not fit the {}x{} array of {}",
                             pl.C, pl.R, spec.columns, spec.compute_rows, spec.name);
  // The bf16 matrix instruction is 4x8x8 (m x k x n).
  if (p.m <= 0 || p.k <= 0 || p.n <= 0 || p.m % 4 || p.k % 8 || p.n % 8)
    throw_error<DesignError>("gemm: core tile {}x{}x{} is not a multiple of the 4x8x8 bf16 "
                             "matrix instruction", p.m, p.k, p.n);
  if (p.M % (p.m * pl.R) || p.K % p.k || p.N % (p.n * pl.C))
    throw_error<DesignError>(
        "gemm: shape {}x{}x{} (MxKxN) does not tile: M must be a multiple of m*rows = {}, K of "
        "k = {}, N of n*columns = {}", p.M, p.K, p.N, p.m * pl.R, p.k, p.n * pl.C);
  pl.nA = std::min(pl.C, pl.R);
  while (pl.R % pl.nA) --pl.nA;
  pl.g = pl.R / pl.nA;
  pl.tm_total = p.M / (p.m * pl.R);
  pl.tn = p.N / (p.n * pl.C);
  pl.kt = p.K / p.k;
  pl.b_one_task = p.K <= spec.bd_max_size;
  // Shim BDs per tm on the busiest shim: A (1) + C (1) + B (1 for all tm, or
  // one per C tile column). When a whole C tile row needs more than the shim
  // has, the C tile columns are split over launches too (IRON recycles BDs
  // with waits instead; the IR has none, and A is re-streamed per C tile
  // column either way, so the traffic is the same).
  int64_t fixed = pl.b_one_task ? 1 : 0;
  pl.tn_per_launch = pl.tn;
  auto per_tm = [&] { return 2 + (pl.b_one_task ? 0 : pl.tn_per_launch); };
  while (pl.tn_per_launch > 1 && spec.shim.buffer_descriptors - fixed < per_tm()) {
    --pl.tn_per_launch;
    while (pl.tn % pl.tn_per_launch) --pl.tn_per_launch;
  }
  int64_t budget = (spec.shim.buffer_descriptors - fixed) / per_tm();
  budget = std::min(budget, spec.bd_max_repeat);
  if (budget < 1)
    throw_error<DesignError>("gemm {}x{}x{}: one C tile needs {} shim BDs, {} has {}", p.M,
                             p.K, p.N, per_tm() + fixed, spec.name, spec.shim.buffer_descriptors);
  int64_t launches = (pl.tm_total + budget - 1) / budget;
  while (pl.tm_total % launches) ++launches;  // equal launches
  pl.tm_per_launch = pl.tm_total / launches;
  return pl;
}

std::string a_l1(int r) { return fmt::format("A_row{}", r); }

void add_dataflow(Launch& l, const Plan& pl, const DeviceSpec& spec) {
  const GemmParams& p = pl.p;
  for (int j = 0; j < pl.nA; ++j) {
    std::string in = fmt::format("A{}", j);
    l.fifos.push_back(make_fifo(in, shim_tile(j), {mem_tile(j)}, pl.g * p.m * p.k * 2, 2));
    Link link{mem_tile(j), {in}, {}, {}};
    for (int t = 0; t < pl.g; ++t) {
      int r = j * pl.g + t;
      std::vector<TileCoord> row;
      for (int c = 0; c < pl.C; ++c) row.push_back(compute_tile(spec, c, r));
      l.fifos.push_back(make_fifo(a_l1(r), mem_tile(j), row, p.m * p.k * 2, 2));
      link.outputs.push_back(a_l1(r));
      link.offsets_bytes.push_back(int64_t{t} * p.m * p.k * 2);
    }
    l.links.push_back(std::move(link));
  }
  for (int c = 0; c < pl.C; ++c) {
    std::string b = fmt::format("B{}", c), bl1 = fmt::format("B_col{}", c);
    std::vector<TileCoord> col;
    for (int r = 0; r < pl.R; ++r) col.push_back(compute_tile(spec, c, r));
    l.fifos.push_back(make_fifo(b, shim_tile(c), {mem_tile(c)}, p.k * p.n * 2, 2));
    l.fifos.push_back(make_fifo(bl1, mem_tile(c), col, p.k * p.n * 2, 2));
    l.links.push_back({mem_tile(c), {b}, {bl1}, {0}});
    std::string cout = fmt::format("C{}", c);
    Link join{mem_tile(c), {}, {cout}, {}};
    for (int r = 0; r < pl.R; ++r) {
      std::string cr = fmt::format("C{}_{}", c, r);
      // Depth 1 keeps A, B, C and the fp32 accumulator of a 64^3 tile in 64 KiB.
      l.fifos.push_back(make_fifo(cr, compute_tile(spec, c, r), {mem_tile(c)}, p.m * p.n * 2, 1));
      join.inputs.push_back(cr);
      join.offsets_bytes.push_back(int64_t{r} * p.m * p.n * 2);
    }
    l.fifos.push_back(make_fifo(cout, mem_tile(c), {shim_tile(c)}, pl.R * p.m * p.n * 2, 2));
    l.links.push_back(std::move(join));
  }
}

void add_cores(Launch& l, const Plan& pl, const DeviceSpec& spec, int64_t tiles) {
  const GemmParams& p = pl.p;
  using P = CoreOp::Port;
  for (int c = 0; c < pl.C; ++c)
    for (int r = 0; r < pl.R; ++r) {
      TileCoord t = compute_tile(spec, c, r);
      std::string a = a_l1(r), b = fmt::format("B_col{}", c), cr = fmt::format("C{}_{}", c, r);
      std::string acc = "acc";
      l.buffers.push_back({acc, t, p.m * p.n * 4, -1});
      std::vector<CoreOp> kloop = {
          op_acquire(a, P::consume), op_acquire(b, P::consume),
          op_call("matmul_bf16_f32", {a, b, acc}, {{"m", p.m}, {"k", p.k}, {"n", p.n}}),
          op_release(a, P::consume), op_release(b, P::consume)};
      std::vector<CoreOp> tile = {op_loop(pl.kt, std::move(kloop)), op_acquire(cr, P::produce),
                                  op_call("store_bf16", {acc, cr}, {{"elems", p.m * p.n}}),
                                  op_release(cr, P::produce)};
      l.cores.push_back({t,
                         {op_call("zero_f32", {acc}, {{"elems", p.m * p.n}}),
                          op_loop(tiles, std::move(tile))}});
    }
}

// C tile rows [tm0, tm0 + tms) x C tile columns [tn0, tn0 + tns).
void add_sequence(Launch& l, const Plan& pl, int64_t tm0, int64_t tms, int64_t tn0, int64_t tns) {
  const GemmParams& p = pl.p;
  const int64_t C = pl.C, R = pl.R;
  if (pl.b_one_task)
    for (int c = 0; c < pl.C; ++c)
      l.sequence.push_back({fmt::format("B{}", c), "B",
                            {(tn0 * C + c) * p.n, {{tns, C * p.n}, {p.K, p.N}, {p.n, 1}}, tms},
                            true});
  for (int64_t tm = tm0; tm < tm0 + tms; ++tm) {
    for (int j = 0; j < pl.nA; ++j) {
      int64_t row0 = tm * R * p.m + int64_t{j} * pl.g * p.m;
      l.sequence.push_back({fmt::format("A{}", j), "A",
                            {row0 * p.K, {{pl.kt, p.k}, {pl.g * p.m, p.K}, {p.k, 1}}, tns},
                            true});
    }
    for (int c = 0; c < pl.C && !pl.b_one_task; ++c)
      for (int64_t tn = tn0; tn < tn0 + tns; ++tn)
        l.sequence.push_back({fmt::format("B{}", c), "B",
                              {(tn * C + c) * p.n, {{pl.kt, p.k * p.N}, {p.k, p.N}, {p.n, 1}}, 1},
                              true});
    for (int c = 0; c < pl.C; ++c)
      l.sequence.push_back({fmt::format("C{}", c), "C",
                            {tm * R * p.m * p.N + (tn0 * C + c) * p.n,
                             {{tns, C * p.n}, {R * p.m, p.N}, {p.n, 1}}, 1},
                            false});
  }
}

}  // namespace

Design gemm_design(const GemmParams& p, const DeviceSpec& spec) {
  Plan pl = plan(p, spec);
  Design d;
  d.name = fmt::format("gemm_{}x{}x{}_{}c{}r", p.M, p.K, p.N, pl.C, pl.R);
  d.host_buffers = {{"A", p.M * p.K * 2, 2}, {"B", p.K * p.N * 2, 2}, {"C", p.M * p.N * 2, 2}};
  const bool split_n = pl.tn_per_launch < pl.tn;
  for (int64_t tm0 = 0; tm0 < pl.tm_total; tm0 += pl.tm_per_launch)
    for (int64_t tn0 = 0; tn0 < pl.tn; tn0 += pl.tn_per_launch) {
      Launch l;
      l.name = fmt::format("gemm_rows{}", tm0 * pl.R * p.m);
      if (split_n) l.name += fmt::format("_cols{}", tn0 * pl.C * p.n);
      add_dataflow(l, pl, spec);
      add_cores(l, pl, spec, pl.tm_per_launch * pl.tn_per_launch);
      add_sequence(l, pl, tm0, pl.tm_per_launch, tn0, pl.tn_per_launch);
      d.launches.push_back(std::move(l));
    }
  return d;
}

}  // namespace tessera::npu
