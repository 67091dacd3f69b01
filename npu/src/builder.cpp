#include "tessera/npu/builder.h"

namespace tessera::npu::build {
namespace {

CoreOp port_op(CoreOp::Kind kind, CoreOp::Port port, const std::string& fifo, int64_t count) {
  CoreOp op;
  op.kind = kind;
  op.port = port;
  op.fifo = fifo;
  op.count = count;
  return op;
}

}  // namespace

CoreOp loop(int64_t count, std::vector<CoreOp> body) {
  CoreOp op;
  op.kind = CoreOp::Kind::loop;
  op.count = count;
  op.body = std::move(body);
  return op;
}

CoreOp acquire_in(const std::string& fifo, int64_t count) {
  return port_op(CoreOp::Kind::acquire, CoreOp::Port::consume, fifo, count);
}
CoreOp release_in(const std::string& fifo, int64_t count) {
  return port_op(CoreOp::Kind::release, CoreOp::Port::consume, fifo, count);
}
CoreOp acquire_out(const std::string& fifo, int64_t count) {
  return port_op(CoreOp::Kind::acquire, CoreOp::Port::produce, fifo, count);
}
CoreOp release_out(const std::string& fifo, int64_t count) {
  return port_op(CoreOp::Kind::release, CoreOp::Port::produce, fifo, count);
}

CoreOp call(const std::string& kernel, std::vector<std::string> args, KernelParams params) {
  CoreOp op;
  op.kind = CoreOp::Kind::call;
  op.kernel = kernel;
  op.args = std::move(args);
  op.params = std::move(params);
  return op;
}

AccessPattern pattern(std::initializer_list<Dim> dims, int64_t offset, int64_t repeat) {
  AccessPattern p;
  p.dims = dims;
  p.offset = offset;
  p.repeat = repeat;
  return p;
}

DmaTask to_device(const std::string& fifo, const std::string& host_buffer, AccessPattern p) {
  return {fifo, host_buffer, std::move(p), true};
}

DmaTask from_device(const std::string& fifo, const std::string& host_buffer, AccessPattern p) {
  return {fifo, host_buffer, std::move(p), false};
}

Fifo fifo(const std::string& name, TileCoord producer, std::vector<TileCoord> consumers, int64_t object_bytes,
          int depth, int elem_bytes) {
  Fifo f;
  f.name = name;
  f.producer = producer;
  f.consumers = std::move(consumers);
  f.object_bytes = object_bytes;
  f.depth = depth;
  f.elem_bytes = elem_bytes;
  return f;
}

}  // namespace tessera::npu::build
