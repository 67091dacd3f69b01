// GGUF parsing and validation (format summary in gguf.h). Every read goes
// through Cursor, which refuses to step past the end; every count read from
// the file is checked against the bytes that remain before anything is sized
// from it, so a truncated or hostile file is a GgufError, never a huge
// allocation or an out-of-bounds read.
#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "mapped_file.h"
#include "tessera/model/gguf.h"

namespace tessera::model {

const char* gguf_value_type_name(GgufValueType t) {
  static constexpr const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32",
                                           "i32",  "f32",    "bool",  "string",
                                           "array", "u64",   "i64",   "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::u8: case GgufValueType::i8: case GgufValueType::u16:
    case GgufValueType::i16: case GgufValueType::u32: case GgufValueType::i32:
    case GgufValueType::u64: case GgufValueType::i64: return true;
    default: return false;
  }
}

Shape GgufTensorInfo::shape() const { return Shape(dims.rbegin(), dims.rend()); }

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// The smallest encoding of each value type, used to bound element counts.
static uint64_t min_encoded_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8: case GgufValueType::i8: case GgufValueType::boolean: return 1;
    case GgufValueType::u16: case GgufValueType::i16: return 2;
    case GgufValueType::u32: case GgufValueType::i32: case GgufValueType::f32: return 4;
    case GgufValueType::u64: case GgufValueType::i64: case GgufValueType::f64:
    case GgufValueType::string: return 8;
    case GgufValueType::array: return 12;
  }
  return 0;
}

class GgufParser {
 public:
  GgufParser(GgufFile& f) : f_(f), b_(f.bytes_) {}

  void run() {
    header();
    for (uint64_t k = 0; k < kv_count_; ++k) metadata_entry(k);
    apply_alignment();
    for (uint64_t t = 0; t < tensor_count_; ++t) f_.tensors_.push_back(tensor_info(t));
    data_section();
  }

 private:
  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> fs, Args&&... args) const {
    throw GgufError(f_.name_ + ": " + fmt::format(fs, std::forward<Args>(args)...));
  }

  void need(uint64_t n, std::string_view what) const {
    if (n > b_.size() - pos_)
      fail("truncated: {} needs {} bytes at offset {}, only {} remain", what, n, pos_,
           b_.size() - pos_);
  }
  template <class T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));  // unaligned-safe
    pos_ += sizeof(T);
    return v;
  }
  std::string string(std::string_view what) {
    auto n = read<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  // A count of items each at least `min_size` bytes must fit in what remains.
  void check_count(uint64_t count, uint64_t min_size, std::string_view what) const {
    if (min_size > 0 && count > (b_.size() - pos_) / min_size)
      fail("{} count {} cannot fit in the {} bytes that remain (>= {} bytes each)", what, count,
           b_.size() - pos_, min_size);
  }

  void header() {
    need(4, "magic");
    if (std::memcmp(b_.data(), "GGUF", 4) != 0)
      fail("bad magic (not a GGUF file): first bytes {:02x} {:02x} {:02x} {:02x}",
           std::to_integer<int>(b_[0]), std::to_integer<int>(b_[1]), std::to_integer<int>(b_[2]),
           std::to_integer<int>(b_[3]));
    pos_ = 4;
    f_.version_ = read<uint32_t>("version");
    // Version 1 used 32-bit counts; a byte-swapped number means a big-endian file.
    if (f_.version_ != 2 && f_.version_ != 3)
      fail("unsupported GGUF version {} (supported: 2, 3; big-endian files are not supported)",
           f_.version_);
    tensor_count_ = read<uint64_t>("tensor count");
    kv_count_ = read<uint64_t>("metadata count");
    check_count(kv_count_, 8 + 4 + 1, "metadata");
    // name length + n_dims + type + offset; checked again once metadata is read.
    check_count(tensor_count_, 8 + 4 + 4 + 8, "tensor");
  }

  GgufValue value(GgufValueType type, const std::string& key, int depth) {
    GgufValue v;
    v.type = type;
    const std::string what = "key '" + key + "'";
    switch (type) {
      case GgufValueType::u8: v.u = read<uint8_t>(what); break;
      case GgufValueType::i8: v.i = read<int8_t>(what); break;
      case GgufValueType::u16: v.u = read<uint16_t>(what); break;
      case GgufValueType::i16: v.i = read<int16_t>(what); break;
      case GgufValueType::u32: v.u = read<uint32_t>(what); break;
      case GgufValueType::i32: v.i = read<int32_t>(what); break;
      case GgufValueType::u64: v.u = read<uint64_t>(what); break;
      case GgufValueType::i64: v.i = read<int64_t>(what); break;
      case GgufValueType::f32: v.f = read<float>(what); break;
      case GgufValueType::f64: v.f = read<double>(what); break;
      case GgufValueType::boolean: {
        auto b = read<uint8_t>(what);
        if (b > 1) fail("key '{}': bool value {} is neither 0 nor 1", key, b);
        v.u = b;
        break;
      }
      case GgufValueType::string: v.s = string(what); break;
      case GgufValueType::array: array(v, key, depth); break;
      default: fail("key '{}': unknown value type {}", key, static_cast<uint32_t>(type));
    }
    return v;
  }

  void array(GgufValue& v, const std::string& key, int depth) {
    if (depth >= kGgufMaxArrayDepth)
      fail("key '{}': arrays nested deeper than {}", key, kGgufMaxArrayDepth);
    auto elem = read<uint32_t>("key '" + key + "'");
    if (elem > static_cast<uint32_t>(GgufValueType::f64))
      fail("key '{}': unknown array element type {}", key, elem);
    v.elem_type = static_cast<GgufValueType>(elem);
    auto n = read<uint64_t>("key '" + key + "'");
    check_count(n, min_encoded_size(v.elem_type), "key '" + key + "': array element");
    v.items.reserve(n);
    for (uint64_t i = 0; i < n; ++i) v.items.push_back(value(v.elem_type, key, depth + 1));
  }

  void metadata_entry(uint64_t k) {
    std::string key = string(fmt::format("metadata key {}", k));
    if (!keys_.insert(key).second) fail("duplicate metadata key '{}'", key);
    auto type = read<uint32_t>("key '" + key + "'");
    if (type > static_cast<uint32_t>(GgufValueType::f64))
      fail("key '{}': unknown value type {}", key, type);
    f_.metadata_.emplace_back(key, value(static_cast<GgufValueType>(type), key, 0));
  }

  void apply_alignment() {
    const GgufValue* a = f_.find("general.alignment");
    if (!a) return;
    if (a->type != GgufValueType::u32)
      fail("key 'general.alignment' must be u32, got {}", gguf_value_type_name(a->type));
    if (a->u == 0 || (a->u & (a->u - 1)) != 0)
      fail("key 'general.alignment' must be a power of two, got {}", a->u);
    f_.alignment_ = a->u;
  }

  GgufTensorInfo tensor_info(uint64_t index) {
    GgufTensorInfo t;
    t.name = string(fmt::format("tensor info {}", index));
    const std::string what = "tensor '" + t.name + "'";
    if (!tensor_names_.insert(t.name).second) fail("duplicate {}", what);
    auto n_dims = read<uint32_t>(what);
    if (n_dims == 0 || n_dims > kGgufMaxDims)
      fail("{}: {} dimensions (must be 1..{})", what, n_dims, kGgufMaxDims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      auto dim = read<uint64_t>(what);
      constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      if (dim == 0 || dim > kMax || numel > kMax / dim)
        fail("{}: dimension {} = {} is zero or makes the element count overflow", what, d, dim);
      numel *= dim;
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    t.type = read<uint32_t>(what);
    const GgmlTypeInfo* info = ggml_type_info(t.type);
    if (!info) fail("{}: unknown ggml type {}", what, t.type);
    if (t.dims[0] % info->block_size != 0)
      fail("{}: row length {} is not a multiple of the {} block size {}", what, t.dims[0],
           info->name, info->block_size);
    const uint64_t blocks = numel / static_cast<uint64_t>(info->block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(info->type_size))
      fail("{}: byte size overflows", what);
    t.nbytes = blocks * static_cast<uint64_t>(info->type_size);
    t.offset = read<uint64_t>(what);
    if (t.offset % f_.alignment_ != 0)
      fail("{}: offset {} is not a multiple of the alignment {}", what, t.offset, f_.alignment_);
    return t;
  }

  void data_section() {
    const uint64_t a = f_.alignment_;
    const uint64_t start = (pos_ + a - 1) / a * a;
    if (start > b_.size() && !f_.tensors_.empty())
      fail("truncated: the data section would start at {} but the file is {} bytes", start,
           b_.size());
    f_.data_offset_ = std::min<uint64_t>(start, b_.size());
    const uint64_t data_size = b_.size() - f_.data_offset_;
    std::vector<const GgufTensorInfo*> by_offset;
    for (const auto& t : f_.tensors_) {
      if (t.offset > data_size || t.nbytes > data_size - t.offset)
        fail("tensor '{}': bytes [{}, {}) lie outside the {}-byte data section", t.name, t.offset,
             t.offset + t.nbytes, data_size);
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](auto* x, auto* y) { return x->offset < y->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const auto* p = by_offset[i - 1];
      if (p->offset + p->nbytes > by_offset[i]->offset)
        fail("tensor '{}' (bytes [{}, {})) overlaps tensor '{}' (from byte {})", p->name,
             p->offset, p->offset + p->nbytes, by_offset[i]->name, by_offset[i]->offset);
    }
  }

  GgufFile& f_;
  std::span<const std::byte> b_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  std::unordered_set<std::string> keys_, tensor_names_;
};

GgufFile GgufFile::parse(std::shared_ptr<const void> owner, std::span<const std::byte> bytes,
                         const std::string& name) {
  GgufFile f;
  f.name_ = name;
  f.owner_ = std::move(owner);
  f.bytes_ = bytes;
  GgufParser(f).run();
  return f;
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto map = std::make_shared<const MappedFile>(path);
  std::span<const std::byte> bytes(map->data(), map->size());
  return parse(map, bytes, path.string());
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view n) const {
  for (const auto& t : tensors_)
    if (t.name == n) return &t;
  return nullptr;
}

const GgufValue& GgufFile::get(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) throw_error<GgufError>("{}: required key '{}' is missing", name_, key);
  return *v;
}

std::optional<int64_t> GgufFile::get_int_opt(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer())
    throw_error<GgufError>("{}: key '{}' must be an integer, got {}", name_, key,
                           gguf_value_type_name(v->type));
  if (v->type == GgufValueType::u64 &&
      v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw_error<GgufError>("{}: key '{}' = {} does not fit int64", name_, key, v->u);
  switch (v->type) {
    case GgufValueType::i8: case GgufValueType::i16: case GgufValueType::i32:
    case GgufValueType::i64: return v->i;
    default: return static_cast<int64_t>(v->u);
  }
}

int64_t GgufFile::get_int(std::string_view key) const {
  get(key);
  return *get_int_opt(key);
}

std::optional<double> GgufFile::get_float_opt(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_float())
    throw_error<GgufError>("{}: key '{}' must be a float, got {}", name_, key,
                           gguf_value_type_name(v->type));
  // Converters store config floats (1e-5, 1e4) as f32; the shortest decimal
  // that round-trips the f32 is the value the config file held.
  if (v->type == GgufValueType::f32)
    return std::stod(fmt::format("{}", static_cast<float>(v->f)));
  return v->f;
}

double GgufFile::get_float(std::string_view key) const {
  get(key);
  return *get_float_opt(key);
}

std::optional<std::string> GgufFile::get_string_opt(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::string)
    throw_error<GgufError>("{}: key '{}' must be a string, got {}", name_, key,
                           gguf_value_type_name(v->type));
  return v->s;
}

std::string GgufFile::get_string(std::string_view key) const {
  get(key);
  return *get_string_opt(key);
}

std::optional<bool> GgufFile::get_bool_opt(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::boolean)
    throw_error<GgufError>("{}: key '{}' must be a bool, got {}", name_, key,
                           gguf_value_type_name(v->type));
  return v->u != 0;
}

const std::vector<GgufValue>& GgufFile::get_array(std::string_view key, GgufValueType elem) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::array || v.elem_type != elem)
    throw_error<GgufError>("{}: key '{}' must be an array of {}, got {}{}", name_, key,
                           gguf_value_type_name(elem), gguf_value_type_name(v.type),
                           v.type == GgufValueType::array
                               ? fmt::format(" of {}", gguf_value_type_name(v.elem_type))
                               : "");
  return v.items;
}

std::span<const std::byte> GgufFile::tensor_bytes(const GgufTensorInfo& t) const {
  return bytes_.subspan(data_offset_ + t.offset, t.nbytes);
}

Tensor GgufFile::tensor_view(const GgufTensorInfo& t) const {
  const std::optional<DType> d = ggml_block_dtype(t.type);
  if (!d) {
    const GgmlTypeInfo* info = ggml_type_info(t.type);
    throw_error<UnsupportedError>("{}: tensor '{}' of type {} is not a block format kept as it is "
                                  "(Q4_0, Q4_1, Q8_0)", name_, t.name, info ? info->name : "?");
  }
  return Tensor::view(*d, t.shape(), tensor_bytes(t).data(), owner_);
}

Tensor GgufFile::tensor_f32(const GgufTensorInfo& t) const {
  Tensor out(DType::f32, t.shape());
  ggml_dequantize(t.type, tensor_bytes(t), out.as_mut<float>(), name_ + ": tensor '" + t.name + "'");
  return out;
}

}  // namespace tessera::model
