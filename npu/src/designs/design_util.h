#pragma once
// Small helpers the microbenchmark builders share: core-program ops and the
// splitting of a contiguous transfer into BD dimensions within the spec's limits.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/npu/design.h"
#include "tessera/npu/device_spec.h"

namespace tessera::npu::detail {

CoreOp op_acquire(const std::string& fifo, CoreOp::Port port, int64_t n = 1);
CoreOp op_release(const std::string& fifo, CoreOp::Port port, int64_t n = 1);
CoreOp op_call(const std::string& kernel, std::vector<std::string> args, KernelParams params);
CoreOp op_loop(int64_t count, std::vector<CoreOp> body);

Fifo make_fifo(std::string name, TileCoord producer, std::vector<TileCoord> consumers,
               int64_t object_bytes, int depth, int elem_bytes = 2);

// dims covering `elems` contiguous elements (at most 3, each within the
// spec's wrap / size limits); DesignError naming `what` if impossible.
std::vector<Dim> contiguous_dims(int64_t elems, const DeviceSpec& spec, const std::string& what);

TileCoord shim_tile(int col);
TileCoord mem_tile(int col);
TileCoord compute_tile(const DeviceSpec& spec, int col, int compute_row);

}  // namespace tessera::npu::detail
