#include "tessera/model/model_dir.h"

#include "tessera/core/error.h"
#include "tessera/model/gguf_model.h"
#include "tessera/model/safetensors.h"

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
  return m;
}

ModelDir load_model(const std::filesystem::path& dir_or_gguf) {
  if (!is_gguf_file(dir_or_gguf)) return load_model_dir(dir_or_gguf);
  const GgufFile f = GgufFile::open(dir_or_gguf);
  ModelDir m;
  m.path = dir_or_gguf;
  m.config = gguf_config(f);
  m.weights = gguf_weights(f, m.config);
  return m;
}

Tokenizer load_tokenizer(const std::filesystem::path& dir_or_file) {
  if (is_gguf_file(dir_or_file)) return gguf_tokenizer(GgufFile::open(dir_or_file));
  return Tokenizer::from_file(dir_or_file);
}

}  // namespace tessera::model
