// Block decoding for the ggml formats a Tensor may hold as they are
// (core/quant_blocks.h). Compiled with -ffp-contract=off (core/CMakeLists.txt)
// so the code says what numpy computes in gguf-py (d * q is exact here, so a
// fused d * q + m would round the same; the flag keeps that from mattering
// to the next format added). Where the CPU has AVX2 a block decodes in a few
// instructions (quant_blocks_avx2.h, shared with the oracle's decode GEMV,
// which decodes every weight once per token); elsewhere in plain loops.
#include "tessera/core/quant_blocks.h"

#include <cstring>

#include "tessera/core/quant_blocks_avx2.h"

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/core/tensor.h"

namespace tessera {
namespace {

using quant::half_at;

// ---- portable: plain loops, one block each ----

// Q8_0: f16 d, 32 x int8; value q * d.
void q8_0_block(const std::byte* s, float* out) {
  const float d = half_at(s);
  int8_t q[32];
  std::memcpy(q, s + 2, sizeof q);
  for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(q[i]) * d;
}

// Q4_0: f16 d, 16 bytes; element i < 16 is the low nibble of byte i, element
// 16 + i its high nibble; value d * (q - 8).
void q4_0_block(const std::byte* s, float* out) {
  const float d = half_at(s);
  uint8_t b[16];
  std::memcpy(b, s + 2, sizeof b);
  for (int i = 0; i < 16; ++i) out[i] = d * static_cast<float>((b[i] & 0x0F) - 8);
  for (int i = 0; i < 16; ++i) out[i + 16] = d * static_cast<float>((b[i] >> 4) - 8);
}

// Q4_1: f16 d, f16 m, 16 bytes (nibble order as Q4_0); value d * q + m.
void q4_1_block(const std::byte* s, float* out) {
  const float d = half_at(s), m = half_at(s + 2);
  uint8_t b[16];
  std::memcpy(b, s + 4, sizeof b);
  for (int i = 0; i < 16; ++i) out[i] = d * static_cast<float>(b[i] & 0x0F) + m;
  for (int i = 0; i < 16; ++i) out[i + 16] = d * static_cast<float>(b[i] >> 4) + m;
}

void decode_portable(DType d, const std::byte* src, int64_t n, float* dst) {
  void (*block)(const std::byte*, float*) =
      d == DType::q8_0 ? q8_0_block : d == DType::q4_0 ? q4_0_block : q4_1_block;
  const size_t bytes = dtype_block_bytes(d);
  for (int64_t b = 0; b < n; ++b) block(src + static_cast<size_t>(b) * bytes, dst + b * kQuantBlock);
}

// ---- AVX2: the same values, 8 lanes per instruction (quant_blocks_avx2.h;
// GCC 12 turns the loops above, and u8 -> float vector conversions, into
// scalar extracts) ----

[[gnu::target("avx2")]] void decode_avx2(DType d, const std::byte* src, int64_t n, float* dst) {
  const size_t bytes = dtype_block_bytes(d);
  for (int64_t b = 0; b < n; ++b, dst += kQuantBlock) {
    __m256 v[4];
    quant::decode_block_avx2(d, src + static_cast<size_t>(b) * bytes, v);
    for (int g = 0; g < 4; ++g) _mm256_storeu_ps(dst + 8 * g, v[g]);
  }
}

void decode(DType d, const std::byte* src, int64_t n, float* dst) {
  if (!dtype_is_block(d))
    throw_error<InternalError>("dequantize_blocks: {} is not a block format", dtype_name(d));
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) decode_avx2(d, src, n, dst);
  else decode_portable(d, src, n, dst);
}

}  // namespace

int64_t dtype_block_elems(DType d) { return dtype_is_block(d) ? kQuantBlock : 1; }

size_t dtype_block_bytes(DType d) {
  switch (d) {
    case DType::q8_0: return 34;
    case DType::q4_0: return 18;
    case DType::q4_1: return 20;
    default: return dtype_size(d);
  }
}

bool dtype_is_block(DType d) { return d == DType::q8_0 || d == DType::q4_0 || d == DType::q4_1; }

void dequantize_blocks(DType d, const std::byte* src, int64_t blocks, float* dst) {
  TESSERA_CHECK(blocks >= 0, "dequantize_blocks: {} blocks", blocks);
  decode(d, src, blocks, dst);
}

namespace detail {
void dequantize_blocks_portable(DType d, const std::byte* src, int64_t blocks, float* dst) {
  TESSERA_CHECK(dtype_is_block(d) && blocks >= 0, "dequantize_blocks_portable: {} blocks of {}", blocks,
                dtype_name(d));
  decode_portable(d, src, blocks, dst);
}
}  // namespace detail

int block_scale_offsets(DType d, size_t (&offsets)[2]) {
  TESSERA_CHECK(dtype_is_block(d), "block_scale_offsets: {} is not a block format", dtype_name(d));
  offsets[0] = 0;
  offsets[1] = 2;
  return d == DType::q4_1 ? 2 : 1;
}

}  // namespace tessera
