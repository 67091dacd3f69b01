#include "tessera/model/model_dir.h"

#include "tessera/core/error.h"
#include "tessera/model/gguf_model.h"
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

ModelDir load_model(const std::filesystem::path& dir_or_gguf) {
  if (!is_gguf_file(dir_or_gguf)) return load_model_dir(dir_or_gguf);
  const GgufFile f = GgufFile::open(dir_or_gguf);
  ModelDir m;
  m.path = dir_or_gguf;
  m.config = gguf_config(f);
  m.weights = gguf_weights(f, m.config);
  m.weights.check_finite(dir_or_gguf.string());
  return m;
}

Tokenizer load_tokenizer(const std::filesystem::path& dir_or_file) {
  if (is_gguf_file(dir_or_file)) return gguf_tokenizer(GgufFile::open(dir_or_file));
  return Tokenizer::from_file(dir_or_file);
}

Tokenizer load_tokenizer(const std::filesystem::path& dir_or_file, const ModelConfig& c) {
  std::error_code ec;
  if (!std::filesystem::exists(dir_or_file, ec))
    throw_error<FileError>("{}: no tokenizer (the file does not exist)", dir_or_file.string());
  Tokenizer tok = load_tokenizer(dir_or_file);
  if (tok.vocab_size() > c.vocab_size) {
    const auto id = static_cast<int32_t>(tok.vocab_size() - 1);
    throw_error<TokenizerError>("{}: token id {} ('{}') is outside the model's vocabulary [0, {}) of {}: the "
                                "tokenizer does not belong to this model", dir_or_file.string(), id,
                                tok.id_to_token(id), c.vocab_size, c.name);
  }
  return tok;
}

}  // namespace tessera::model
