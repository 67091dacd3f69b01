#include "tessera/kernels/softmax.h"

#include <algorithm>
#include <limits>

#include "scratch.h"
#include "tessera/kernels/nonlinear.h"

namespace tessera::kernels {
namespace {

// Per row: two lane folds (max, sum) and one fp32 reciprocal.
constexpr int64_t kSoftmaxRowCycles = 24;

}  // namespace

void softmax_rows(const bf16* x, bf16* out, int64_t rows, int64_t n) {
  float* p = scratch_f32(ScratchSlot::row, n);
  for (int64_t r = 0; r < rows; ++r) {
    const bf16* xr = x + r * n;
    bf16_to_f32_n(xr, p, n);
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, p[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      p[j] = exp_tile(p[j] - mx);
      sum += p[j];
    }
    float inv = recip_tile(sum);
    bf16* o = out + r * n;
    for (int64_t j = 0; j < n; ++j) o[j] = f32_to_bf16(p[j] * inv);
  }
}

std::vector<TileKernel> softmax_kernels() {
  static constexpr const char* name = "softmax";
  struct Dims {
    int64_t rows, n;
  };
  auto dims = [](const npu::KernelParams& p) {
    return Dims{param_in(p, "rows", 1, 1 << 20, name), param_in(p, "n", 1, 1 << 24, name)};
  };
  return {make_tile_kernel(
      name,
      [=](const npu::KernelInvocation& inv) {
        auto [rows, n] = dims(*inv.params);
        softmax_rows(arg_ptr<const bf16>(inv, 0, rows * n, name, "x"),
                     arg_ptr<bf16>(inv, 1, rows * n, name, "out"), rows, n);
      },
      // Per vector: max, subtract, exp (2), sum, scale = 6 ops.
      [=](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        auto [rows, n] = dims(p);
        return static_cast<double>(rows) * (vector_cycles(n, kSoftmaxOps, s) + fixed_cycles(kSoftmaxRowCycles));
      },
      [=](const npu::KernelParams& p) {
        auto [rows, n] = dims(p);
        return 2 * 2 * rows * n;
      })};
}

}  // namespace tessera::kernels
