#include "tessera/model/model_dir.h"

#include "tessera/core/error.h"
#include "tessera/model/safetensors.h"
#include "tessera/model/tokenizer.h"

namespace tessera::model {

ModelDir load_model_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw_error<FileError>("{}: not a model directory (does not exist or is not a directory)",
                           dir.string());
  auto config_path = dir / "config.json";
  if (!std::filesystem::exists(config_path, ec))
    throw_error<FileError>("{}: missing config.json", dir.string());
  ModelDir m;
  m.path = dir;
  m.config = load_config(config_path);
  m.weights = load_safetensors_dir(dir);
  m.weights.check_against(m.config);
  m.weights.check_finite(dir.string());
  return m;
}

Tokenizer load_tokenizer(const std::filesystem::path& file, const ModelConfig& c) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw_error<FileError>("{}: no tokenizer (the file does not exist)", file.string());
  Tokenizer tok = Tokenizer::from_file(file);
  if (tok.vocab_size() > c.vocab_size) {
    const auto id = static_cast<int32_t>(tok.vocab_size() - 1);
    throw_error<TokenizerError>("{}: token id {} ('{}') is outside the model's vocabulary [0, {}) of {}: the "
                                "tokenizer does not belong to this model", file.string(), id,
                                tok.id_to_token(id), c.vocab_size, c.name);
  }
  return tok;
}

}  // namespace tessera::model
