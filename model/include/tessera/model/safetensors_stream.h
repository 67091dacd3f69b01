#pragma once
// Streaming safetensors writer (the format: safetensors.h), for files whose
// tensors exist one at a time: a deployment's packed weights.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/model/safetensors.h"

namespace tessera::model {

// Writes a safetensors file tensor by tensor when each tensor's bytes exist
// only one at a time (packed weights of a multi-GB model): data goes straight
// to the file after `header_reserve` bytes kept at its front, and finish()
// writes the header there, padded with spaces (JSON whitespace) to the
// reserve. To a temporary name, renamed by finish(); removed when destroyed
// unfinished. FileError for I/O, SafetensorsError for a duplicate name or a
// header that outgrew the reserve (naming both sizes).
class SafetensorsStreamWriter {
 public:
  SafetensorsStreamWriter(std::filesystem::path out, uint64_t header_reserve);
  ~SafetensorsStreamWriter();
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;
  // `data` holds numel(shape) * dtype_size(dtype) bytes.
  void add(const std::string& name, DType dtype, const Shape& shape, std::span<const std::byte> data);
  void finish(const std::map<std::string, std::string>& metadata = {});

 private:
  std::filesystem::path out_, tmp_;
  uint64_t reserve_ = 0, offset_ = 0;
  std::vector<SafetensorsWriteEntry> entries_;
  struct Closer {
    void operator()(std::FILE* f) const;
  };
  std::unique_ptr<std::FILE, Closer> file_;
};

}  // namespace tessera::model
