// Fuzz target: a safetensors header (model/safetensors.h). Input: 8 bytes,
// little-endian, the size of the data section the header must tile, then the
// header's JSON text.
#include <cstring>

#include "fuzz_common.h"
#include "tessera/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t data_size = 0;
  std::memcpy(&data_size, data, 8);
  const std::string_view header = tessera::fuzz::as_text(data + 8, size - 8);
  return tessera::fuzz::run_one([&] {
    const auto h = tessera::model::parse_safetensors_header(header, data_size, "fuzz.safetensors");
    // What the reader trusts afterwards: every entry inside the data section.
    for (const auto& e : h.entries)
      if (e.end > data_size || e.begin > e.end) std::abort();
  });
}
