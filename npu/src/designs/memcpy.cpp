// memcpy microbenchmark (mlir-aie programming_examples/basic/memcpy): every
// column and channel moves an equal contiguous slice of "in" to "out". The
// default bypass path (shim -> mem tile -> shim) measures what the DMAs and DDR
// can move; through_core adds the passthrough core, as the example's
// non-bypass mode, to show what a core hop costs.
#include <fmt/format.h>

#include "designs/design_util.h"
#include "tessera/npu/designs.h"
#include "tessera/npu/errors.h"

namespace tessera::npu {

using namespace detail;

namespace {
constexpr int kElemBytes = 4;  // int32 words, as the mlir-aie example

void check(const MemcpyParams& p, const DeviceSpec& spec) {
  if (p.columns < 1 || p.columns > spec.columns)
    throw_error<DesignError>("memcpy: columns {} outside 1..{} of {}", p.columns, spec.columns,
                             spec.name);
  if (p.channels < 1 || p.channels > spec.shim.dma_in || p.channels > spec.shim.dma_out)
    throw_error<DesignError>("memcpy: {} channels per column, shim has {} in / {} out",
                             p.channels, spec.shim.dma_out, spec.shim.dma_in);
  if (p.through_core && p.channels > spec.compute_rows)
    throw_error<DesignError>("memcpy: {} channels need {} compute rows, {} has {}", p.channels,
                             p.channels, spec.name, spec.compute_rows);
  int64_t unit = int64_t{p.columns} * p.channels * p.object_bytes;
  if (p.object_bytes <= 0 || p.object_bytes % kElemBytes != 0 || p.bytes <= 0 ||
      p.bytes % unit != 0)
    throw_error<DesignError>(
        "memcpy: {} bytes do not split into {} columns x {} channels x objects of {} bytes",
        p.bytes, p.columns, p.channels, p.object_bytes);
}
}  // namespace

Design memcpy_design(const MemcpyParams& p, const DeviceSpec& spec) {
  check(p, spec);
  Design d;
  d.name = fmt::format("memcpy_{}c{}h{}", p.columns, p.channels, p.through_core ? "_core" : "");
  d.host_buffers = {{"in", p.bytes, kElemBytes}, {"out", p.bytes, kElemBytes}};
  Launch l;
  l.name = "memcpy";
  int64_t slice = p.bytes / (int64_t{p.columns} * p.channels);
  int64_t objects = slice / p.object_bytes;
  for (int c = 0; c < p.columns; ++c) {
    for (int h = 0; h < p.channels; ++h) {
      std::string id = fmt::format("{}_{}", c, h);
      std::string in = "in" + id, out = "out" + id;
      l.fifos.push_back(make_fifo(in, shim_tile(c), {mem_tile(c)}, p.object_bytes, 2, kElemBytes));
      if (p.through_core) {
        TileCoord core = compute_tile(spec, c, h);
        std::string l1in = "l1in" + id, l1out = "l1out" + id;
        l.fifos.push_back(make_fifo(l1in, mem_tile(c), {core}, p.object_bytes, 2, kElemBytes));
        l.fifos.push_back(make_fifo(l1out, core, {mem_tile(c)}, p.object_bytes, 2, kElemBytes));
        l.links.push_back({mem_tile(c), {in}, {l1in}, {0}});
        l.links.push_back({mem_tile(c), {l1out}, {out}, {0}});
        using P = CoreOp::Port;
        l.cores.push_back(
            {core,
             {op_loop(objects, {op_acquire(l1in, P::consume), op_acquire(l1out, P::produce),
                                op_call("passthrough", {l1in, l1out}, {{"bytes", p.object_bytes}}),
                                op_release(l1in, P::consume), op_release(l1out, P::produce)})}});
      } else {
        l.links.push_back({mem_tile(c), {in}, {out}, {0}});
      }
      l.fifos.push_back(make_fifo(out, mem_tile(c), {shim_tile(c)}, p.object_bytes, 2, kElemBytes));
      int64_t elems = slice / kElemBytes;
      AccessPattern pat{(int64_t{c} * p.channels + h) * elems,
                        contiguous_dims(elems, spec, "memcpy slice " + id), 1};
      l.sequence.push_back({in, "in", pat, true});
      l.sequence.push_back({out, "out", pat, false});
    }
  }
  d.launches.push_back(std::move(l));
  return d;
}

}  // namespace tessera::npu
