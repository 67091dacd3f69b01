#include "tessera/model/model_dir.h"

#include "tessera/core/error.h"
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

}  // namespace tessera::model
