#pragma once
// Helpers shared by the compiler tests.
#include <cstdint>
#include <string>

#include "tessera/model/config.h"

namespace tessera::compiler::testing_util {

// A preset cut to `layers` layers (every layer lowers the same way).
inline model::ModelConfig with_layers(const std::string& preset, int64_t layers) {
  model::ModelConfig c = model::preset(preset);
  c.num_layers = layers;
  return c;
}

}  // namespace tessera::compiler::testing_util
