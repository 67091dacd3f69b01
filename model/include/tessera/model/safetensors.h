#pragma once
// safetensors (https://github.com/huggingface/safetensors) reader and writer.
// File layout: u64 little-endian header length N, N bytes of JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}},
// then the data section. The reader maps the file (POSIX mmap) and validates
// the header completely before any tensor is handed out; every error is a
// SafetensorsError naming the file and, where one is involved, the tensor.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/model/weights.h"

namespace tessera::model {

// Headers are JSON text; real ones are well under 1 MB. The cap keeps a
// corrupted length field from making us parse gigabytes.
inline constexpr uint64_t kSafetensorsHeaderCap = 100ull << 20;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0;  // byte offsets inside the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // 8 + header length: where the data section starts
};

// Validate a header: `json_text` is the header, `data_size` the size of the
// data section, `file` names the file in errors.
SafetensorsHeader parse_safetensors_header(std::string_view json_text, uint64_t data_size,
                                           const std::string& file);

class MappedFile;  // RAII read-only mmap (src/mapped_file.h)

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);
  const std::filesystem::path& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  // A read-only view into the mapping (a copy when the data is not aligned to
  // its element size, which the format permits but C++ loads do not).
  Tensor tensor(const SafetensorsEntry& e) const;
  // Adds every tensor; the views keep the mapping alive.
  void add_all_to(Weights& w) const;

 private:
  std::filesystem::path path_;
  std::shared_ptr<const MappedFile> map_;
  SafetensorsHeader header_;
};

// One .safetensors file.
Weights load_safetensors(const std::filesystem::path& file);
// A model directory: model.safetensors.index.json (sharded; every weight_map
// entry must be in its shard and every shard tensor in the weight_map) or
// model.safetensors. FileError when neither exists.
Weights load_safetensors_dir(const std::filesystem::path& dir);

struct SafetensorsWriteEntry {
  std::string name;
  DType dtype = DType::bf16;
  Shape shape;
};
// Produces bytes [byte_offset, byte_offset + out.size()) of entry `index`; the
// writer calls it chunk by chunk so multi-GB files never sit in memory.
using SafetensorsFill =
    std::function<void(size_t index, uint64_t byte_offset, std::span<std::byte> out)>;

// Writes entries in the given order, header padded with spaces to a multiple of
// 8 bytes (as the reference implementation does, so data stays aligned).
// Written to a temporary name and renamed, so a crash never leaves a file that
// looks complete.
void write_safetensors(const std::filesystem::path& out,
                       const std::vector<SafetensorsWriteEntry>& entries,
                       const SafetensorsFill& fill,
                       const std::map<std::string, std::string>& metadata = {});
void write_safetensors(const std::filesystem::path& out,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace tessera::model
