#pragma once
// Static checks of a Design against a DeviceSpec: nothing that violates the
// spec reaches the simulator or the timing model. One function per rule (see
// validator.cpp); the first violation is thrown as a DesignError that names the
// tile, the object and the limit.
//
// Routing model: the array has a full switch fabric; a route exists between any
// two tiles on the grid, and a FIFO needs at least one non-shim endpoint. Stream
// bandwidth, not routability, is what the timing model charges.
#include <vector>

#include "tessera/npu/allocator.h"
#include "tessera/npu/design.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/errors.h"
#include "tessera/npu/kernel_registry.h"

namespace tessera::npu {

// Returns each launch's layout_launch(): laying the launch out is one of the
// checks, and Simulator::prepare runs on it.
std::vector<LaunchLayout> validate(const Design& design, const DeviceSpec& spec,
                                   const KernelRegistry& registry = KernelRegistry::global());

// Only the checks of one launch (host buffers are looked up in `design`).
LaunchLayout validate_launch(const Design& design, const Launch& launch, const DeviceSpec& spec,
                             const KernelRegistry& registry = KernelRegistry::global());

}  // namespace tessera::npu
