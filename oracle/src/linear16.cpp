// linear() on weights kept in their 16-bit source dtype (ops.h): the oracle's
// memory is the mapped checkpoint, not a 4-byte copy of every parameter.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include <cblas.h>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/core/threads.h"
#include "tessera/oracle/ops.h"

namespace tessera::oracle {

void rows_to_f32(const Tensor& t, int64_t row0, int64_t n, float* dst) {
  TESSERA_CHECK(t.rank() == 2 && row0 >= 0 && n >= 0 && row0 + n <= t.dim(0),
                "rows [{}, {}) of a tensor of shape rank {} with {} rows", row0, row0 + n, t.rank(),
                t.rank() > 0 ? t.dim(0) : 0);
  const int64_t width = t.dim(1);
  const auto first = static_cast<size_t>(row0 * width), count = static_cast<size_t>(n * width);
  const std::span<float> out(dst, count);
  switch (t.dtype()) {
    case DType::f32:
      std::memcpy(dst, t.as<float>().data() + first, count * sizeof(float));
      break;
    case DType::bf16:
      bf16_to_f32(t.as<bf16>().subspan(first, count), out);
      break;
    case DType::f16:
      f16_to_f32(t.as<uint16_t>().subspan(first, count), out);
      break;
  }
}

namespace {

// OpenBLAS (0.3, interface/gemv.c and driver/level2/gemv_thread.c) runs a
// gemv of out * in >= 9216 multiply-adds on its threads, giving each a range
// of ceil(rows left / threads left) rows (at least 4), and each range ends in
// its own 1-3 row tail, so a whole-matrix sgemv sums a row differently on
// another thread count. Blocks keep the tails where a 2-thread call puts them
// (the count every oracle figure so far was recorded with), whatever the
// thread count: each block is one range of its own, computed alike everywhere.
constexpr int64_t kBlasThreadedMacs = 9216;
constexpr int64_t kRanges = 2;

std::vector<int64_t> blas_ranges(int64_t out, int64_t in) {
  const int64_t threads = out * in < kBlasThreadedMacs ? 1 : kRanges;
  std::vector<int64_t> bounds = {0};
  for (int64_t left = out, t = 0; left > 0; ++t) {
    int64_t width = std::max<int64_t>(4, (left + threads - t - 1) / std::max<int64_t>(1, threads - t));
    width = std::min(width, left);
    bounds.push_back(bounds.back() + width);
    left -= width;
  }
  return bounds;
}

// Rows per block: a multiple of 4 small enough that OpenBLAS runs the block's
// sgemv as one range (under 9216 multiply-adds, or 4 rows, which it never
// splits), so the f32 copy of a block (<= 36 KiB, or 4 rows) stays in cache.
int64_t block_rows(int64_t in) {
  return std::max<int64_t>(4, (kBlasThreadedMacs - 1) / std::max<int64_t>(in, 1) / 4 * 4);
}

// One block: a single-range sgemv (OpenBLAS never splits it).
void sgemv_block(const float* x, int64_t in, const float* w, int64_t n, float* y) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(in), 1.0f, w,
              static_cast<int>(in), x, 1, 0.0f, y, 1);
}

// `w` is either a 2-D tensor (any dtype, widened a block at a time) or, when
// `wf` is set, row-major f32 read in place.
void gemv_blocks(const float* x, int64_t in, const Tensor* w, const float* wf, int64_t out, float* y) {
  TESSERA_CHECK(in <= std::numeric_limits<int>::max() && out <= std::numeric_limits<int>::max(),
                "gemv {} x {} exceeds the BLAS int range", out, in);
  const int64_t block = block_rows(in);
  std::vector<std::pair<int64_t, int64_t>> blocks;  // (first row, rows)
  const std::vector<int64_t> bounds = blas_ranges(out, in);
  for (size_t r = 0; r + 1 < bounds.size(); ++r)
    for (int64_t b = bounds[r]; b < bounds[r + 1]; b += block)
      blocks.emplace_back(b, std::min(block, bounds[r + 1] - b));
  // Each block is computed whole by one thread: the result does not depend on
  // tessera's thread count either.
  parallel_for(blocks.size(), [&](size_t b0, size_t b1) {
    std::vector<float> buf(wf ? 0 : static_cast<size_t>(block * in));
    for (size_t b = b0; b < b1; ++b) {
      const auto [r0, n] = blocks[b];
      if (wf) {
        sgemv_block(x, in, wf + r0 * in, n, y + r0);
        continue;
      }
      rows_to_f32(*w, r0, n, buf.data());
      sgemv_block(x, in, buf.data(), n, y + r0);
    }
  });
}

}  // namespace

void gemv(const float* x, int64_t in, const float* w, int64_t out, float* y) {
  gemv_blocks(x, in, nullptr, w, out, y);
}

void linear(const float* x, int64_t rows, int64_t in, const Tensor& w, int64_t out,
            const float* bias, float* y) {
  TESSERA_CHECK(w.rank() == 2 && w.dim(0) == out && w.dim(1) == in,
                "weight of shape ({}, {}) for a linear {} -> {}", w.rank() > 0 ? w.dim(0) : 0,
                w.rank() > 1 ? w.dim(1) : 0, in, out);
  if (w.dtype() == DType::f32) return linear(x, rows, in, w.as<float>().data(), out, bias, y);
  if (rows == 1) {
    gemv_blocks(x, in, &w, nullptr, out, y);
  } else {
    std::vector<float> wide(static_cast<size_t>(out * in));
    parallel_for(static_cast<size_t>(out), [&](size_t r0, size_t r1) {
      rows_to_f32(w, static_cast<int64_t>(r0), static_cast<int64_t>(r1 - r0),
                  wide.data() + r0 * static_cast<size_t>(in));
    });
    linear(x, rows, in, wide.data(), out, nullptr, y);
  }
  if (bias == nullptr) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) y[r * out + o] += bias[o];
}

}  // namespace tessera::oracle
