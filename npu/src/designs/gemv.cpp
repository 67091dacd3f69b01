// bf16 GEMV (mlir-aie matrix_vector, one core per column): column c owns rows
// [c*M/C, (c+1)*M/C) of A, streamed from DDR through its mem tile in objects of
// whole rows; x is broadcast once from shim 0 and stays resident; each core
// fills y objects of rows_per_output results (one call per A object, at its
// offset) and sends them straight to its shim.
#include <fmt/format.h>

#include "designs/design_util.h"
#include "tessera/npu/designs.h"
#include "tessera/npu/errors.h"

namespace tessera::npu {

using namespace detail;

namespace {

void check(const GemvParams& p, const DeviceSpec& spec) {
  if (p.columns < 1 || p.columns > spec.columns)
    throw_error<DesignError>("gemv: columns {} outside 1..{} of {}", p.columns, spec.columns,
                             spec.name);
  int64_t r = p.rows_per_object, q = p.rows_per_output;
  if (r < 1 || q < r || q % r)
    throw_error<DesignError>("gemv: rows_per_output {} must be a positive multiple of "
                             "rows_per_object {}", q, r);
  if (p.K < 1 || p.M % (p.columns * q))
    throw_error<DesignError>("gemv: shape {}x{} (MxK) does not tile: M must be a multiple of "
                             "columns*rows_per_output = {}", p.M, p.K, p.columns * q);
  // x resident + two A objects + two y objects in one core's L1.
  int64_t l1 = p.K * 2 + 2 * r * p.K * 2 + 2 * q * 2;
  if (l1 > spec.compute.memory_bytes)
    throw_error<DesignError>("gemv: K = {} with {} rows per object needs {} B of L1 per core "
                             "(x resident + 2 A + 2 y objects), {} has {}", p.K, r, l1,
                             spec.name, spec.compute.memory_bytes);
}

}  // namespace

Design gemv_design(const GemvParams& p, const DeviceSpec& spec) {
  check(p, spec);
  const int64_t r = p.rows_per_object, q = p.rows_per_output;
  const int64_t rows_per_col = p.M / p.columns;
  Design d;
  d.name = fmt::format("gemv_{}x{}_{}c", p.M, p.K, p.columns);
  d.host_buffers = {{"A", p.M * p.K * 2, 2}, {"x", p.K * 2, 2}, {"y", p.M * 2, 2}};
  Launch l;
  l.name = "gemv";
  std::vector<TileCoord> cores;
  for (int c = 0; c < p.columns; ++c) cores.push_back(compute_tile(spec, c, 0));
  l.fifos.push_back(make_fifo("x", shim_tile(0), cores, p.K * 2, 1));
  l.sequence.push_back({"x", "x", {0, contiguous_dims(p.K, spec, "gemv x"), 1}, true});
  using P = CoreOp::Port;
  for (int c = 0; c < p.columns; ++c) {
    std::string a = fmt::format("A{}", c), al1 = fmt::format("A{}_l1", c);
    std::string y = fmt::format("y{}", c);
    l.fifos.push_back(make_fifo(a, shim_tile(c), {mem_tile(c)}, r * p.K * 2, 2));
    l.fifos.push_back(make_fifo(al1, mem_tile(c), {cores[c]}, r * p.K * 2, 2));
    l.links.push_back({mem_tile(c), {a}, {al1}, {0}});
    l.fifos.push_back(make_fifo(y, cores[c], {shim_tile(c)}, q * 2, 2));
    std::vector<CoreOp> fill = {op_acquire(y, P::produce)};
    for (int64_t off = 0; off < q; off += r) {
      fill.push_back(op_acquire(al1, P::consume));
      fill.push_back(op_call("gemv_bf16", {al1, "x", y}, {{"rows", r}, {"k", p.K}, {"offset", off}}));
      fill.push_back(op_release(al1, P::consume));
    }
    fill.push_back(op_release(y, P::produce));
    l.cores.push_back({cores[c],
                       {op_acquire("x", P::consume), op_loop(rows_per_col / q, std::move(fill)),
                        op_release("x", P::consume)}});
    std::string what = fmt::format("gemv A rows of column {}", c);
    l.sequence.push_back(
        {a, "A", {c * rows_per_col * p.K, contiguous_dims(rows_per_col * p.K, spec, what), 1},
         true});
    l.sequence.push_back(
        {y, "y", {c * rows_per_col, contiguous_dims(rows_per_col, spec, "gemv y"), 1}, false});
  }
  d.launches.push_back(std::move(l));
  return d;
}

}  // namespace tessera::npu
