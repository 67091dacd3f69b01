#pragma once
// A Hugging Face model directory: config.json + safetensors weights, checked
// against each other before anyone computes with them.
#include <filesystem>

#include "tessera/model/config.h"
#include "tessera/model/weights.h"

namespace tessera::model {

struct ModelDir {
  std::filesystem::path path;
  ModelConfig config;
  Weights weights;
};

// Loads config.json and all weights (single or sharded) and calls
// weights.check_against(config): a missing or unexpected tensor is a
// TensorError naming it. With tied embeddings a stored lm_head.weight is
// accepted and ignored, as transformers does. FileError names a missing
// directory or file.
ModelDir load_model_dir(const std::filesystem::path& dir);

}  // namespace tessera::model
