#pragma once
// Small helpers the two attention builders share: grid coordinates, tile
// options with defaults, and the allocator's pool alignment.
#include <cstdint>

#include "tessera/kernels/op_builder.h"

namespace tessera::kernels::attn {

// The allocator starts every pool / buffer on a 32-byte boundary.
inline constexpr int64_t kL1Align = 32;

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

}  // namespace tessera::kernels::attn
