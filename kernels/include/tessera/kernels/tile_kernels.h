#pragma once
// The tile kernel library as the simulator and the timing model see it: every
// kernel of kernels/ registered by name in a npu::KernelRegistry, plus the L1
// footprint of a call for the design builders. Each kernel's header documents
// its arg order, layouts and params.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {

// Every tile kernel of this library, in a stable order.
const std::vector<TileKernel>& tile_kernels();

// Adds (or replaces) every tile kernel in `registry`.
void register_tile_kernels(npu::KernelRegistry& registry);

// L1 bytes the args of one call of `kernel` occupy for `params`; throws
// KernelArgError for an unknown kernel name.
int64_t tile_kernel_l1_bytes(const std::string& kernel, const npu::KernelParams& params);

}  // namespace tessera::kernels
