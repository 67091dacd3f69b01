#include "designs/design_util.h"

#include <algorithm>

#include "tessera/npu/builder.h"
#include "tessera/npu/errors.h"

namespace tessera::npu::detail {

// The reference designs predate builder.h; these keep their call sites short
// and delegate to the one set of IR constructors.
CoreOp op_acquire(const std::string& fifo, CoreOp::Port port, int64_t n) {
  return port == CoreOp::Port::consume ? build::acquire_in(fifo, n) : build::acquire_out(fifo, n);
}

CoreOp op_release(const std::string& fifo, CoreOp::Port port, int64_t n) {
  return port == CoreOp::Port::consume ? build::release_in(fifo, n) : build::release_out(fifo, n);
}

CoreOp op_call(const std::string& kernel, std::vector<std::string> args, KernelParams params) {
  return build::call(kernel, std::move(args), std::move(params));
}

CoreOp op_loop(int64_t count, std::vector<CoreOp> body) {
  return build::loop(count, std::move(body));
}

Fifo make_fifo(std::string name, TileCoord producer, std::vector<TileCoord> consumers,
               int64_t object_bytes, int depth, int elem_bytes) {
  return build::fifo(name, producer, std::move(consumers), object_bytes, depth, elem_bytes);
}

namespace {
// Largest divisor of n that is <= limit (1 always qualifies).
int64_t largest_divisor_upto(int64_t n, int64_t limit) {
  for (int64_t d = std::min(n, limit); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}
}  // namespace

std::vector<Dim> contiguous_dims(int64_t elems, const DeviceSpec& spec, const std::string& what) {
  if (elems <= spec.bd_max_wrap) return {Dim{elems, 1}};
  int64_t w = largest_divisor_upto(elems, spec.bd_max_wrap);
  int64_t rest = elems / w;
  if (rest <= spec.bd_max_size) return {Dim{rest, w}, Dim{w, 1}};
  int64_t b = largest_divisor_upto(rest, spec.bd_max_size);
  int64_t a = rest / b;
  if (a <= spec.bd_max_size && b * w <= spec.bd_max_stride)
    return {Dim{a, b * w}, Dim{b, w}, Dim{w, 1}};
  throw_error<DesignError>(
      "{}: {} contiguous elements cannot be expressed in 3 BD dimensions (wrap <= {}, size <= {})",
      what, elems, spec.bd_max_wrap, spec.bd_max_size);
}

TileCoord shim_tile(int col) { return TileCoord{col, 0}; }
TileCoord mem_tile(int col) { return TileCoord{col, 1}; }
TileCoord compute_tile(const DeviceSpec& spec, int col, int compute_row) {
  return TileCoord{col, spec.shim_rows + spec.mem_rows + compute_row};
}

}  // namespace tessera::npu::detail
