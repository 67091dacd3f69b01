#pragma once
// Text helpers shared by the plan dump, parser and pass stats.
#include <string>

namespace tessera::compiler::detail {

// 3 significant digits in the largest unit that keeps them without an
// exponent: "46.6us", "2.94ms", "1.2s".
std::string time_text(double seconds);

}  // namespace tessera::compiler::detail

#include "tessera/compiler/plan.h"

namespace tessera::compiler::detail {
std::string tiles_text(const kernels::TileOptions& t);
const char* buffer_kind_name(BufferKind k);
std::string ir_shape(const kernels::OpShape& s);  // "op K=1 M=2 | eps=1e-05"
}  // namespace tessera::compiler::detail
