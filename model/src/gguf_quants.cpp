// ggml tensor types and their dequantizers. Semantics follow gguf-py's
// quants.py (the reference the fixture in tests/data/gguf is made with): each
// block carries f16 scale(s) and packed integers, and the f32 result is
// formed with exactly the same operations in the same order. This file is
// compiled with -ffp-contract=off (model/CMakeLists.txt) so that `d * q + m`
// stays two roundings, as numpy computes it, and never becomes one FMA.
#include <cstring>

#include "tessera/core/bf16.h"
#include "tessera/core/quant_blocks.h"
#include "tessera/core/tensor.h"
#include "tessera/model/gguf.h"

namespace tessera::model {
namespace {

constexpr int64_t kQK = 256;  // QK_K: super-block size of the K-quants

uint16_t u16_at(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
float f16_at(const std::byte* p) { return f16_to_f32(u16_at(p)); }
uint8_t u8(const std::byte* p, int64_t i) { return std::to_integer<uint8_t>(p[i]); }

// ---- one block each: src points at the block, dst at its block_size outputs ----

void deq_f32(const std::byte* s, float* d) { std::memcpy(d, s, 4); }
void deq_f16(const std::byte* s, float* d) { *d = f16_at(s); }
void deq_bf16(const std::byte* s, float* d) { *d = bf16_to_f32(bf16{u16_at(s)}); }

// The 32-element block formats decode in core (quant_blocks.h), where the
// oracle's GEMV decodes them too: one definition of their arithmetic.
void deq_q8_0(const std::byte* s, float* out) { dequantize_blocks(DType::q8_0, s, 1, out); }
void deq_q4_0(const std::byte* s, float* out) { dequantize_blocks(DType::q4_0, s, 1, out); }
void deq_q4_1(const std::byte* s, float* out) { dequantize_blocks(DType::q4_1, s, 1, out); }

// Q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins for 8 sub-blocks of
// 32, 128 bytes of nibbles. Sub-block j: scale/min bytes j (j < 4) or packed
// from bytes j+4 and the top bits of j-4 / j (j >= 4). Chunk c of 32 bytes
// holds sub-block 2c in its low nibbles and 2c+1 in its high nibbles.
void deq_q4_k(const std::byte* s, float* out) {
  const float d = f16_at(s), dmin = f16_at(s + 2);
  const std::byte* sc = s + 4;
  const std::byte* qs = s + 16;
  for (int j = 0; j < 8; ++j) {
    uint8_t scale, min;
    if (j < 4) {
      scale = u8(sc, j) & 0x3F;
      min = u8(sc, j + 4) & 0x3F;
    } else {
      scale = static_cast<uint8_t>((u8(sc, j + 4) & 0x0F) | ((u8(sc, j - 4) >> 2) & 0x30));
      min = static_cast<uint8_t>((u8(sc, j + 4) >> 4) | ((u8(sc, j) >> 2) & 0x30));
    }
    const float dj = d * static_cast<float>(scale);
    const float mj = dmin * static_cast<float>(min);
    const int chunk = j / 2, shift = (j % 2) * 4;
    for (int i = 0; i < 32; ++i) {
      const int q = (u8(qs, chunk * 32 + i) >> shift) & 0x0F;
      out[j * 32 + i] = dj * static_cast<float>(q) - mj;
    }
  }
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales
// (one per 16 elements), f16 d. Element e: half h = e / 128, r = e % 128; low
// nibble of byte h*64 + r%64 (shift 4 when r >= 64), high bits 2*(r/32) of
// byte h*32 + r%32; value (d * scale) * (q - 32).
void deq_q6_k(const std::byte* s, float* out) {
  const std::byte* ql = s;
  const std::byte* qh = s + kQK / 2;
  const std::byte* scales = s + kQK / 2 + kQK / 4;
  const float d = f16_at(s + kQK / 2 + kQK / 4 + kQK / 16);
  for (int e = 0; e < kQK; ++e) {
    const int h = e / 128, r = e % 128;
    const int lo = (u8(ql, h * 64 + r % 64) >> (r >= 64 ? 4 : 0)) & 0x0F;
    const int hi = (u8(qh, h * 32 + r % 32) >> (2 * (r / 32))) & 0x03;
    const float de = d * static_cast<float>(static_cast<int8_t>(u8(scales, e / 16)));
    out[e] = de * static_cast<float>((lo | (hi << 4)) - 32);
  }
}

using BlockFn = void (*)(const std::byte*, float*);

struct TypeRow {
  GgmlTypeInfo info;
  BlockFn fn;
};

const std::vector<TypeRow>& rows() {
  // Sizes as gguf-py's GGML_QUANT_SIZES; only the types with a BlockFn are
  // dequantizable.
  static const std::vector<TypeRow> t = {
      {{0, "F32", 1, 4, true}, deq_f32},
      {{1, "F16", 1, 2, true}, deq_f16},
      {{2, "Q4_0", 32, 18, true}, deq_q4_0},
      {{3, "Q4_1", 32, 20, true}, deq_q4_1},
      {{6, "Q5_0", 32, 22, false}, nullptr},
      {{7, "Q5_1", 32, 24, false}, nullptr},
      {{8, "Q8_0", 32, 34, true}, deq_q8_0},
      {{9, "Q8_1", 32, 40, false}, nullptr},
      {{10, "Q2_K", 256, 84, false}, nullptr},
      {{11, "Q3_K", 256, 110, false}, nullptr},
      {{12, "Q4_K", 256, 144, true}, deq_q4_k},
      {{13, "Q5_K", 256, 176, false}, nullptr},
      {{14, "Q6_K", 256, 210, true}, deq_q6_k},
      {{15, "Q8_K", 256, 292, false}, nullptr},
      {{16, "IQ2_XXS", 256, 66, false}, nullptr},
      {{17, "IQ2_XS", 256, 74, false}, nullptr},
      {{18, "IQ3_XXS", 256, 98, false}, nullptr},
      {{19, "IQ1_S", 256, 50, false}, nullptr},
      {{20, "IQ4_NL", 32, 18, false}, nullptr},
      {{21, "IQ3_S", 256, 110, false}, nullptr},
      {{22, "IQ2_S", 256, 82, false}, nullptr},
      {{23, "IQ4_XS", 256, 136, false}, nullptr},
      {{24, "I8", 1, 1, false}, nullptr},
      {{25, "I16", 1, 2, false}, nullptr},
      {{26, "I32", 1, 4, false}, nullptr},
      {{27, "I64", 1, 8, false}, nullptr},
      {{28, "F64", 1, 8, false}, nullptr},
      {{29, "IQ1_M", 256, 56, false}, nullptr},
      {{30, "BF16", 1, 2, true}, deq_bf16},
      {{34, "TQ1_0", 256, 54, false}, nullptr},
      {{35, "TQ2_0", 256, 66, false}, nullptr},
      {{39, "MXFP4", 32, 17, false}, nullptr},
  };
  return t;
}

const TypeRow* row(uint32_t id) {
  for (const auto& r : rows())
    if (r.info.id == id) return &r;
  return nullptr;
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  const TypeRow* r = row(id);
  return r ? &r->info : nullptr;
}

const std::vector<GgmlTypeInfo>& ggml_types() {
  static const std::vector<GgmlTypeInfo> v = [] {
    std::vector<GgmlTypeInfo> out;
    for (const auto& r : rows()) out.push_back(r.info);
    return out;
  }();
  return v;
}

std::optional<DType> ggml_block_dtype(uint32_t type) {
  switch (type) {
    case 2: return DType::q4_0;
    case 3: return DType::q4_1;
    case 8: return DType::q8_0;
    default: return std::nullopt;
  }
}

void ggml_dequantize(uint32_t type, std::span<const std::byte> src, std::span<float> dst,
                     const std::string& what) {
  const TypeRow* r = row(type);
  if (!r) throw_error<GgufError>("{}: unknown ggml type {}", what, type);
  if (!r->fn) {
    std::string names;
    for (const auto& x : rows())
      if (x.fn) names += (names.empty() ? "" : ", ") + std::string(x.info.name);
    throw_error<UnsupportedError>("{}: ggml type {} cannot be dequantized (supported: {})", what,
                                  r->info.name, names);
  }
  const auto bs = static_cast<size_t>(r->info.block_size);
  const auto ts = static_cast<size_t>(r->info.type_size);
  if (dst.size() % bs != 0 || src.size() != dst.size() / bs * ts)
    throw_error<GgufError>("{}: {} elements of {} need {} bytes, got {}", what, dst.size(),
                           r->info.name, dst.size() / bs * ts, src.size());
  const size_t blocks = dst.size() / bs;
  if (const std::optional<DType> d = ggml_block_dtype(type))
    return dequantize_blocks(*d, src.data(), static_cast<int64_t>(blocks), dst.data());
  for (size_t b = 0; b < blocks; ++b) r->fn(src.data() + b * ts, dst.data() + b * bs);
}

}  // namespace tessera::model
