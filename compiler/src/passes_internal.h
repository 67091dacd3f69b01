#pragma once
// Shared between the passes and the plan parser.
#include "tessera/compiler/plan.h"

namespace tessera::compiler::detail {

// A launch for graph node `node` as the place pass sets it up: host (cost
// from the host model, plain layouts) or npu (the layout policy's tiles).
Launch place_launch(const Plan& plan, size_t node, bool host, const npu::DeviceSpec& spec);
// Builds one npu launch from its shape and tiles (design, timing, layout keys).
// weight_keys = false leaves l.weight_layouts empty: a trial build whose
// weight layouts nobody compares skips probing them (a probe of an LM head
// packs hundreds of MB).
void build_launch(const Plan& plan, Launch& l, DesignCache& cache, bool weight_keys = true);
// The DesignCache's key of a design: its shape and tile options.
std::string cache_key(const kernels::OpShape& shape, const kernels::TileOptions& tiles);
// Builds every npu launch of the plan.
std::string build_launches(Plan& plan, DesignCache& cache);

// The name of a value whole: a last-row view (ValueRef::last_row) names the
// value it is cut from.
inline std::string whole(const ValueRef& r) {
  std::string s = r.str();  // without a copy of the ref: the plan checks call this per input
  if (r.last_row) s.resize(s.size() - 4);  // "[-1]"
  return s;
}

}  // namespace tessera::compiler::detail
