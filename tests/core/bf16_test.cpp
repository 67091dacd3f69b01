#include <bit>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/core/tensor.h"

namespace tessera {
namespace {

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 is exactly half way between 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  // 1 + 3*2^-8 is half way between 1+2^-7 and 1+2^-6: even is 1+2^-6.
  EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  // Just above the tie rounds up.
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
            1.0f + std::ldexp(1.0f, -7));
}

// f16_to_f32 on every half against the value written out by fields: zero,
// subnormal man * 2^-24, normal (1 + man / 1024) * 2^(exp - 15), Inf / NaN
// with the mantissa kept; bit for bit, NaN payloads and signed zeros too.
TEST(Bf16, HalfToF32IsExactOnEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t want;
    if (exp == 31) {
      want = sign | 0x7f800000u | (man << 13);
    } else {
      const float mag = exp == 0 ? std::ldexp(static_cast<float>(man), -24)
                                 : std::ldexp(1.0f + static_cast<float>(man) / 1024.0f, static_cast<int>(exp) - 15);
      want = sign | std::bit_cast<uint32_t>(mag);
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(f16_to_f32(static_cast<uint16_t>(h))), want) << std::hex << h;
  }
}

TEST(Bf16, SpecialValues) {
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(round_bf16(INFINITY), INFINITY);
  EXPECT_EQ(round_bf16(-INFINITY), -INFINITY);
  EXPECT_TRUE(std::signbit(round_bf16(-0.0f)));
  // Largest finite float rounds up to infinity in bf16 (RNE carry).
  EXPECT_EQ(round_bf16(std::numeric_limits<float>::max()), INFINITY);
}

TEST(Bf16, RoundTripIsExact) {
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    bf16 v{static_cast<uint16_t>(b)};
    float f = bf16_to_f32(v);
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_bf16(f).bits, v.bits);
  }
}

TEST(F16, RoundTripAndSubnormals) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32_to_f16(70000.0f), 0x7c00);
}

TEST(Tensor, ConvertAndView) {
  std::vector<float> v = {1.0f, -2.5f, 3.140625f, 0.0f};
  Tensor t = Tensor::from_f32({2, 2}, v);
  Tensor b = t.to(DType::bf16);
  EXPECT_EQ(b.nbytes(), 8u);
  EXPECT_EQ(b.to_f32_vector(), v);  // all exactly representable
  Tensor view = Tensor::view(DType::bf16, {4}, b.bytes(), nullptr);
  EXPECT_THROW(view.mutable_bytes(), InternalError);
  EXPECT_THROW(dtype_from_name("I8"), InputError);
}

}  // namespace
}  // namespace tessera
