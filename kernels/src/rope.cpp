#include "tessera/core/mutants.h"
#include "tessera/kernels/rope.h"

#include "scratch.h"

namespace tessera::kernels {

void rope_rows(const bf16* x, const float* cos, const float* sin, bf16* out, const RopeDims& d) {
  const int64_t half = d.head_dim / 2;
  for (int64_t r = 0; r < d.rows; ++r) {
    const float* c = cos + r * half;
    const float* s = sin + r * half;
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t base = (r * d.heads + h) * d.head_dim;
      const bf16* xa = x + base;
      const bf16* xb = xa + half;
      bf16* oa = out + base;
      bf16* ob = oa + half;
      for (int64_t i = 0; i < half; ++i) {
        float a = bf16_to_f32(xa[i]), b = bf16_to_f32(xb[i]);
        oa[i] = f32_to_bf16(a * c[i] - b * s[i]);
        ob[i] = f32_to_bf16(b * c[i] + a * s[i]);
        if (mutant_on(Mutant::rope_truncate)) oa[i] = f32_to_bf16_truncate(a * c[i] - b * s[i]), ob[i] = f32_to_bf16_truncate(b * c[i] + a * s[i]);
        if (mutant_on(Mutant::rope_sin_sign_last_pair) && i + 1 == half) oa[i] = f32_to_bf16(a * c[i] + b * s[i]), ob[i] = f32_to_bf16(b * c[i] - a * s[i]);
      }
    }
  }
}

namespace {

constexpr const char* kRopeName = "rope";

RopeDims dims_of(const npu::KernelParams& p) {
  RopeDims d{param_in(p, "rows", 1, 1 << 20, kRopeName), param_in(p, "heads", 1, 1024, kRopeName),
             param_in(p, "head_dim", 2, 4096, kRopeName)};
  if (d.head_dim % 2 != 0) {
    throw_error<KernelArgError>("kernel rope: head_dim {} is odd (rotate_half pairs i, i+d/2)",
                                d.head_dim);
  }
  return d;
}

bool bf16_table(const npu::KernelParams& p) {
  std::string t = param_str_or(p, "table", "f32", kRopeName);
  if (t != "f32" && t != "bf16") {
    throw_error<KernelArgError>("kernel rope: table '{}' is neither 'f32' nor 'bf16'", t);
  }
  return t == "bf16";
}

void run_rope(const npu::KernelInvocation& inv) {
  RopeDims d = dims_of(*inv.params);
  const int64_t elems = d.rows * d.heads * d.head_dim, table = d.rows * d.head_dim / 2;
  const auto* x = arg_ptr<const bf16>(inv, 0, elems, kRopeName, "x");
  auto* out = arg_ptr<bf16>(inv, 3, elems, kRopeName, "out");
  if (!bf16_table(*inv.params)) {
    rope_rows(x, arg_ptr<const float>(inv, 1, table, kRopeName, "cos"),
              arg_ptr<const float>(inv, 2, table, kRopeName, "sin"), out, d);
    return;
  }
  float* cs = scratch_f32(ScratchSlot::table, 2 * table);
  bf16_to_f32_n(arg_ptr<const bf16>(inv, 1, table, kRopeName, "cos"), cs, table);
  bf16_to_f32_n(arg_ptr<const bf16>(inv, 2, table, kRopeName, "sin"), cs + table, table);
  rope_rows(x, cs, cs + table, out, d);
}

}  // namespace

std::vector<TileKernel> rope_kernels() {
  return {make_tile_kernel(
      kRopeName, run_rope,
      // Per output vector: one multiply and one multiply-accumulate.
      [](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        RopeDims d = dims_of(p);
        return d.rows * d.heads * vector_cycles(d.head_dim, 2, s);
      },
      [](const npu::KernelParams& p) {
        RopeDims d = dims_of(p);
        int64_t table_elem = bf16_table(p) ? 2 : 4;
        return 2 * 2 * d.rows * d.heads * d.head_dim + 2 * table_elem * d.rows * d.head_dim / 2;
      })};
}

}  // namespace tessera::kernels
