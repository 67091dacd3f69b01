// The block formats a Tensor keeps as a GGUF file holds them: decoded exactly
// as gguf-py's quants.py forms each value (the f32 operations written out
// here, one rounding each), whole blocks only.
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/core/quant_blocks.h"
#include "tessera/core/tensor.h"

namespace tessera {
namespace {

// volatile: the product rounded to f32 before the add, as numpy forms it.
float mul_add(float d, float q, float m) {
  volatile float p = d * q;
  return p + m;
}

void put_f16(std::byte* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// `blocks` blocks of `d` with scales from a fixed seed and random integers.
std::vector<std::byte> random_blocks(DType d, int64_t blocks, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.001f, 0.2f), min(-1.5f, 0.5f);
  const size_t bytes = dtype_block_bytes(d);
  std::vector<std::byte> out(bytes * static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) {
    std::byte* p = out.data() + static_cast<size_t>(b) * bytes;
    for (size_t i = 2; i < bytes; ++i) p[i] = static_cast<std::byte>(rng() & 0xFF);
    put_f16(p, scale(rng));
    if (d == DType::q4_1) put_f16(p + 2, min(rng));
  }
  return out;
}

// gguf-py's formulas, one block: q8_0 q * d; q4_0 d * (q - 8); q4_1 d * q + m;
// element i < 16 the low nibble of byte i, 16 + i its high nibble.
std::vector<float> reference(DType d, const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  const float scale = f16_to_f32(h);
  std::vector<float> v(kQuantBlock);
  auto byte = [&](size_t i) { return std::to_integer<int>(p[i]); };
  if (d == DType::q8_0) {
    for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(static_cast<int8_t>(byte(2 + i))) * scale;
    return v;
  }
  const size_t q0 = d == DType::q4_1 ? 4 : 2;
  uint16_t mh = 0;
  if (d == DType::q4_1) std::memcpy(&mh, p + 2, 2);
  for (int i = 0; i < 16; ++i)
    for (int hi = 0; hi < 2; ++hi) {
      const int q = hi ? byte(q0 + i) >> 4 : byte(q0 + i) & 0x0F;
      v[i + 16 * hi] = d == DType::q4_1 ? mul_add(scale, static_cast<float>(q), f16_to_f32(mh))
                                        : scale * static_cast<float>(q - 8);
    }
  return v;
}

TEST(QuantBlocks, DecodeAsGgufPyFormsEachValue) {
  for (const DType d : {DType::q4_0, DType::q4_1, DType::q8_0}) {
    const int64_t blocks = 37;
    const auto src = random_blocks(d, blocks, 5);
    std::vector<float> got(static_cast<size_t>(blocks * kQuantBlock)), portable(got.size());
    dequantize_blocks(d, src.data(), blocks, got.data());
    detail::dequantize_blocks_portable(d, src.data(), blocks, portable.data());
    EXPECT_EQ(got, portable) << dtype_name(d);
    for (int64_t b = 0; b < blocks; ++b) {
      const auto want = reference(d, src.data() + static_cast<size_t>(b) * dtype_block_bytes(d));
      for (int i = 0; i < kQuantBlock; ++i)
        ASSERT_EQ(got[static_cast<size_t>(b * kQuantBlock + i)], want[static_cast<size_t>(i)])
            << dtype_name(d) << " block " << b << " element " << i;
    }
  }
}

// Why a fused multiply-add cannot move a bit here: d is an f16 (11
// significant bits) and q at most 8 bits, so d * q is exact in f32 and
// d * q + m rounds once either way. Checked over every Q4_1 nibble for a
// spread of f16 scales, so a format with wider integers would fail it.
TEST(QuantBlocks, ScaledIntegersAreExactInF32) {
  for (uint16_t h = 0x0400; h < 0x7c00; h += 0x0137) {  // normal f16 scales
    const float d = f16_to_f32(h);
    for (int q = -128; q < 256; ++q) {
      const double exact = static_cast<double>(d) * q;
      EXPECT_EQ(static_cast<double>(d * static_cast<float>(q)), exact) << d << " * " << q;
    }
  }
}

TEST(QuantBlocks, TensorsHoldWholeBlocksAndDecodeToF32) {
  const auto src = random_blocks(DType::q4_1, 6, 9);
  const Tensor t = Tensor::view(DType::q4_1, {3, 64}, src.data(), nullptr);
  EXPECT_EQ(t.nbytes(), 6u * 20u);
  std::vector<float> want(6 * 32);
  dequantize_blocks(DType::q4_1, src.data(), 6, want.data());
  EXPECT_EQ(t.to_f32_vector(), want);
  const Tensor f = t.to(DType::f32);
  EXPECT_EQ(std::vector<float>(f.as<float>().begin(), f.as<float>().end()), want);
  EXPECT_EQ(dtype_name(DType::q8_0), "Q8_0");
  EXPECT_THROW(Tensor(DType::q8_0, {4, 48}), InputError);  // 48 is not whole blocks
  EXPECT_THROW(Tensor::view(DType::q4_0, {40}, src.data(), nullptr), InputError);
  EXPECT_THROW(t.to(DType::q8_0), UnsupportedError);
  EXPECT_THROW(dtype_size(DType::q4_1), InternalError);
  EXPECT_THROW(dtype_from_name("Q4_1"), InputError);  // not a safetensors dtype
}

}  // namespace
}  // namespace tessera
