#pragma once
// Typed errors of the npu layer (DESIGN.md "Nothing silent"): each message names
// the tile, the object and the limit it broke.
#include "tessera/core/error.h"

namespace tessera::npu {

// A DeviceSpec field that is unknown, malformed or outside its published range
// (a bad input file, hence an InputError like ConfigError).
struct DeviceSpecError : InputError {
  using InputError::InputError;
};

// A Design that breaks a hardware limit or the IR's own rules (validator,
// allocator, kernel lookup, kernel parameters).
struct DesignError : LimitError {
  using LimitError::LimitError;
};

// A Design that passed validation but misbehaves when executed: a deadlock
// (a core or DMA waiting forever), a dropped transfer (objects left
// undelivered), a kernel call on an object that is not acquired.
struct SimulationError : DesignError {
  using DesignError::DesignError;
};

}  // namespace tessera::npu
