#pragma once
// The FP32 building blocks of the oracle, each a plain loop or one BLAS call,
// so that every later kernel has a readable reference to be judged against.
// Matrices are row-major; a weight W is (out_features, in_features) as in HF.
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::oracle {

// y[rows, out] = x[rows, in] * W[out, in]^T (+ bias[out] when non-null).
void linear(const float* x, int64_t rows, int64_t in, const float* w, int64_t out,
            const float* bias, float* y);

// y[out] = W[out, in] x[in] (linear() of one row, decode): each y[o] is
// dot_reference(x, W[o], in), bit for bit, on any ISA, BLAS build or thread
// count. The weights are read once, in place.
void gemv(const float* x, int64_t in, const float* w, int64_t out, float* y);

// The order gemv() sums a row in, as a plain loop: kDotLanes partial sums
// (lane j holds columns j, j + kDotLanes, ...), each product rounded to f32
// before it is added, then folded in halves (lane j += lane j + 8, + 4, + 2,
// + 1). The lanes let the kernel run 16 multiply-adds at a time; without a
// fixed order its bits would follow the machine.
inline constexpr int kDotLanes = 16;
float dot_reference(const float* x, const float* w, int64_t in);

namespace detail {
// gemv()'s kernel for bf16 rows on CPUs without AVX2 (any x86-64 runs it, so
// the tests check it against dot_reference() on every machine).
void gemv_bf16_baseline(const float* x, int64_t in, const bf16* w, int64_t rows, float* y);
// gemv()'s kernels for block-format rows (Q4_0 / Q4_1 / Q8_0, in a whole
// number of blocks), by instruction set: gemv() takes the widest one the CPU
// runs, and the tests check every one it runs against block_dot_reference().
enum class BlockKernel { scalar, avx2, avx512 };
bool block_kernel_runs(BlockKernel k);
BlockKernel widest_block_kernel();
// x_sums: block_x_sums(d, x, in), computed once for a call's row chunks
// (nullptr: computed here).
void gemv_blocks(BlockKernel k, DType d, const float* x, int64_t in, const std::byte* w, int64_t rows, float* y,
                 const float* x_sums = nullptr);
std::vector<float> block_x_sums(DType d, const float* x, int64_t in);
}  // namespace detail

// The order gemv() sums a block-format row in (Q4_0 / Q4_1 / Q8_0, a GGUF's
// tensors as stored; in a whole number of blocks), as a plain loop. A row is
// summed as it is stored, not decoded first: block b (columns 32b..32b+31)
// has integers q (q8_0 q, q4_0 q - 8, q4_1 q; exact floats), scale d and,
// for Q4_1, minimum m, so that weight j is d q_j (+ m). Per block,
//   t[c] = fma(q[16 + c], x[16 + c], q[c] * x[c])   for the 16 lanes c,
//   acc_{b mod 2}[c] = fma(d, t[c], acc_{b mod 2}[c]),
//   Q4_1 only: ms_{b mod 2} = fma(m, S_b, ms_{b mod 2}), S_b = the sum of the
//   block's x (x[c] + x[16 + c] in lane c, folded as dot_reference() folds);
// then y = fold(acc_0 + acc_1) (+ (ms_0 + ms_1)). Every term reaches y through
// at most ceil(blocks / 2) + 8 roundings, so with u = 2^-24 and
// g = (ceil(blocks / 2) + 8) u / (1 - (ceil(blocks / 2) + 8) u),
//   |y - sum_j w_j x_j| <= g * (sum_j |d q_j x_j| + sum_b |m_b| sum_j |x_j|)
// (tests/oracle/gemv_blocks_test.cpp checks that bound against a double-precision sum).
float block_dot_reference(DType d, const float* x, const std::byte* row, int64_t in);

// linear() with W a 2-D F32, BF16, F16 or block-format (Q4_0, Q4_1, Q8_0)
// tensor (out, in), never converted whole when rows == 1: gemv() reads bf16
// rows in place (widened in a register: exact) and f16 rows decoded a few at
// a time into a buffer that stays in cache, so every bit of y is that of
// linear() on the decoded matrix; block rows are summed as stored, each y[o]
// block_dot_reference() of its row, bit for bit. rows > 1 (sgemm) widens the
// whole matrix for the call.
void linear(const float* x, int64_t rows, int64_t in, const Tensor& w, int64_t out,
            const float* bias, float* y);

// Rows [row0, row0 + n) of a 2-D tensor as f32 (exact widening, or the
// block format's decoding).
void rows_to_f32(const Tensor& t, int64_t row0, int64_t n, float* dst);

// HF LlamaRMSNorm in fp32: y = x * rsqrt(mean(x^2) + eps) * w, applied to each
// of `rows` vectors of length n.
void rms_norm(const float* x, int64_t rows, int64_t n, const float* w, double eps, float* y);

// silu(gate) * up, elementwise (the SwiGLU activation).
void swiglu(const float* gate, const float* up, int64_t n, float* y);

// Numerically safe softmax in place (subtract the max, exponentiate, normalise).
void softmax(std::span<float> x);

// Which KV head serves query head h under grouped-query attention: query heads
// come in num_kv_heads contiguous groups (HF repeat_kv), so h / group.
int64_t kv_head_for(int64_t q_head, int64_t num_heads, int64_t num_kv_heads);

// Shapes of one causal attention call. q has rows for positions
// [first_pos, first_pos + rows); keys/values cover positions [0, first_pos + rows).
struct AttentionShape {
  int64_t rows = 0;          // query positions in this call
  int64_t first_pos = 0;     // absolute position of query row 0
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

// out[rows, num_heads * head_dim] = softmax(q k^T / sqrt(head_dim) + causal) v,
// per head; k and v are [first_pos + rows, num_kv_heads * head_dim].
// `kv_map` maps a query head to its KV head (kv_head_for unless a test plants
// another mapping).
void causal_attention(const AttentionShape& s, const float* q, const float* k, const float* v,
                      float* out, int64_t (*kv_map)(int64_t, int64_t, int64_t) = kv_head_for);

}  // namespace tessera::oracle
