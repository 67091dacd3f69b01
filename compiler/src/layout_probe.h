#pragma once
// Layout probes (plan.h): weight and activation layout keys are hashes of the
// bytes a design's pack() writes (or, for an output, the bytes its unpack()
// reads) for a fixed probe tensor.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/kernels/op_builder.h"

namespace tessera::compiler::detail {

struct ProbeResult {
  uint32_t hash = 0;
  int64_t bytes = 0;                 // packed bytes (every buffer involved)
  std::vector<std::string> buffers;  // the host buffers involved, name order
  bool opaque = false;               // not a bf16 gather: never equal to another layout
};

// Weight probe: names, sizes and bytes of what pack(input) writes.
ProbeResult probe_weight(const kernels::BuiltOp& op, size_t input);
// Activation probes: sizes and bytes only (a shared buffer has two names).
ProbeResult probe_input(const kernels::BuiltOp& op, size_t input);
ProbeResult probe_output(const kernels::BuiltOp& op, size_t output);

std::string activation_key(const ProbeResult& p);  // "a:1a2b3c4d" (opaque: "a:opaque:...")

}  // namespace tessera::compiler::detail
