#include "tessera/core/mutants.h"
#include "tessera/kernels/rmsnorm.h"

#include "scratch.h"
#include "tessera/kernels/nonlinear.h"
#include "vec_ops.h"

namespace tessera::kernels {
namespace {

// Lane fold (log2 lanes adds) and the fp32 invsqrt of one row.
constexpr int64_t kRmsRowCycles = 16;

}  // namespace

void rmsnorm_rows(const bf16* x, const bf16* w, bf16* out, int64_t rows, int64_t n, float eps) {
  float* xf = scratch_f32(ScratchSlot::row, 2 * n);
  float* wf = xf + n;
  bf16_to_f32_n(w, wf, n);
  for (int64_t r = 0; r < rows; ++r) {
    bf16_to_f32_n(x + r * n, xf, n);
    float ss = dot(xf, xf, n);
    float inv = rsqrt_tile(ss / static_cast<float>(n - (mutant_on(Mutant::rmsnorm_mean_n_minus_1) ? 1 : 0)) + eps);
    bf16* o = out + r * n;
    for (int64_t j = 0; j < n; ++j) o[j] = f32_to_bf16(xf[j] * inv * wf[j]);
    if (mutant_on(Mutant::rmsnorm_weight_last_one)) o[n - 1] = f32_to_bf16(xf[n - 1] * inv);
  }
}

Cost rmsnorm_cycles(int64_t rows, int64_t n, const npu::DeviceSpec& spec) {
  return static_cast<double>(rows) * (vector_cycles(n, 3, spec) + fixed_cycles(kRmsRowCycles));
}

double required_eps(const npu::KernelParams& p, const char* kernel) {
  double eps = param_float_or(p, "eps", -1.0, kernel);
  if (!(eps > 0.0 && eps < 1.0)) {
    throw_error<KernelArgError>("kernel {}: param 'eps' missing or outside (0, 1)", kernel);
  }
  return eps;
}

std::vector<TileKernel> rmsnorm_kernels() {
  static constexpr const char* name = "rmsnorm";
  struct Dims {
    int64_t rows, n;
  };
  auto dims = [](const npu::KernelParams& p) {
    return Dims{param_in(p, "rows", 1, 1 << 20, name), param_in(p, "n", 1, 1 << 20, name)};
  };
  return {make_tile_kernel(
      name,
      [=](const npu::KernelInvocation& inv) {
        auto [rows, n] = dims(*inv.params);
        float eps = static_cast<float>(required_eps(*inv.params, name)) * (mutant_on(Mutant::rmsnorm_eps_x100) ? 100.0f : 1.0f);
        rmsnorm_rows(arg_ptr<const bf16>(inv, 0, rows * n, name, "x"),
                     arg_ptr<const bf16>(inv, 1, n, name, "w"),
                     arg_ptr<bf16>(inv, 2, rows * n, name, "out"), rows, n, eps);
      },
      [=](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        auto [rows, n] = dims(p);
        return rmsnorm_cycles(rows, n, s);
      },
      [=](const npu::KernelParams& p) {
        auto [rows, n] = dims(p);
        return 2 * (2 * rows * n + n);
      })};
}

}  // namespace tessera::kernels
