#pragma once
// bfloat16 and IEEE half conversions. NPU numerics depend on these being exactly
// the hardware's: bf16 rounding is round-to-nearest-even on the fp32 bit
// pattern, NaN stays NaN (quiet), infinities and signed zeros are preserved.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tessera {

struct bf16 {
  uint16_t bits = 0;
};

inline float bf16_to_f32(bf16 v) {
  return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16);
}

// Without a branch (a select), so the kernels' loops over it vectorize.
inline bf16 f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t quiet = (u >> 16) | 0x0040u;  // NaN: keep sign, force quiet bit
  // RNE: add 0x7fff plus the lsb of the kept half; carries into the exponent
  // are correct (they round up to the next binade or to infinity).
  const uint32_t lsb = (u >> 16) & 1u;
  const uint32_t rounded = (u + 0x7fffu + lsb) >> 16;
  return bf16{static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded)};
}

// Round an fp32 value to the nearest bf16 value, returned as fp32.
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// IEEE half -> f32, exact, without a call or a branch on the common path
// (GEMV kernels convert a block scale per 32 weights): the 15 bits of
// exponent and mantissa shifted into an f32's place and scaled by 2^112 (the
// exponent bias difference) give every normal and subnormal half; Inf / NaN
// (exponent all ones) keep an all-ones exponent and the mantissa bits.
inline float f16_to_f32(uint16_t h) {
  const uint32_t em = h & 0x7fffu;
  float f = std::bit_cast<float>(em << 13) * 0x1p112f;
  if (em >= 0x7c00u) f = std::bit_cast<float>((em << 13) | 0x7f800000u);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | (static_cast<uint32_t>(h & 0x8000u) << 16));
}
uint16_t f32_to_f16(float f);  // round-to-nearest-even, overflow -> inf

// Bulk conversions (vectorizable loops; used on hot paths).
void bf16_to_f32(std::span<const bf16> in, std::span<float> out);
void f32_to_bf16(std::span<const float> in, std::span<bf16> out);
void round_bf16_inplace(std::span<float> v);
void f16_to_f32(std::span<const uint16_t> in, std::span<float> out);

// Unit roundoff of bf16 (8 significant bits): 2^-8.
inline constexpr float kBf16Eps = 1.0f / 256.0f;

}  // namespace tessera
