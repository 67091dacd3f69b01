#include "tessera/oracle/rope.h"

#include <cmath>
#include <numbers>

#include "tessera/core/error.h"

namespace tessera::oracle {

namespace {

// transformers' _compute_llama3_parameters: wavelengths longer than
// original_max / low_freq_factor are slowed by `factor`, shorter than
// original_max / high_freq_factor are kept, and the band between is a linear
// blend in original_max / wavelen.
void apply_llama3_scaling(const model::RopeScaling& s, std::vector<float>& inv_freq) {
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  for (float& f : inv_freq) {
    const double inv = f;
    const double wavelen = 2.0 * std::numbers::pi / inv;
    double scaled = inv;
    if (wavelen > low_wavelen) {
      scaled = inv / s.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      scaled = (1.0 - smooth) * inv / s.factor + smooth * inv;
    }
    f = static_cast<float>(scaled);
  }
}

}  // namespace

std::vector<float> rope_inv_freq(const model::ModelConfig& c) {
  if (c.head_dim <= 0 || c.head_dim % 2 != 0)
    throw_error<ConfigError>("{}: head_dim {} must be positive and even for RoPE", c.name,
                             c.head_dim);
  const int64_t half = c.head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    // HF computes the exponent 2i/d in fp32 and the power in fp32; doing it in
    // double and rounding once differs by at most an ulp of the result.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(c.head_dim);
    inv[static_cast<size_t>(i)] = static_cast<float>(1.0 / std::pow(c.rope_theta, expo));
  }
  if (c.rope_scaling.type == model::RopeScaling::Type::llama3)
    apply_llama3_scaling(c.rope_scaling, inv);
  return inv;
}

RopeTable rope_table(std::span<const float> inv_freq, int64_t first_pos, int64_t count) {
  TESSERA_CHECK(first_pos >= 0 && count >= 0, "rope_table({}, {})", first_pos, count);
  RopeTable t;
  const auto half = static_cast<int64_t>(inv_freq.size());
  t.head_dim = 2 * half;
  t.first_pos = first_pos;
  t.count = count;
  t.cos.resize(static_cast<size_t>(count * half));
  t.sin.resize(t.cos.size());
  for (int64_t p = 0; p < count; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      // The angle is an fp32 product as in HF (positions @ inv_freq in fp32);
      // cos/sin of that fp32 angle are then evaluated accurately.
      const float angle = static_cast<float>(first_pos + p) * inv_freq[static_cast<size_t>(i)];
      const auto k = static_cast<size_t>(p * half + i);
      t.cos[k] = static_cast<float>(std::cos(static_cast<double>(angle)));
      t.sin[k] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
  return t;
}

RopeTable rope_table(const model::ModelConfig& c, int64_t first_pos, int64_t count) {
  const std::vector<float> inv = rope_inv_freq(c);
  return rope_table(inv, first_pos, count);
}

const float* RopeTable::cos_row(int64_t pos) const {
  TESSERA_CHECK(pos >= first_pos && pos < first_pos + count, "rope position {} not in [{}, {})",
                pos, first_pos, first_pos + count);
  return cos.data() + (pos - first_pos) * (head_dim / 2);
}

const float* RopeTable::sin_row(int64_t pos) const {
  TESSERA_CHECK(pos >= first_pos && pos < first_pos + count, "rope position {} not in [{}, {})",
                pos, first_pos, first_pos + count);
  return sin.data() + (pos - first_pos) * (head_dim / 2);
}

void apply_rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos_half,
                const float* sin_half) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      // HF: q * cos + rotate_half(q) * sin; each product rounded to fp32 first.
      v[i] = a * cos_half[i] + (-b) * sin_half[i];
      v[i + half] = b * cos_half[i] + a * sin_half[i];
    }
  }
}

}  // namespace tessera::oracle
