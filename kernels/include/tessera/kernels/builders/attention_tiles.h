#pragma once
// What the attention builders share beyond grid.h: their host buffer names.
#include <string>

#include <fmt/format.h>

#include "tessera/kernels/builders/grid.h"

namespace tessera::kernels::attn {

using grid::ceil_div;
using grid::core;
using grid::kL1Align;
using grid::mem;
using grid::opt;
using grid::shim;

// Column c's query input and attention output.
inline std::string q_host(int c) { return fmt::format("q_c{}", c); }
inline std::string o_host(int c) { return fmt::format("o_c{}", c); }

}  // namespace tessera::kernels::attn
