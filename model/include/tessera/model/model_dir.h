#pragma once
// A Hugging Face model directory: config.json + safetensors weights, checked
// against each other before anyone computes with them.
#include <filesystem>

#include "tessera/model/config.h"
#include "tessera/model/tokenizer.h"
#include "tessera/model/weights.h"

namespace tessera::model {

struct ModelDir {
  std::filesystem::path path;
  ModelConfig config;
  Weights weights;
};

// Loads config.json and all weights (single or sharded) and calls
// weights.check_against(config) and check_finite: a missing, unexpected or
// non-finite tensor is a TensorError naming it. With tied embeddings a stored lm_head.weight is
// accepted and ignored, as transformers does. FileError names a missing
// directory or file.
ModelDir load_model_dir(const std::filesystem::path& dir);

// A model given as either an HF directory or a .gguf file (recognised by its
// magic): what every `-m` option accepts. GGUF weights are dequantized to F32.
ModelDir load_model(const std::filesystem::path& dir_or_gguf);
// Its tokenizer: DIR/tokenizer.json, a tokenizer.json file itself, or a GGUF's
// tokenizer.ggml.* metadata.
Tokenizer load_tokenizer(const std::filesystem::path& dir_or_file);
// The same, checked against the model `c`: every id it can produce (vocab and
// added tokens) must index the embedding, i.e. be < c.vocab_size (a model may
// have more rows than its tokenizer has tokens, never fewer). FileError when
// there is no tokenizer, TokenizerError naming the largest id otherwise.
Tokenizer load_tokenizer(const std::filesystem::path& dir_or_file, const ModelConfig& c);

}  // namespace tessera::model
