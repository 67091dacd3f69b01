#include "tessera/core/bf16.h"

#include <cmath>
#include <cstring>

#include "tessera/core/error.h"

namespace tessera {

uint16_t f32_to_f16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absu < 0x38800000u) {  // below smallest normal half: subnormal or zero
    float a = std::bit_cast<float>(absu);
    // nearbyint uses the current rounding mode (RNE by default).
    float q = std::nearbyint(a * 16777216.0f);  // a / 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(q));
  }
  uint32_t lsb = (absu >> 13) & 1u;
  absu += 0xfffu + lsb;
  uint32_t exp = (absu >> 23) - 112u;
  uint32_t man = (absu >> 13) & 0x3ffu;
  return static_cast<uint16_t>(sign | (exp << 10) | man);
}

void bf16_to_f32(std::span<const bf16> in, std::span<float> out) {
  TESSERA_CHECK(in.size() == out.size(), "bf16_to_f32 size {} vs {}", in.size(), out.size());
  const uint16_t* src = reinterpret_cast<const uint16_t*>(in.data());
  uint32_t* dst = reinterpret_cast<uint32_t*>(out.data());
  for (size_t i = 0; i < in.size(); ++i) dst[i] = static_cast<uint32_t>(src[i]) << 16;
}

void f32_to_bf16(std::span<const float> in, std::span<bf16> out) {
  TESSERA_CHECK(in.size() == out.size(), "f32_to_bf16 size {} vs {}", in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = f32_to_bf16(in[i]);
}

void round_bf16_inplace(std::span<float> v) {
  for (float& x : v) x = round_bf16(x);
}

void f16_to_f32(std::span<const uint16_t> in, std::span<float> out) {
  TESSERA_CHECK(in.size() == out.size(), "f16_to_f32 size {} vs {}", in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = f16_to_f32(in[i]);
}

}  // namespace tessera
