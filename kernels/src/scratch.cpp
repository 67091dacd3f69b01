#include "scratch.h"

#include <array>
#include <vector>

namespace tessera::kernels {

float* scratch_f32(ScratchSlot slot, int64_t count) {
  thread_local std::array<std::vector<float>, static_cast<size_t>(ScratchSlot::count_)> slots;
  auto& v = slots[static_cast<size_t>(slot)];
  if (v.size() < static_cast<size_t>(count)) v.resize(static_cast<size_t>(count));
  return v.data();
}

}  // namespace tessera::kernels
