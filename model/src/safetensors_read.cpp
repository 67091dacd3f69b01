// mmap-backed safetensors loading, single file and sharded.
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/safetensors.h"
#include "mapped_file.h"

namespace tessera::model {

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile f;
  f.path_ = path;
  f.map_ = std::make_shared<const MappedFile>(path);
  const std::string file = path.string();
  const size_t size = f.map_->size();
  if (size < 8)
    throw_error<SafetensorsError>("{}: file is {} bytes, too short for the 8-byte header length",
                                  file, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<uint64_t>(f.map_->data()[i]);
  if (n > kSafetensorsHeaderCap)
    throw_error<SafetensorsError>("{}: header length {} exceeds the {} byte cap", file, n,
                                  kSafetensorsHeaderCap);
  if (n > size - 8)
    throw_error<SafetensorsError>("{}: header length {} is larger than the file ({} bytes after "
                                  "the length field)", file, n, size - 8);
  std::string_view text(reinterpret_cast<const char*>(f.map_->data()) + 8, n);
  f.header_ = parse_safetensors_header(text, size - 8 - n, file);
  f.header_.data_offset = 8 + n;
  return f;
}

Tensor SafetensorsFile::tensor(const SafetensorsEntry& e) const {
  const std::byte* p = map_->data() + header_.data_offset + e.begin;
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(e.dtype) == 0)
    return Tensor::view(e.dtype, e.shape, p, map_);
  Tensor t(e.dtype, e.shape);
  std::memcpy(t.mutable_bytes(), p, t.nbytes());
  return t;
}

void SafetensorsFile::add_all_to(Weights& w) const {
  for (const auto& e : header_.entries) {
    if (w.contains(e.name))
      throw_error<SafetensorsError>("{}: tensor '{}' is also in another file", path_.string(),
                                    e.name);
    w.add(e.name, tensor(e));
  }
}

Weights load_safetensors(const std::filesystem::path& file) {
  Weights w;
  SafetensorsFile::open(file).add_all_to(w);
  return w;
}

namespace {

// weight_map of model.safetensors.index.json: tensor name -> shard file name.
std::map<std::string, std::string> read_weight_map(const std::filesystem::path& index) {
  std::ifstream in(index);
  if (!in) throw_error<FileError>("{}: cannot open", index.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e309
    throw_error<SafetensorsError>("{}: invalid JSON: {}", index.string(), e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw_error<SafetensorsError>("{}: no 'weight_map' object", index.string());
  std::map<std::string, std::string> m;
  for (const auto& [name, v] : j["weight_map"].items()) {
    if (!v.is_string())
      throw_error<SafetensorsError>("{}: weight_map entry for '{}' must be a file name",
                                    index.string(), name);
    auto shard = v.get<std::string>();
    // Shards live beside the index; anything else is a path escape.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      throw_error<SafetensorsError>("{}: tensor '{}' maps to invalid shard name '{}'",
                                    index.string(), name, shard);
    m[name] = shard;
  }
  return m;
}

Weights load_sharded(const std::filesystem::path& dir, const std::filesystem::path& index) {
  auto weight_map = read_weight_map(index);
  std::set<std::string> shards;
  for (const auto& [name, shard] : weight_map) shards.insert(shard);
  Weights w;
  for (const auto& shard : shards) {
    auto file = SafetensorsFile::open(dir / shard);
    for (const auto& e : file.header().entries) {
      auto it = weight_map.find(e.name);
      if (it == weight_map.end() || it->second != shard)
        throw_error<SafetensorsError>("{}: tensor '{}' is not mapped to this shard by {}",
                                      file.path().string(), e.name, index.filename().string());
    }
    file.add_all_to(w);
  }
  for (const auto& [name, shard] : weight_map)
    if (!w.contains(name))
      throw_error<SafetensorsError>("{}: index maps tensor '{}' to this shard but it has no such "
                                    "tensor", (dir / shard).string(), name);
  return w;
}

}  // namespace

Weights load_safetensors_dir(const std::filesystem::path& dir) {
  auto index = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(index)) return load_sharded(dir, index);
  auto single = dir / "model.safetensors";
  if (std::filesystem::exists(single)) return load_safetensors(single);
  throw_error<FileError>("{}: no model.safetensors or model.safetensors.index.json",
                         dir.string());
}

}  // namespace tessera::model
