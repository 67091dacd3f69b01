#pragma once
// Helpers shared by the compiler tests.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tessera/compiler/plan.h"
#include "tessera/model/config.h"
#include "tessera/npu/device_spec.h"

namespace tessera::compiler::testing_util {

// A preset cut to `layers` layers (every layer lowers the same way).
inline model::ModelConfig with_layers(const std::string& preset, int64_t layers) {
  model::ModelConfig c = model::preset(preset);
  c.num_layers = layers;
  return c;
}

// A preset with its vocabulary cut to 1024 tokens: the embedding-table and
// LM-head probes of a 150k vocabulary cost seconds, and no test using it is
// about the vocabulary size.
inline model::ModelConfig small_vocab(const std::string& preset, int64_t layers) {
  model::ModelConfig c = with_layers(preset, layers);
  c.vocab_size = 1024;
  c.bos_token_ids = {1};
  c.eos_token_ids = {2};
  return c;
}

// One cache for the whole test binary: builds are the slow part.
inline DesignCache& cache() {
  static DesignCache c(npu::DeviceSpec::preset("xdna2"));
  return c;
}

// Compares `text` with tests/data/compiler/<file>, or writes it when
// TESSERA_UPDATE_GOLDEN is set.
inline void check_golden(const std::string& text, const std::string& file) {
  const std::string path = std::string(TESSERA_SOURCE_DIR) + "/tests/data/compiler/" + file;
  if (std::getenv("TESSERA_UPDATE_GOLDEN")) {
    std::ofstream(path) << text;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden " << path << " (TESSERA_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str()) << "golden " << path << " differs";
}

}  // namespace tessera::compiler::testing_util
