// rope against the oracle's apply_rope (HF rotate_half) on the same bf16
// inputs and the oracle's cos/sin table; the planted (i, i+1) pairing must fail.
#include <iostream>

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/rope.h"
#include "tessera/oracle/rope.h"

namespace tessera::kernels::test {
namespace {

enum class RopeBody { kernel, planted_adjacent_pairs };

// The planted bug: GPT-J style pairing (2i, 2i+1) instead of (i, i + d/2),
// with the right angles. Test-only; the product has no such variant.
void rope_adjacent_pairs(const std::vector<bf16>& x, const oracle::RopeTable& t, RopeDims d,
                         std::vector<bf16>& out) {
  for (int64_t r = 0; r < d.rows; ++r)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t i = 0; i < d.head_dim / 2; ++i) {
        int64_t base = (r * d.heads + h) * d.head_dim;
        float a = bf16_to_f32(x[base + 2 * i]), b = bf16_to_f32(x[base + 2 * i + 1]);
        float c = t.cos[r * d.head_dim / 2 + i], s = t.sin[r * d.head_dim / 2 + i];
        out[base + 2 * i] = f32_to_bf16(a * c - b * s);
        out[base + 2 * i + 1] = f32_to_bf16(b * c + a * s);
      }
}

// Each output is a*c -/+ b*s: the kernel's and the oracle's fp32 evaluations
// are each within 2 u32 (|a c| + |b s|) of exact, a bf16 table moves c and s
// by u_bf16 relative (u_bf16 (|a c| + |b s|)), and the output RNE adds
// u_bf16 |ref|.
::testing::AssertionResult check(RopeDims d, int64_t first_pos, bool bf16_table, RopeBody body) {
  std::vector<float> inv_freq(d.head_dim / 2);
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * double(i) / double(d.head_dim)));
  oracle::RopeTable t = oracle::rope_table(inv_freq, first_pos, d.rows);
  const int64_t n = d.rows * d.heads * d.head_dim;
  auto x = random_bf16(n, 31, -2, 2);
  std::vector<bf16> out(n);
  if (body == RopeBody::planted_adjacent_pairs) {
    rope_adjacent_pairs(x, t, d, out);
  } else {
    npu::KernelParams p{{"rows", d.rows}, {"heads", d.heads}, {"head_dim", d.head_dim},
                        {"table", std::string(bf16_table ? "bf16" : "f32")}};
    std::vector<float> c = t.cos, s = t.sin;
    std::vector<bf16> cb(c.size()), sb(s.size());
    f32_to_bf16(c, cb);
    f32_to_bf16(s, sb);
    run_kernel("rope", p,
               {bytes_of(x), bf16_table ? bytes_of(cb) : bytes_of(c),
                bf16_table ? bytes_of(sb) : bytes_of(s), bytes_of(out)});
  }
  std::vector<float> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = bf16_to_f32(x[i]);
  const int64_t half = d.head_dim / 2;
  std::vector<double> bound(n);
  for (int64_t r = 0; r < d.rows; ++r) {
    float* row = ref.data() + r * d.heads * d.head_dim;
    oracle::apply_rope(row, d.heads, d.head_dim, t.cos_row(first_pos + r), t.sin_row(first_pos + r));
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t i = 0; i < d.head_dim; ++i) {
        int64_t e = (r * d.heads + h) * d.head_dim + i, j = i % half;
        int64_t pair = i < half ? e + half : e - half;
        double mag = std::fabs(bf16_to_f32(x[e]) * t.cos[r * half + j]) +
                     std::fabs(bf16_to_f32(x[pair]) * t.sin[r * half + j]);
        bound[e] = (4 * kU32 + (bf16_table ? kUBf16 : 0.0)) * mag + kUBf16 * std::fabs(ref[e]);
      }
  }
  return within(to_f64(out), to_f64(std::span<const float>(ref)), bound);
}

TEST(Rope, MatchesOracleRotateHalf) {
  for (int64_t d : {2, 6, 64, 80, 128}) {
    for (int64_t heads : {1, 9, 14}) {
      for (bool bf16_table : {false, true}) {
        EXPECT_TRUE(check({3, heads, d}, 2040, bf16_table, RopeBody::kernel))
            << "head_dim " << d << " heads " << heads << " bf16 table " << bf16_table;
      }
    }
  }
}

TEST(Rope, PlantedAdjacentPairingFails) {
  ::testing::AssertionResult r = check({3, 2, 64}, 17, false, RopeBody::planted_adjacent_pairs);
  EXPECT_FALSE(r);
  std::cout << "planted (i, i+1) pairing caught: " << r.message() << "\n";
}

TEST(Rope, RejectsOddHeadDim) {
  EXPECT_THROW(tile_kernel_l1_bytes("rope", {{"rows", 1}, {"heads", 1}, {"head_dim", 5}}),
               KernelArgError);
}

}  // namespace
}  // namespace tessera::kernels::test
