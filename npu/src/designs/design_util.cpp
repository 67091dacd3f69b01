#include "designs/design_util.h"

#include <algorithm>

#include "tessera/npu/errors.h"

namespace tessera::npu::detail {

CoreOp op_acquire(const std::string& fifo, CoreOp::Port port, int64_t n) {
  CoreOp op;
  op.kind = CoreOp::Kind::acquire;
  op.fifo = fifo;
  op.port = port;
  op.count = n;
  return op;
}

CoreOp op_release(const std::string& fifo, CoreOp::Port port, int64_t n) {
  CoreOp op = op_acquire(fifo, port, n);
  op.kind = CoreOp::Kind::release;
  return op;
}

CoreOp op_call(const std::string& kernel, std::vector<std::string> args, KernelParams params) {
  CoreOp op;
  op.kind = CoreOp::Kind::call;
  op.kernel = kernel;
  op.args = std::move(args);
  op.params = std::move(params);
  return op;
}

CoreOp op_loop(int64_t count, std::vector<CoreOp> body) {
  CoreOp op;
  op.kind = CoreOp::Kind::loop;
  op.count = count;
  op.body = std::move(body);
  return op;
}

Fifo make_fifo(std::string name, TileCoord producer, std::vector<TileCoord> consumers,
               int64_t object_bytes, int depth, int elem_bytes) {
  Fifo f;
  f.name = std::move(name);
  f.producer = producer;
  f.consumers = std::move(consumers);
  f.depth = depth;
  f.object_bytes = object_bytes;
  f.elem_bytes = elem_bytes;
  return f;
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
