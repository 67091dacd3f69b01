#pragma once
// What every design builder needs besides the npu IR helpers: the tile kernels
// registered where validate() and the simulator look them up, host buffers
// created at their declared size, and bf16 packing of logical FP32 values.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <span>
#include <string>

#include "tessera/core/bf16.h"
#include "tessera/npu/design.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/simulator.h"

namespace tessera::kernels {

// Registers the tile kernel library in npu::KernelRegistry::global() once
// (thread safe); builders call it before validate(), run_op before simulating.
void ensure_tile_kernels_registered();

// ensure_tile_kernels_registered() + npu::validate against the global registry.
void validate_design(const npu::Design& design, const npu::DeviceSpec& spec);

// The bytes of host buffer `name` of `design`, created zero-filled at its
// declared size when absent (throws InternalError for an undeclared name).
std::span<std::byte> host_bytes(const npu::Design& design, const std::string& name,
                                npu::HostMemory& host);
std::span<const std::byte> host_bytes(const npu::Design& design, const std::string& name,
                                      const npu::HostMemory& host);

inline bf16* host_bf16(const npu::Design& d, const std::string& name, npu::HostMemory& host) {
  return reinterpret_cast<bf16*>(host_bytes(d, name, host).data());
}
inline const bf16* host_bf16(const npu::Design& d, const std::string& name,
                             const npu::HostMemory& host) {
  return reinterpret_cast<const bf16*>(host_bytes(d, name, host).data());
}

// Throws UsageError naming the op and the key when `tiles` holds a key the
// builder does not know (a misspelt tile option must not be ignored silently).
void check_tile_keys(const std::string& op_key, const std::map<std::string, int64_t>& tiles,
                     std::initializer_list<const char*> known);

// Throws UsageError when a logical tensor handed to pack() has the wrong size.
void check_numel(const std::string& op_key, const std::string& tensor, size_t got, int64_t want);

}  // namespace tessera::kernels

namespace tessera::kernels {

// Grid coordinates of column c's shim, mem tile and compute row r.
inline npu::TileCoord shim_tile(int c) { return {c, 0}; }
inline npu::TileCoord mem_tile(const npu::DeviceSpec& s, int c) { return {c, s.shim_rows}; }
inline npu::TileCoord core_tile(const npu::DeviceSpec& s, int c, int r) {
  return {c, s.shim_rows + s.mem_rows + r};
}

// A shim DmaTask pattern over `elems` contiguous elements starting at
// `offset` of a host buffer of `buffer_elems`: no dims when it is the whole
// buffer, else at most spec.shim.bd_dims dims within the BD size / wrap /
// stride limits. Throws LimitError naming `what` when no factorisation fits.
npu::AccessPattern span_pattern(int64_t offset, int64_t elems, int64_t buffer_elems,
                                int64_t repeat, const npu::DeviceSpec& spec,
                                const std::string& what);

}  // namespace tessera::kernels
