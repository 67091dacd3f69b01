#pragma once
// Rotary position embedding exactly as Hugging Face transformers computes it:
// inverse frequencies theta^(-2i/d) (optionally rescaled by the "llama3" rule of
// modeling_rope_utils), angles pos * inv_freq in fp32, and the rotate_half
// pairing (element i pairs with i + d/2, not with i + 1). The table is its own
// object because NPU kernels take it as an input instead of computing sin/cos.
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/model/config.h"

namespace tessera::oracle {

// head_dim / 2 inverse frequencies for `c` (rope_theta, rope_scaling).
std::vector<float> rope_inv_freq(const model::ModelConfig& c);

// cos / sin of pos * inv_freq[i] for positions [first_pos, first_pos + count):
// row-major [count, head_dim / 2]. HF duplicates each half (cat(freqs, freqs));
// storing the half once is enough because both halves use the same angle.
struct RopeTable {
  int64_t head_dim = 0;
  int64_t first_pos = 0;
  int64_t count = 0;
  std::vector<float> cos;
  std::vector<float> sin;

  const float* cos_row(int64_t pos) const;  // pos is absolute; throws if outside
  const float* sin_row(int64_t pos) const;
};

RopeTable rope_table(const model::ModelConfig& c, int64_t first_pos, int64_t count);
RopeTable rope_table(std::span<const float> inv_freq, int64_t first_pos, int64_t count);

// In place on `n_heads` consecutive vectors of head_dim values, one position:
// x' = x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[d/2:], x[:d/2]).
void apply_rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos_half,
                const float* sin_half);

}  // namespace tessera::oracle
