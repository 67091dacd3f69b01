#include "tessera/oracle/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include <cblas.h>

#include "tessera/core/error.h"
#include "tessera/core/threads.h"

namespace tessera::oracle {

namespace {
int blas_int(int64_t v) {
  TESSERA_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "BLAS dimension {} out of range",
                v);
  return static_cast<int>(v);
}
}  // namespace

void linear(const float* x, int64_t rows, int64_t in, const float* w, int64_t out,
            const float* bias, float* y) {
  if (rows == 1) {  // decode: a matrix-vector product, which sgemm may not pick itself
    gemv(x, in, w, out, y);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(rows), blas_int(out),
                blas_int(in), 1.0f, x, blas_int(in), w, blas_int(in), 0.0f, y, blas_int(out));
  }
  if (bias == nullptr) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) y[r * out + o] += bias[o];
}

void rms_norm(const float* x, int64_t rows, int64_t n, const float* w, double eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double sum_sq = 0.0;  // accumulate wide: torch's fp32 reduction is pairwise
    for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const float mean_sq = static_cast<float>(sum_sq / static_cast<double>(n));
    // HF: weight * (x * rsqrt(variance + eps)), the eps added in fp32.
    const float inv = 1.0f / std::sqrt(mean_sq + static_cast<float>(eps));
    for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * inv);
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    y[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void softmax(std::span<float> x) {
  if (x.empty()) return;
  const float m = *std::max_element(x.begin(), x.end());
  double sum = 0.0;
  for (float& v : x) {
    v = std::exp(v - m);
    sum += v;
  }
  const auto inv = static_cast<float>(1.0 / sum);
  for (float& v : x) v *= inv;
}

int64_t kv_head_for(int64_t q_head, int64_t num_heads, int64_t num_kv_heads) {
  return q_head / (num_heads / num_kv_heads);
}

namespace {

// One head of causal_attention: scores, the masked softmax, out columns.
void attend_head(const AttentionShape& s, int64_t h, int64_t keys, float scale, const float* q,
                 const float* k, const float* v, float* out,
                 int64_t (*kv_map)(int64_t, int64_t, int64_t), float* scores) {
  const int64_t q_stride = s.num_heads * s.head_dim;
  const int64_t kv_stride = s.num_kv_heads * s.head_dim;
  const int64_t kvh = kv_map(h, s.num_heads, s.num_kv_heads);
  const float* qh = q + h * s.head_dim;
  const float* kh = k + kvh * s.head_dim;
  const float* vh = v + kvh * s.head_dim;
  // scores[rows, keys] = q_h k_h^T * scale
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(s.rows), blas_int(keys),
              blas_int(s.head_dim), scale, qh, blas_int(q_stride), kh, blas_int(kv_stride), 0.0f,
              scores, blas_int(keys));
  for (int64_t r = 0; r < s.rows; ++r) {
    // Query row r sits at position first_pos + r and sees keys 0..that position;
    // masked keys get exactly zero weight (HF adds dtype-min, which underflows to 0).
    const int64_t visible = s.first_pos + r + 1;
    std::span<float> row(scores + r * keys, static_cast<size_t>(keys));
    std::fill(row.begin() + visible, row.end(), 0.0f);
    softmax(row.first(static_cast<size_t>(visible)));
  }
  // out_h[rows, head_dim] = P[rows, keys] v_h[keys, head_dim]
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(s.rows), blas_int(s.head_dim),
              blas_int(keys), 1.0f, scores, blas_int(keys), vh, blas_int(kv_stride), 0.0f,
              out + h * s.head_dim, blas_int(q_stride));
}

}  // namespace

void causal_attention(const AttentionShape& s, const float* q, const float* k, const float* v,
                      float* out, int64_t (*kv_map)(int64_t, int64_t, int64_t)) {
  TESSERA_CHECK(s.num_kv_heads > 0 && s.num_heads % s.num_kv_heads == 0,
                "{} query heads are not a multiple of {} kv heads", s.num_heads, s.num_kv_heads);
  const int64_t keys = s.first_pos + s.rows;
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  // Heads are independent: each writes its own output columns with the same
  // calls, so the bits do not depend on the split. A decode row's heads go
  // over the pool; a prefill's larger products stay on OpenBLAS's threads.
  auto heads = [&](size_t h0, size_t h1) {
    std::vector<float> scores(static_cast<size_t>(s.rows * keys));
    for (auto h = static_cast<int64_t>(h0); h < static_cast<int64_t>(h1); ++h)
      attend_head(s, h, keys, scale, q, k, v, out, kv_map, scores.data());
  };
  if (s.rows == 1)
    parallel_for(static_cast<size_t>(s.num_heads), heads);
  else
    heads(0, static_cast<size_t>(s.num_heads));
}

}  // namespace tessera::oracle
