#pragma once
// Conveniences that keep design builders short: core-program ops, patterns and
// host DMA tasks as one-line expressions. Everything builds plain Design IR
// structs; nothing here checks limits (validate() does).
#include <initializer_list>
#include <string>
#include <vector>

#include "tessera/npu/design.h"

namespace tessera::npu::build {

CoreOp loop(int64_t count, std::vector<CoreOp> body);
CoreOp acquire_in(const std::string& fifo, int64_t count = 1);   // consume port
CoreOp release_in(const std::string& fifo, int64_t count = 1);
CoreOp acquire_out(const std::string& fifo, int64_t count = 1);  // produce port
CoreOp release_out(const std::string& fifo, int64_t count = 1);
CoreOp call(const std::string& kernel, std::vector<std::string> args, KernelParams params = {});

// dims outermost first as {size, stride} pairs, in elements.
AccessPattern pattern(std::initializer_list<Dim> dims, int64_t offset = 0, int64_t repeat = 1);

DmaTask to_device(const std::string& fifo, const std::string& host_buffer, AccessPattern p = {});
DmaTask from_device(const std::string& fifo, const std::string& host_buffer, AccessPattern p = {});

Fifo fifo(const std::string& name, TileCoord producer, std::vector<TileCoord> consumers, int64_t object_bytes,
          int depth = 2, int elem_bytes = 2);

}  // namespace tessera::npu::build
