#pragma once
// GGUF (llama.cpp's single-file model format) reader, versions 2 and 3.
// Layout, all little-endian: "GGUF", u32 version, u64 tensor count, u64
// metadata count; metadata as (string key, u32 value type, value); tensor
// infos as (string name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64
// offset); padding to general.alignment (default 32); the data section.
// Strings are u64 length + bytes; arrays are u32 element type + u64 count +
// elements. The file is memory-mapped and validated completely before any
// tensor is handed out; every error is a GgufError naming the file and the
// key or tensor involved. No count read from the file sizes an allocation
// before it has been checked against the bytes that remain.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/core/tensor.h"

namespace tessera::model {

struct GgufError : InputError {  // malformed GGUF header, metadata or tensor table
  using InputError::InputError;
};

inline constexpr uint32_t kGgufDefaultAlignment = 32;
// Arrays may nest; real files use one level. The cap keeps a hostile file from
// recursing the parser off its stack.
inline constexpr int kGgufMaxArrayDepth = 8;
inline constexpr uint32_t kGgufMaxDims = 4;  // GGML_MAX_DIMS

enum class GgufValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

// One metadata value. Exactly one payload field is meaningful, chosen by type:
// unsigned integers and bool in u, signed integers in i, floats in f.
struct GgufValue {
  GgufValueType type = GgufValueType::u8;
  GgufValueType elem_type = GgufValueType::u8;  // arrays only
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<GgufValue> items;  // arrays only

  bool is_integer() const;
  bool is_float() const { return type == GgufValueType::f32 || type == GgufValueType::f64; }
};

// ggml tensor types: block size (elements) and bytes per block, for every id
// gguf-py knows, so sizes are checked even for types tessera cannot dequantize.
struct GgmlTypeInfo {
  uint32_t id;
  const char* name;
  int64_t block_size;
  int64_t type_size;
  bool dequantizable;  // F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K
};
const GgmlTypeInfo* ggml_type_info(uint32_t id);  // nullptr for an unknown id
const std::vector<GgmlTypeInfo>& ggml_types();

// Dequantizes n = dst.size() elements of type `type` from src (which must hold
// exactly n / block_size blocks) into f32, bit-exact with gguf-py's
// dequantize(). `what` names the tensor in errors (UnsupportedError for a type
// without a dequantizer, GgufError for a size mismatch).
// The Tensor block dtype (Q4_0, Q4_1, Q8_0) a ggml type is kept in as it is
// in the file, or nullopt when tensors of that type are decoded to F32.
std::optional<DType> ggml_block_dtype(uint32_t type);

void ggml_dequantize(uint32_t type, std::span<const std::byte> src, std::span<float> dst,
                     const std::string& what);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the contiguous (row) length
  uint32_t type = 0;
  uint64_t offset = 0;  // inside the data section
  uint64_t nbytes = 0;
  Shape shape() const;  // row-major (reversed dims), as safetensors/HF would store it
  int64_t numel() const;
};

class MappedFile;

class GgufFile {
 public:
  static GgufFile open(const std::filesystem::path& path);
  // Parses bytes held by `owner` (tests build files in memory).
  static GgufFile parse(std::shared_ptr<const void> owner, std::span<const std::byte> bytes,
                        const std::string& name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // file order

  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Typed access: GgufError naming the file and key when absent or mistyped.
  const GgufValue& get(std::string_view key) const;
  int64_t get_int(std::string_view key) const;  // any integer type that fits int64
  std::optional<int64_t> get_int_opt(std::string_view key) const;
  double get_float(std::string_view key) const;  // f32 (shortest decimal) or f64
  std::optional<double> get_float_opt(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::optional<std::string> get_string_opt(std::string_view key) const;
  std::optional<bool> get_bool_opt(std::string_view key) const;
  // An array whose elements have type `elem` (GgufError otherwise).
  const std::vector<GgufValue>& get_array(std::string_view key, GgufValueType elem) const;

  std::span<const std::byte> tensor_bytes(const GgufTensorInfo& t) const;
  // Dequantized to F32 in row-major shape().
  Tensor tensor_f32(const GgufTensorInfo& t) const;
  // A read-only view of a block-format tensor's bytes in the mapped file
  // (ggml_block_dtype), shape(): nothing decoded or copied; the view keeps the
  // mapping alive. UnsupportedError for any other type.
  Tensor tensor_view(const GgufTensorInfo& t) const;

 private:
  std::string name_;
  std::shared_ptr<const void> owner_;
  std::span<const std::byte> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  friend class GgufParser;
};

}  // namespace tessera::model
