#pragma once
// Small helpers every design builder shares: grid coordinates, tile options
// with defaults, and the allocator's pool alignment.
#include <cstdint>

#include "tessera/kernels/op_builder.h"

namespace tessera::kernels::grid {

// The allocator starts every pool / buffer on a 32-byte boundary.
inline constexpr int64_t kL1Align = 32;
inline int64_t pool(int64_t bytes) { return (bytes + kL1Align - 1) / kL1Align * kL1Align; }

inline int64_t ceil_div(int64_t a, int64_t c) { return (a + c - 1) / c; }
inline int64_t opt(const TileOptions& t, const char* key, int64_t fallback) {
  auto it = t.find(key);
  return it == t.end() ? fallback : it->second;
}

inline npu::TileCoord shim(int c) { return {c, 0}; }
inline npu::TileCoord mem(const npu::DeviceSpec& s, int c) { return {c, s.shim_rows}; }
inline npu::TileCoord core(const npu::DeviceSpec& s, int c, int r) {
  return {c, s.shim_rows + s.mem_rows + r};
}

}  // namespace tessera::kernels::grid
