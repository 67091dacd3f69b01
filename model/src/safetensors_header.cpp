// Full validation of a safetensors header, following the checks of the
// reference implementation (safetensors/src/tensor.rs): typed entries, offsets
// inside the data section, shape x dtype size == byte length, and entries
// that tile the data section exactly (no overlap, no gap, no trailing bytes).
#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/safetensors.h"

namespace tessera::model {
namespace {

using nlohmann::json;

// Every dtype the format defines, so that a valid-but-unsupported dtype gets a
// different message from a misspelled one.
bool known_dtype(const std::string& s) {
  static const char* const kAll[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "I16",
                                     "U16",  "F16", "BF16", "I32",    "U32",     "F32",
                                     "F64",  "I64", "U64"};
  return std::any_of(std::begin(kAll), std::end(kAll), [&](const char* d) { return s == d; });
}

uint64_t offset_value(const json& v, const std::string& file, const std::string& name) {
  if (!v.is_number_unsigned())
    throw_error<SafetensorsError>("{}: tensor '{}': data_offsets must be non-negative integers, "
                                  "got {}", file, name, v.dump());
  return v.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const json& v, const std::string& file) {
  if (!v.is_object())
    throw_error<SafetensorsError>("{}: tensor '{}': entry must be an object", file, name);
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key))
      throw_error<SafetensorsError>("{}: tensor '{}': entry has no '{}'", file, name, key);
  SafetensorsEntry e;
  e.name = name;
  const json& dt = v["dtype"];
  std::string dts = dt.is_string() ? dt.get<std::string>() : dt.dump();
  if (!dt.is_string() || !known_dtype(dts))
    throw_error<SafetensorsError>("{}: tensor '{}': unknown dtype {}", file, name, dt.dump());
  if (dts != "F32" && dts != "BF16" && dts != "F16")
    throw_error<SafetensorsError>("{}: tensor '{}': dtype {} is not supported (supported: BF16, "
                                  "F16, F32)", file, name, dts);
  e.dtype = dtype_from_name(dts);
  const json& sh = v["shape"];
  if (!sh.is_array())
    throw_error<SafetensorsError>("{}: tensor '{}': shape must be a list", file, name);
  uint64_t numel = 1;
  for (const auto& d : sh) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (1ull << 40))
      throw_error<SafetensorsError>("{}: tensor '{}': bad dimension {} in shape {}", file, name,
                                    d.dump(), sh.dump());
    uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && numel > (1ull << 62) / dim)
      throw_error<SafetensorsError>("{}: tensor '{}': shape {} overflows", file, name, sh.dump());
    numel *= dim;
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    throw_error<SafetensorsError>("{}: tensor '{}': data_offsets must be [begin, end], got {}",
                                  file, name, off.dump());
  e.begin = offset_value(off[0], file, name);
  e.end = offset_value(off[1], file, name);
  if (e.begin > e.end)
    throw_error<SafetensorsError>("{}: tensor '{}': data_offsets begin {} > end {}", file, name,
                                  e.begin, e.end);
  uint64_t want = numel * dtype_size(e.dtype);
  if (e.end - e.begin != want)
    throw_error<SafetensorsError>("{}: tensor '{}': shape {} x {} needs {} bytes but data_offsets "
                                  "span {}", file, name, sh.dump(), dts, want, e.end - e.begin);
  return e;
}

std::map<std::string, std::string> parse_metadata(const json& v, const std::string& file) {
  if (!v.is_object())
    throw_error<SafetensorsError>("{}: __metadata__ must be an object of strings", file);
  std::map<std::string, std::string> m;
  for (const auto& [k, s] : v.items()) {
    if (!s.is_string())
      throw_error<SafetensorsError>("{}: __metadata__ value for '{}' must be a string, got {}",
                                    file, k, s.dump());
    m[k] = s.get<std::string>();
  }
  return m;
}

// Sorted entries must tile [0, data_size) exactly.
void check_coverage(const std::vector<SafetensorsEntry>& es, uint64_t data_size,
                    const std::string& file) {
  uint64_t cursor = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const auto& e : es) {
    if (e.end > data_size)
      throw_error<SafetensorsError>("{}: tensor '{}': data_offsets [{}, {}] beyond the data "
                                    "section of {} bytes", file, e.name, e.begin, e.end,
                                    data_size);
    if (e.begin < cursor)
      throw_error<SafetensorsError>("{}: tensor '{}' [{}, {}] overlaps tensor '{}' [{}, {}]", file,
                                    e.name, e.begin, e.end, prev->name, prev->begin, prev->end);
    if (e.begin > cursor)
      throw_error<SafetensorsError>("{}: gap of {} bytes in the data section before tensor '{}' "
                                    "(offset {})", file, e.begin - cursor, e.name, e.begin);
    cursor = e.end;
    prev = &e;
  }
  if (cursor != data_size)
    throw_error<SafetensorsError>("{}: {} trailing bytes after the last tensor{}", file,
                                  data_size - cursor,
                                  prev ? fmt::format(" '{}'", prev->name) : std::string());
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::string_view json_text, uint64_t data_size,
                                           const std::string& file) {
  json j;
  try {
    j = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e309
    throw_error<SafetensorsError>("{}: header is not valid JSON: {}", file, e.what());
  }
  if (!j.is_object()) throw_error<SafetensorsError>("{}: header must be a JSON object", file);
  SafetensorsHeader h;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      h.metadata = parse_metadata(v, file);
      continue;
    }
    h.entries.push_back(parse_entry(name, v, file));
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  check_coverage(h.entries, data_size, file);
  return h;
}

}  // namespace tessera::model
